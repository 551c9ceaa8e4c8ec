"""Deterministic workload names and ownership labels for an Airflow task.

Why deterministic: a retry, or a worker that crashed after submitting, must find the workload its
earlier try created instead of submitting a second one on the same TPU slices. The name is a pure
function of (dag_id, task_id, run_id, map_index) plus a disruption-attempt number, so every try of
a task computes the same name, and a create that answers 409 means "it is already there".

The length budget. Every object the controllers derive from a workload name must stay within the
Kubernetes limits, or the JobSet webhook rejects the whole workload:

====================================================  ==================  =========
derived from the workload name N                      length              limit
====================================================  ==================  =========
PathwaysJob, JobSet, headless Service (subdomain)     N                   63
child Job ``N-pathways-head-0`` (label job-name)      N + 16              63
child Job ``N-worker-<slice>`` (≤ 999 slices)         N + 11              63
pod hostname ``<job>-<podIndex>`` (≤ 99 VMs)          N + 19              63
coordinator label ``N-pathways-head-0-0.N``           2N + 19             63
Kueue Workload ``jobset-N-<5 hex>``                   N + 13              253
====================================================  ==================  =========

The coordinator label binds: 2N + 19 ≤ 63, so N ≤ 22. A name is ``<slug>-<hash>[-<attempt>]``:
slug ≤ 10 characters (from the task id, for humans), hash 8 characters (40 bits of SHA-256 of the
task identity, for uniqueness), attempt ``-1`` … ``-99`` (disruption resubmissions).
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem

MAX_WORKLOAD_NAME = 22
"""Longest workload name whose derived names all fit (see the module docstring)."""
MAX_ATTEMPT = 99
HASH_LENGTH = 8
SLUG_LENGTH = MAX_WORKLOAD_NAME - 1 - HASH_LENGTH - len(f"-{MAX_ATTEMPT}")
MAX_LABEL_VALUE = 63

LABEL_PREFIX = "pathways-airflow"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "pathways-airflow"
TASK_KEY_LABEL = f"{LABEL_PREFIX}/task-key"
ATTEMPT_LABEL = f"{LABEL_PREFIX}/attempt"
FIRST_TRY_ANNOTATION = f"{LABEL_PREFIX}/first-try"
"""The first try of the round that submitted a workload (:attr:`TaskIdentity.first_try`)."""

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def _base32(raw: bytes, length: int) -> str:
    """Lowercase RFC 4648 base32: every character is valid in a DNS label."""
    return base64.b32encode(raw).decode().lower()[:length]


def slugify(text: str, max_length: int = SLUG_LENGTH) -> str:
    """A DNS-1035 label prefix for humans: lowercase, ``[a-z0-9-]``, starts with a letter."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"p-{slug}" if slug else "pw"
    return slug[:max_length].rstrip("-")


def is_dns_label(name: str, max_length: int = 63) -> bool:
    """An RFC 1035 label (starts with a letter), as Service and workload names must be."""
    return isinstance(name, str) and len(name) <= max_length and bool(_DNS_LABEL.match(name))


def is_dns1123_label(name: str) -> bool:
    """An RFC 1123 label (may start with a digit), as namespace names must be."""
    return isinstance(name, str) and len(name) <= 63 and bool(_DNS1123_LABEL.match(name))


def label_value(text: str) -> str:
    """Make ``text`` a valid label value; distinct long values stay distinct (hash suffix)."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "_", str(text))
    if len(value) > MAX_LABEL_VALUE:
        value = value[: MAX_LABEL_VALUE - HASH_LENGTH - 1] + "-" + _base32(_digest(text), HASH_LENGTH)
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


@dataclass(frozen=True)
class TaskIdentity:
    """Which Airflow task instance a workload belongs to."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    first_try: int | None = None
    """The first try of the task instance's current round (a clear starts a new one); ``None`` when
    not known. Written on what the task submits, so a try after a clear can tell its own work from
    the work of the round before; not part of :attr:`key`."""

    @property
    def key(self) -> str:
        """A 16-character fingerprint of the task instance; the label that proves ownership."""
        return _digest(self.dag_id, self.task_id, self.run_id, str(self.map_index)).hex()[:16]

    def workload_name(self, attempt: int = 0, prefix: str | None = None) -> str:
        """The workload name for a disruption attempt (0 = first submission)."""
        if not 0 <= attempt <= MAX_ATTEMPT:
            raise InvalidWorkloadSpec(
                [SpecProblem("attempt", attempt, f"must be between 0 and {MAX_ATTEMPT}")]
            )
        check_name_prefix(prefix)
        slug = prefix or slugify(self.task_id)
        digest = _digest(self.dag_id, self.task_id, self.run_id, str(self.map_index))
        name = f"{slug}-{_base32(digest, HASH_LENGTH)}"
        return f"{name}-{attempt}" if attempt else name

    def labels(self, attempt: int = 0) -> dict[str, str]:
        """Labels that let ``kubectl -l`` find a task's workloads and prove they are ours."""
        labels = {
            MANAGED_BY_LABEL: MANAGED_BY_VALUE,
            TASK_KEY_LABEL: self.key,
            f"{LABEL_PREFIX}/dag-id": label_value(self.dag_id),
            f"{LABEL_PREFIX}/task-id": label_value(self.task_id),
            f"{LABEL_PREFIX}/run-id": label_value(self.run_id),
            ATTEMPT_LABEL: str(attempt),
        }
        if self.map_index >= 0:
            labels[f"{LABEL_PREFIX}/map-index"] = str(self.map_index)
        return labels

    def annotations(self) -> dict[str, str]:
        """The full, unsanitised identifiers (labels may be shortened)."""
        notes = {
            f"{LABEL_PREFIX}/dag-id": self.dag_id,
            f"{LABEL_PREFIX}/task-id": self.task_id,
            f"{LABEL_PREFIX}/run-id": self.run_id,
        }
        if self.map_index >= 0:
            notes[f"{LABEL_PREFIX}/map-index"] = str(self.map_index)
        if self.first_try is not None:
            notes[FIRST_TRY_ANNOTATION] = str(self.first_try)
        return notes


def check_name_prefix(prefix: str | None) -> None:
    """A user-chosen prefix replaces the slug, so it has the slug's budget and alphabet."""
    if prefix is None:
        return
    if not is_dns_label(prefix, SLUG_LENGTH):
        raise InvalidWorkloadSpec(
            [
                SpecProblem(
                    "name_prefix",
                    prefix,
                    f"must be 1-{SLUG_LENGTH} characters of [a-z0-9-], start with a letter and "
                    f"end with a letter or digit (the full name, with hash and attempt, must stay "
                    f"within {MAX_WORKLOAD_NAME} characters so every derived pod, job and label fits)",
                )
            ]
        )


def name_problem(name: str, field: str = "name") -> SpecProblem | None:
    """Why a complete workload name cannot be used, or ``None``."""
    if is_dns_label(name, MAX_WORKLOAD_NAME):
        return None
    return SpecProblem(
        field,
        name,
        f"a workload name must be a DNS-1035 label of at most {MAX_WORKLOAD_NAME} characters, so "
        f"that the coordinator label '<name>-pathways-head-0-0.<name>' fits in 63",
    )

"""The one state machine every wait of the provider reads: what a workload is doing now.

QUEUED (suspended / not admitted by Kueue) → PROVISIONING (pods pending) → RUNNING (head
running, all slices ready) → RESTARTING (JobSet restart in progress) → SUCCEEDED | FAILED,
each FAILED carrying a cause. Values are plain data so triggers can serialise them into events.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Mapping

from pathways_airflow import well_known


class Phase(str, enum.Enum):
    QUEUED = "QUEUED"
    PROVISIONING = "PROVISIONING"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class FailureCause(str, enum.Enum):
    USER_CODE = "USER_CODE"
    """The user's program exited non-zero with no sign of an infrastructure disruption."""
    BAD_SPEC = "BAD_SPEC"
    """The controller or the API refused the spec (e.g. a topology the controller rejects)."""
    QUOTA = "QUOTA"
    """Kueue can never admit it (no such LocalQueue, or more than the ClusterQueue holds)."""
    DELETED = "DELETED"
    """The workload disappeared while we waited on it (deleted by someone else)."""
    DISRUPTION = "DISRUPTION"
    """Maintenance, preemption, slice loss: the infrastructure ended it."""
    TIMEOUT = "TIMEOUT"
    """Kueue stopped it at its maximum execution time: the task's own timeout, enforced by the cluster."""
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class WorkloadState:
    """What a workload is doing, computed by :func:`pathways_airflow.state.status.workload_state`."""

    phase: Phase
    message: str = ""
    slices_ready: int = 0
    slices_total: int = 0
    restarts: int = 0
    cause: FailureCause | None = None
    exit_code: int | None = None
    container: str | None = None
    pod: str | None = None
    evidence: tuple[str, ...] = field(default_factory=tuple)
    execution_attempts: int | None = None
    """The JobSet's ``status.executionAttempts`` (KEP-1282, JobSet ≥ 0.13 with its gate on): times
    it ran anew, after a Kueue eviction or a restart of every Job; ``None`` where it is not counted."""

    def with_execution_attempts(self, executions: int | None) -> WorkloadState:
        """The same state, with the JobSet's count of executions (``None``: not counted)."""
        return replace(self, execution_attempts=executions)

    def summary(self) -> str:
        """One line for the task log: ``RUNNING 2/2 slices``, ``FAILED (USER_CODE, exit 3): ...``."""
        text = self.phase.value
        if self.phase in (Phase.RUNNING, Phase.PROVISIONING, Phase.RESTARTING) and self.slices_total:
            text += f" {self.slices_ready}/{self.slices_total} slices"
        if self.restarts:
            text += f" (restarts: {self.restarts})"
        if self.phase is Phase.FAILED:
            detail = self.cause.value if self.cause else "UNKNOWN"
            if self.exit_code is not None:
                detail += f", exit {self.exit_code}"
            text += f" ({detail})"
        if self.message:
            text += f": {self.message}"
        return text

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["phase"] = self.phase.value
        data["cause"] = self.cause.value if self.cause else None
        data["evidence"] = list(self.evidence)
        if self.execution_attempts is None:  # absent when unknown: records and events look as before the field
            del data["execution_attempts"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "WorkloadState":
        return cls(
            phase=Phase(data["phase"]),
            message=data.get("message", ""),
            slices_ready=data.get("slices_ready", 0),
            slices_total=data.get("slices_total", 0),
            restarts=data.get("restarts", 0),
            cause=FailureCause(data["cause"]) if data.get("cause") else None,
            exit_code=data.get("exit_code"),
            container=data.get("container"),
            pod=data.get("pod"),
            evidence=tuple(data.get("evidence") or ()),
            execution_attempts=data.get("execution_attempts"),
        )


@dataclass(frozen=True)
class Observation:
    """Everything read from the cluster about one workload, as plain API dicts."""

    backend: str
    """``pathwaysjob`` or ``jobset``."""
    name: str
    namespace: str
    pathwaysjob: dict[str, Any] | None = None
    jobset: dict[str, Any] | None = None
    pods: tuple[dict[str, Any], ...] = ()
    kueue_workload: dict[str, Any] | None = None
    submitted: bool = True
    """We created (or adopted) it: if it is now missing, it was deleted."""
    jobs: tuple[dict[str, Any], ...] = ()
    """Its child Jobs as last seen (deleted ones too): their counts outlive their pods."""
    derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """What the core works out from these objects, kept for the rest of the look: one look asks the
    same question (which pods are the current run's) several times. Not copied by ``replace``."""


def kueue_workload_of(jobset_uid: str, workloads: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The Kueue Workload Kueue made for the JobSet ``jobset_uid``, if any.

    Kueue's job framework (pkg/controller/jobframework) owns the Workload by the job
    (``ownerReferences``) and labels it ``kueue.x-k8s.io/job-uid``; either names it, so the
    hook (which lists by the label) and the trigger (which reads a shared cache) agree.
    """
    if not jobset_uid:
        return None
    for workload in workloads:
        meta = workload.get("metadata") or {}
        owned = any(ref.get("uid") == jobset_uid for ref in meta.get("ownerReferences") or ())
        if owned or (meta.get("labels") or {}).get(well_known.KUEUE_JOB_UID) == jobset_uid:
            return workload
    return None

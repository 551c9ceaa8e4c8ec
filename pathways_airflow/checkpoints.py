"""Orbax checkpoint layout and commit rules, as MaxText writes them. Pure: no I/O.

Layout: ``<checkpoint_dir>/<step>/items/...`` (+ ``iter/``), where ``checkpoint_dir`` is
MaxText's ``<base_output_directory>/<run_name>/checkpoints``.

When is a step committed (safe to restore, convert or report)?

* On ``gs://`` Orbax writes straight into ``<step>/``: ``_CHECKPOINT_METADATA`` when the save
  *starts*, the arrays, and ``commit_success.txt`` *last*. A step directory without the marker
  is partial — a save in progress or one cut off by maintenance — and must never be used
  (restoring it fails with "Found incomplete checkpoint").
* Elsewhere Orbax writes ``<step>.orbax-checkpoint-tmp[-<suffix>]`` and renames it to ``<step>``
  when done: a plain integer directory name is committed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

COMMIT_MARKER = "commit_success.txt"
METADATA_FILE = "_CHECKPOINT_METADATA"
ITEMS_DIR = "items"
TMP_INFIX = ".orbax-checkpoint-tmp"

_STEP = re.compile(r"^(\d+)$")
_TMP_STEP = re.compile(r"^(\d+)\.orbax-checkpoint-tmp(-.*)?$")


@dataclass(frozen=True, order=True)
class Checkpoint:
    """A committed step under a checkpoint directory."""

    step: int
    uri: str

    @property
    def items_uri(self) -> str:
        """What MaxText's ``load_full_state_path`` / ``load_parameters_path`` points at."""
        return f"{self.uri}/{ITEMS_DIR}"

    def as_xcom(self) -> dict[str, object]:
        return {"step": self.step, "uri": self.uri}


def is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def join(directory: str, *parts: str | int) -> str:
    return "/".join([directory.rstrip("/"), *(str(p).strip("/") for p in parts)])


def step_uri(checkpoint_dir: str, step: int) -> str:
    return join(checkpoint_dir, step)


def step_of(name: str) -> int | None:
    """The step a directory entry names (``"100"`` or ``"100/"``), or ``None``."""
    match = _STEP.match(name.rstrip("/").rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def is_temporary(name: str) -> bool:
    """An Orbax temporary directory: a save in progress on a non-GCS file system."""
    return bool(_TMP_STEP.match(name.rstrip("/").rsplit("/", 1)[-1]))


def candidate_steps(entries: Iterable[str], *, newer_than: int | None = None) -> list[int]:
    """Steps named by directory ``entries``, newest first; temporaries and other names ignored."""
    steps = {s for s in (step_of(e) for e in entries) if s is not None}
    if newer_than is not None:
        steps = {s for s in steps if s > newer_than}
    return sorted(steps, reverse=True)


def maxtext_checkpoint_dir(base_output_directory: str, run_name: str) -> str:
    """Where MaxText keeps a run's steps: ``<base_output_directory>/<run_name>/checkpoints``."""
    return join(base_output_directory, run_name, "checkpoints")


def step_dir_of(load_path: str) -> str:
    """The step directory a MaxText load path names.

    ``load_full_state_path`` and ``load_parameters_path`` point at ``<step>/items``; the commit
    marker that says whether they may be loaded sits one level up, in ``<step>/``.
    """
    trimmed = load_path.rstrip("/")
    head, _, tail = trimmed.rpartition("/")
    return head if tail == ITEMS_DIR and head else trimmed


def commit_marker_uri(step_dir: str) -> str:
    return join(step_dir, COMMIT_MARKER)

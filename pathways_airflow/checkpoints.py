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

import json
import re
from dataclasses import dataclass
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

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


def checkpoint_named_by(extra: Mapping[str, Any] | None) -> Checkpoint | None:
    """The step an asset event names (not yet checked committed), or ``None`` when it names none.

    Two shapes arrive: the ``{"step", "uri", ...}`` a task puts in its outlet event's extra, and
    an ``AssetWatcher`` event, whose extra carries the trigger's payload under ``"payload"``.
    The step must agree with the URI's last component, so a mistyped extra is not converted.
    """
    named = (extra or {}).get("payload", extra or {})
    if not isinstance(named, Mapping):
        return None
    step, uri = named.get("step"), named.get("uri")
    if isinstance(step, bool) or not isinstance(uri, str) or not uri.strip("/"):
        return None
    trimmed = step_dir_of(uri)
    found = step_of(trimmed.rpartition("/")[2])
    try:
        wanted = int(step)
    except (TypeError, ValueError):
        return None
    return Checkpoint(wanted, trimmed) if found == wanted else None


def checkpoint_dir_of(checkpoint: Checkpoint) -> str:
    """The directory holding the step: ``<dir>/<step>`` → ``<dir>``."""
    return checkpoint.uri.rstrip("/").rpartition("/")[0]


def commit_marker_uri(step_dir: str) -> str:
    return join(step_dir, COMMIT_MARKER)


# --- choosing the step to report --------------------------------------------------------------


def within_bounds(step: int, *, newer_than: int | None = None, min_step: int | None = None) -> bool:
    """``step > newer_than`` and ``step >= min_step``, each only when given.

    ``newer_than`` is what a pipeline already has (wait for a *newer* checkpoint than the one it
    converted last); ``min_step`` is what it needs (wait until training got at least this far).
    """
    return (newer_than is None or step > newer_than) and (min_step is None or step >= min_step)


def step_entries_newest_first(
    entries: Iterable[str], *, newer_than: int | None = None, min_step: int | None = None
) -> list[tuple[int, str]]:
    """``(step, entry name)`` for each entry naming a step within the bounds, newest first.

    Entries are directory names or GCS prefixes (``"100"``, ``"runs/x/checkpoints/100/"``); the
    name is kept as written, so a zero-padded ``"000100"`` is looked up as itself. Temporaries
    (``100.orbax-checkpoint-tmp-…``) and anything else that is not an integer are ignored.
    """
    found: dict[tuple[int, str], None] = {}
    for entry in entries:
        name = entry.rstrip("/").rsplit("/", 1)[-1]
        step = step_of(name)
        if step is not None and within_bounds(step, newer_than=newer_than, min_step=min_step):
            found[(step, name)] = None
    return sorted(found, reverse=True)


def newest_committed(
    checkpoint_dir: str,
    entries: Iterable[str],
    *,
    is_committed: Callable[[str], bool],
    newer_than: int | None = None,
    min_step: int | None = None,
) -> Checkpoint | None:
    """The newest step within the bounds that ``is_committed`` accepts, asking newest first.

    ``is_committed`` gets an entry name (``"100"``) and is asked about as few steps as possible:
    on GCS each question is one read of a marker object, so the cost of finding the newest
    committed step does not depend on how many files a step holds or how many older steps
    exist. Use :func:`committed_on_gcs` or :func:`committed_locally` for the rule itself.
    """
    for step, name in step_entries_newest_first(entries, newer_than=newer_than, min_step=min_step):
        if is_committed(name):
            return Checkpoint(step, join(checkpoint_dir, name))
    return None


def committed_locally(name: str) -> bool:
    """Off GCS a directory named as an integer is committed: Orbax renames it into place last."""
    return step_of(name) is not None and not is_temporary(name)


def metadata_uri(step_dir: str) -> str:
    return join(step_dir, METADATA_FILE)


def began_saving_at(metadata: bytes | None) -> float | None:
    """When the program began saving a committed step (Unix seconds, its own clock), from the
    step's ``_CHECKPOINT_METADATA``: Orbax writes ``init_timestamp_nsecs`` as a save starts and sets
    ``commit_timestamp_nsecs`` as it commits, just before the marker (``_create_tmp_directory`` and
    ``CommitFileTemporaryPath.finalize``, ``checkpoint/orbax/checkpoint/_src/path/atomicity.py``).
    The start, not the commit: an asynchronous save under way when something failed may still
    commit afterwards, while a save that began afterwards shows the program running afterwards.
    ``None`` when not finalized, absent or unreadable."""
    try:
        data = json.loads(metadata or b"null")
        started, committed = data.get("init_timestamp_nsecs"), data.get("commit_timestamp_nsecs")
    except (ValueError, AttributeError):
        return None
    if not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in (started, committed)):
        return None
    return started / 1e9


def marker_name(name: str) -> str:
    """The commit marker of step entry ``name``, relative to the checkpoint directory."""
    return f"{name.strip('/')}/{COMMIT_MARKER}"


def committed_on_gcs(name: str, marker_names: Collection[str]) -> bool:
    """On GCS a step is committed iff ``<step>/commit_success.txt`` exists.

    ``marker_names`` are the object names seen, relative to the checkpoint directory.
    ``_CHECKPOINT_METADATA`` and array files prove nothing: they are written before the marker.
    """
    return marker_name(name) in marker_names


def committed_steps_in_listing(checkpoint_dir: str, names: Iterable[str]) -> list[int]:
    """Every committed step, newest first, from a full listing of ``checkpoint_dir``.

    ``names`` are object names under the directory on ``gs://`` (a recursive listing, full or
    relative to the directory), or the directory's entries elsewhere. A whole listing costs a
    request per thousand files; :func:`newest_committed` reads one marker per step it asks about.
    """
    listed = list(names)
    if is_gcs(checkpoint_dir):
        prefix = gcs_object_prefix(checkpoint_dir)
        relative = {n.removeprefix(prefix) for n in listed}
        steps = {
            step
            for step, name in step_entries_newest_first(n.split("/", 1)[0] for n in relative if "/" in n)
            if committed_on_gcs(name, relative)
        }
    else:
        steps = {s for s, name in step_entries_newest_first(listed) if committed_locally(name)}
    return sorted(steps, reverse=True)


def split_gcs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` → ``("bucket", "a/b")``; a ``ValueError`` naming the URI otherwise."""
    if not is_gcs(uri):
        raise ValueError(f"{uri!r}: not a gs:// URI (expected gs://BUCKET/PATH)")
    bucket, _, name = uri[len("gs://") :].partition("/")
    if not bucket:
        raise ValueError(f"{uri!r}: no bucket (expected gs://BUCKET/PATH)")
    return bucket, name


def gcs_object_prefix(directory: str) -> str:
    """The object-name prefix that lists a ``gs://`` directory's contents (``"a/b/"``; ``""`` at the root)."""
    _, name = split_gcs_uri(directory)
    name = name.strip("/")
    return f"{name}/" if name else ""


@dataclass(frozen=True)
class CheckpointScan:
    """What one look at a checkpoint directory found."""

    checkpoint_dir: str
    found: Checkpoint | None
    partial: tuple[int, ...] = ()
    """Steps within the bounds that were asked about and had no commit marker, newest first."""
    newest_seen: int | None = None
    """The newest step directory present, committed or not, within the bounds or not."""
    in_progress: int = 0
    """Orbax temporary directories (saves under way off GCS)."""


def bounds_text(*, newer_than: int | None, min_step: int | None) -> str:
    parts = []
    if newer_than is not None:
        parts.append(f"newer than step {newer_than}")
    if min_step is not None:
        parts.append(f"at step {min_step} or later")
    return " " + " and ".join(parts) if parts else ""


def describe_scan(scan: CheckpointScan, *, newer_than: int | None = None, min_step: int | None = None) -> str:
    """One line for the task log: what was found, or why the sensor keeps waiting."""
    if scan.found is not None:
        return f"step {scan.found.step} is committed: {scan.found.uri}"
    line = f"no committed step{bounds_text(newer_than=newer_than, min_step=min_step)} in {scan.checkpoint_dir} yet"
    if scan.partial:
        steps = ", ".join(str(s) for s in scan.partial[:5]) + (", ..." if len(scan.partial) > 5 else "")
        return f"{line}: step {steps} not committed (no {COMMIT_MARKER}: a save in progress or cut off)"
    if scan.in_progress:
        return f"{line}: {scan.in_progress} save(s) in progress"
    if scan.newest_seen is None:
        return f"{line}: no step directories"
    return f"{line}: the newest step there is {scan.newest_seen}"


def newest_step_seen(entries: Iterable[str]) -> int | None:
    """The newest step directory among ``entries``, committed or not."""
    steps = [s for s in (step_of(e) for e in entries) if s is not None]
    return max(steps) if steps else None

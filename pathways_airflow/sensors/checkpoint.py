"""``CheckpointSensor``: wait until a training run has committed a checkpoint step.

A step counts only once it is committed (``pathways_airflow.checkpoints``): on ``gs://`` its
``commit_success.txt`` exists, elsewhere its directory has been renamed from the Orbax temporary
name to the bare step number. A step being written — or one cut off by maintenance — is never
reported, because converting or serving it fails ("Found incomplete checkpoint").

The cost of one look does not grow with the checkpoint: one delimiter listing of the checkpoint
directory (step prefixes only) and then one marker read per step, newest first, stopping at the
first committed one. A 405B model's step holds thousands of array files; listing them on every
poke would cost a request per thousand files per poke.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.providers.common.compat.sdk import conf

from pathways_airflow.checkpoints import (
    COMMIT_MARKER,
    Checkpoint,
    gcs_object_prefix,
    is_gcs,
    is_temporary,
    marker_name,
    newest_committed,
    split_gcs_uri,
    step_of,
)
from pathways_airflow.exceptions import PathwaysError
from pathways_airflow.spec.errors import SpecProblem, raise_if_any

if TYPE_CHECKING:
    from airflow.sdk import Context

DEFAULT_GCP_CONN_ID = "google_cloud_default"


# --- pure: arguments and what a look found ----------------------------------------------------


def step_bound(field: str, value: Any) -> tuple[int | None, SpecProblem | None]:
    """A ``min_step`` / ``newer_than`` value as an int ≥ 0, or ``None`` when unset.

    Templates render to strings, so ``"80"`` is 80; ``""`` and ``"None"`` (what Jinja makes of
    an XCom that held no checkpoint) mean "no bound".
    """
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None, None
    if isinstance(value, bool):
        return None, SpecProblem(field, value, "must be a step number (an integer ≥ 0)")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,30}\s*", value):  # not "²": isdigit() but no int
        number = int(value.strip())
    else:
        return None, SpecProblem(field, value, "must be a step number (an integer ≥ 0)")
    if number < 0:
        return None, SpecProblem(field, value, "must be a step number (an integer ≥ 0)")
    return number, None


def checkpoint_dir_problem(checkpoint_dir: Any) -> SpecProblem | None:
    """Why ``checkpoint_dir`` cannot be watched, or ``None``."""
    reason = "must be a gs://BUCKET/PATH URI or an absolute local path"
    if not isinstance(checkpoint_dir, str) or not checkpoint_dir.strip():
        return SpecProblem("checkpoint_dir", checkpoint_dir, reason)
    if is_gcs(checkpoint_dir):
        try:
            split_gcs_uri(checkpoint_dir)
        except ValueError:
            return SpecProblem("checkpoint_dir", checkpoint_dir, reason)
        return None
    if not os.path.isabs(checkpoint_dir):
        return SpecProblem("checkpoint_dir", checkpoint_dir, reason)
    return None


def checkpoint_arguments(checkpoint_dir: Any, min_step: Any, newer_than: Any) -> tuple[str, int | None, int | None]:
    """The validated ``(checkpoint_dir, min_step, newer_than)``; one ``ValueError`` listing every problem."""
    problems = []
    directory_problem = checkpoint_dir_problem(checkpoint_dir)
    if directory_problem:
        problems.append(directory_problem)
    minimum, problem = step_bound("min_step", min_step)
    if problem:
        problems.append(problem)
    newer, problem = step_bound("newer_than", newer_than)
    if problem:
        problems.append(problem)
    raise_if_any(problems)
    return str(checkpoint_dir).strip(), minimum, newer


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


# --- I/O: one look ---------------------------------------------------------------------------


def storage_client(gcp_conn_id: str = DEFAULT_GCP_CONN_ID) -> Any:
    """A ``google.cloud.storage.Client`` from the Google connection (honours ``STORAGE_EMULATOR_HOST``)."""
    from airflow.providers.google.cloud.hooks.gcs import GCSHook

    return GCSHook(gcp_conn_id=gcp_conn_id).get_conn()


def scan_checkpoints(
    checkpoint_dir: str,
    *,
    newer_than: int | None = None,
    min_step: int | None = None,
    gcp_conn_id: str = DEFAULT_GCP_CONN_ID,
    client: Any = None,
) -> CheckpointScan:
    """Look at ``checkpoint_dir`` once: the newest committed step within the bounds, and what else is there.

    ``client`` is a ``google.cloud.storage.Client`` to reuse across looks (one is made from
    ``gcp_conn_id`` when omitted). A missing bucket raises ``FileNotFoundError``: no training run
    will ever create it. A missing local directory is simply empty: Orbax creates it on the
    first save.
    """
    if is_gcs(checkpoint_dir):
        return _scan_gcs(checkpoint_dir, newer_than, min_step, client or storage_client(gcp_conn_id), gcp_conn_id)
    return _scan_local(checkpoint_dir, newer_than, min_step)


def newest_committed_checkpoint(
    checkpoint_dir: str,
    *,
    newer_than: int | None = None,
    min_step: int | None = None,
    gcp_conn_id: str = DEFAULT_GCP_CONN_ID,
    client: Any = None,
) -> Checkpoint | None:
    """The newest committed step of ``checkpoint_dir`` (``> newer_than``, ``>= min_step``), or ``None``.

    Costs one listing of step prefixes plus one marker read per uncommitted step newer than the
    answer, however many files each step holds.
    """
    return scan_checkpoints(
        checkpoint_dir, newer_than=newer_than, min_step=min_step, gcp_conn_id=gcp_conn_id, client=client
    ).found


def _scan_gcs(
    checkpoint_dir: str, newer_than: int | None, min_step: int | None, client: Any, gcp_conn_id: str
) -> CheckpointScan:
    from google.api_core.exceptions import NotFound

    bucket_name, _ = split_gcs_uri(checkpoint_dir)
    prefix = gcs_object_prefix(checkpoint_dir)
    try:
        listing = client.list_blobs(bucket_name, prefix=prefix, delimiter="/", fields="prefixes,nextPageToken")
        for _page in listing.pages:
            pass
    except NotFound:
        raise FileNotFoundError(
            f"checkpoint_dir={checkpoint_dir!r}: bucket {bucket_name!r} does not exist "
            f"(or is not visible to gcp_conn_id={gcp_conn_id!r})"
        ) from None
    entries = sorted(listing.prefixes)
    bucket = client.bucket(bucket_name)
    partial: list[int] = []

    def is_committed(name: str) -> bool:
        if bucket.blob(prefix + marker_name(name)).exists():
            return True
        partial.append(int(name))
        return False

    found = newest_committed(
        checkpoint_dir.rstrip("/"), entries, is_committed=is_committed, newer_than=newer_than, min_step=min_step
    )
    return CheckpointScan(checkpoint_dir, found, tuple(partial), _newest(entries))


def _scan_local(checkpoint_dir: str, newer_than: int | None, min_step: int | None) -> CheckpointScan:
    try:
        with os.scandir(checkpoint_dir) as listing:
            entries = [entry.name for entry in listing if entry.is_dir()]
    except FileNotFoundError:
        entries = []
    found = newest_committed(
        checkpoint_dir.rstrip("/") or "/",
        entries,
        is_committed=lambda name: True,  # an integer-named directory has been renamed into place
        newer_than=newer_than,
        min_step=min_step,
    )
    return CheckpointScan(checkpoint_dir, found, (), _newest(entries), sum(1 for e in entries if is_temporary(e)))


def _newest(entries: Sequence[str]) -> int | None:
    steps = [s for s in (step_of(e) for e in entries) if s is not None]
    return max(steps) if steps else None


# --- the sensor ------------------------------------------------------------------------------


class CheckpointLookupError(PathwaysError):
    """The checkpoint directory could not be read for too long while the task was deferred."""


class CheckpointSensor(BaseSensorOperator):
    """Wait until ``checkpoint_dir`` holds a committed step, and return it as ``{"step", "uri"}``.

    :param checkpoint_dir: MaxText's ``<base_output_directory>/<run_name>/checkpoints``, on
        ``gs://`` or an absolute local path.
    :param min_step: wait for a step at least this far into training.
    :param newer_than: wait for a step newer than this one (the one a pipeline already has).
        Both accept the strings templates render to; ``"None"`` or ``""`` mean no bound.
    :param gcp_conn_id: Google connection for ``gs://`` (``STORAGE_EMULATOR_HOST`` is honoured).
    :param deferrable: wait in the triggerer between looks (default: Airflow's
        ``[operators] default_deferrable``).

    The XCom value is ``{"step": N, "uri": "<checkpoint_dir>/<N>"}``; the step's items are at
    ``<uri>/items`` (what ``load_full_state_path`` and ``load_parameters_path`` take).
    """

    template_fields: Sequence[str] = ("checkpoint_dir", "min_step", "newer_than", "gcp_conn_id")
    ui_color = "#dcedc8"

    def __init__(
        self,
        *,
        checkpoint_dir: str,
        min_step: int | str | None = None,
        newer_than: int | str | None = None,
        gcp_conn_id: str = DEFAULT_GCP_CONN_ID,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poke_interval: timedelta | float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.checkpoint_dir = checkpoint_dir
        self.min_step = min_step
        self.newer_than = newer_than
        self.gcp_conn_id = gcp_conn_id
        self.deferrable = deferrable
        self._client: Any = None
        from pathways_airflow.operators.workload import looks_templated

        if not looks_templated([checkpoint_dir, min_step, newer_than]):
            checkpoint_arguments(checkpoint_dir, min_step, newer_than)

    def poke(self, context: Context) -> PokeReturnValue:
        directory, min_step, newer_than = checkpoint_arguments(self.checkpoint_dir, self.min_step, self.newer_than)
        if is_gcs(directory) and self._client is None:
            self._client = storage_client(self.gcp_conn_id)
        scan = scan_checkpoints(
            directory, newer_than=newer_than, min_step=min_step, gcp_conn_id=self.gcp_conn_id, client=self._client
        )
        self.log.info("%s", describe_scan(scan, newer_than=newer_than, min_step=min_step))
        if scan.found is None:
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=scan.found.as_xcom())

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        from pathways_airflow.triggers.checkpoint import CheckpointTrigger

        directory, min_step, newer_than = checkpoint_arguments(self.checkpoint_dir, self.min_step, self.newer_than)
        self.defer(
            trigger=CheckpointTrigger(
                checkpoint_dir=directory,
                min_step=min_step,
                newer_than=newer_than,
                gcp_conn_id=self.gcp_conn_id,
                poll_interval=float(self.poke_interval),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Back from the triggerer: the committed step, or why it stopped looking."""
        if event.get("status") == "found":
            checkpoint = event["checkpoint"]
            self.log.info("step %s is committed: %s", checkpoint["step"], checkpoint["uri"])
            return checkpoint
        raise CheckpointLookupError(
            f"stopped waiting for a committed checkpoint in {self.checkpoint_dir}: {event.get('message')}"
        )

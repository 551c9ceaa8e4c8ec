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
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.providers.common.compat.sdk import conf

from pathways_airflow.checkpoints import describe_scan, is_gcs, split_gcs_uri
from pathways_airflow.hooks.storage import DEFAULT_GCP_CONN_ID, scan_checkpoints, storage_client
from pathways_airflow.hooks.storage import newest_committed_checkpoint  # noqa: F401 - its import path before hooks.storage
from pathways_airflow.exceptions import PathwaysError
from pathways_airflow.spec.arguments import looks_templated
from pathways_airflow.spec.errors import SpecProblem, raise_if_any

if TYPE_CHECKING:
    from airflow.sdk import Context

# --- pure: the arguments ---------------------------------------------------------------------------


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

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Back from the triggerer: the committed step, or why it stopped looking."""
        if event is None:  # resumed with no event (a task left deferred, run again by hand): look again
            return self.execute(context)
        if event.get("status") == "found":
            checkpoint = event["checkpoint"]
            self.log.info("step %s is committed: %s", checkpoint["step"], checkpoint["uri"])
            return checkpoint
        raise CheckpointLookupError(
            f"stopped waiting for a committed checkpoint in {self.checkpoint_dir}: {event.get('message')}"
        )

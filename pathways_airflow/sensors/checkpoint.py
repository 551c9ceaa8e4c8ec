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

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import PokeReturnValue

from pathways_airflow.sensors.base import DeferrableSensor
from pathways_airflow.checkpoints import describe_scan, is_gcs
from pathways_airflow.hooks.storage import DEFAULT_GCP_CONN_ID, scan_checkpoints, storage_client
from pathways_airflow.hooks.storage import newest_committed_checkpoint  # noqa: F401 - its import path before hooks.storage
from pathways_airflow.exceptions import CheckpointLookupError
from pathways_airflow.spec.arguments import checkpoint_arguments, looks_templated

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

# --- the sensor ------------------------------------------------------------------------------


class CheckpointSensor(DeferrableSensor):
    """Wait until ``checkpoint_dir`` holds a committed step, and return it as ``{"step", "uri"}``.

    :param checkpoint_dir: MaxText's ``<base_output_directory>/<run_name>/checkpoints``, on
        ``gs://`` or an absolute local path.
    :param min_step: wait for a step at least this far into training.
    :param newer_than: wait for a step newer than this one (the one a pipeline already has).
        Both accept the strings templates render to; ``"None"`` or ``""`` mean no bound.
    :param gcp_conn_id: Google connection for ``gs://`` (``STORAGE_EMULATOR_HOST`` is honoured).

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
        poke_interval: timedelta | float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.checkpoint_dir = checkpoint_dir
        self.min_step = min_step
        self.newer_than = newer_than
        self.gcp_conn_id = gcp_conn_id
        self._client: Any = None

        if not looks_templated([checkpoint_dir, min_step, newer_than]):
            checkpoint_arguments(checkpoint_dir, min_step, newer_than)

    def poke(self, context: Context) -> PokeReturnValue:
        directory, min_step, newer_than = checkpoint_arguments(self.checkpoint_dir, self.min_step, self.newer_than)
        if is_gcs(directory) and self._client is None:
            self._client = storage_client(self.gcp_conn_id)
        scan = scan_checkpoints(
            directory, newer_than=newer_than, min_step=min_step, gcp_conn_id=self.gcp_conn_id, client=self._client,
            deadline=self._deadline(context),
        )
        self.log.info("%s", describe_scan(scan, newer_than=newer_than, min_step=min_step))
        if scan.found is None:
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=scan.found.as_xcom())

    def _deadline(self, context: Context) -> float:
        """When the sensor's ``timeout`` runs out: how long a GCS outage may be waited out."""
        start = getattr(context.get("ti"), "start_date", None)
        return (start.timestamp() if start else time.time()) + float(self.timeout)

    def trigger(self) -> BaseTrigger:
        from pathways_airflow.triggers.checkpoint import CheckpointTrigger

        directory, min_step, newer_than = checkpoint_arguments(self.checkpoint_dir, self.min_step, self.newer_than)
        return CheckpointTrigger(
            checkpoint_dir=directory,
            min_step=min_step,
            newer_than=newer_than,
            gcp_conn_id=self.gcp_conn_id,
            poll_interval=float(self.poke_interval),
            deadline=time.time() + float(self.timeout),
        )

    def finish(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The committed step, or why the trigger stopped looking."""
        if event.get("status") == "found":
            checkpoint = event["checkpoint"]
            self.log.info("step %s is committed: %s", checkpoint["step"], checkpoint["uri"])
            return checkpoint
        raise CheckpointLookupError(
            f"stopped waiting for a committed checkpoint in {self.checkpoint_dir}: {event.get('message')}"
        )

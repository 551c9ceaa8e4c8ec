"""``CheckpointTrigger``: wait in the triggerer until a checkpoint directory holds a committed step.

Object stores have no watch, so this polls — with the very look the sensor makes
(:func:`pathways_airflow.sensors.checkpoint.scan_checkpoints`: one prefix listing plus marker
reads), run in a thread because ``google-cloud-storage`` is synchronous and the triggerer's
event loop must never block. Each look waits out a GCS outage until ``deadline`` (the sensor's
``timeout``). One storage client is kept for the trigger's life. It never raises
out of ``run()``: a look that keeps failing ends in one ``error`` event the task turns into a
clear failure.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from pathways_airflow.exceptions import StorageUnavailableError
from pathways_airflow.spec.arguments import POLL_INTERVAL_SECONDS

MAX_CONSECUTIVE_FAILURES = 5


class CheckpointTrigger(BaseTrigger):
    """Yield ``{"status": "found", "checkpoint": {"step", "uri"}}`` once a step within the bounds is committed."""

    def __init__(
        self,
        *,
        checkpoint_dir: str,
        min_step: int | None = None,
        newer_than: int | None = None,
        gcp_conn_id: str = "google_cloud_default",
        poll_interval: float = POLL_INTERVAL_SECONDS["checkpoint"],
        max_failures: int = MAX_CONSECUTIVE_FAILURES,
        deadline: float | None = None,
    ):
        super().__init__()
        self.checkpoint_dir = checkpoint_dir
        self.min_step = min_step
        self.newer_than = newer_than
        self.gcp_conn_id = gcp_conn_id
        self.poll_interval = poll_interval
        self.max_failures = max_failures
        self.deadline = deadline
        self._client: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "pathways_airflow.triggers.checkpoint.CheckpointTrigger",
            {
                "checkpoint_dir": self.checkpoint_dir,
                "min_step": self.min_step,
                "newer_than": self.newer_than,
                "gcp_conn_id": self.gcp_conn_id,
                "poll_interval": self.poll_interval,
                "max_failures": self.max_failures,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async with contextlib.aclosing(self._poll()) as events:  # its finally runs when the reader stops, not at loop shutdown
                async for event in events:
                    yield event
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never raise out of run(): the task turns this into a clear failure
            self.log.exception("waiting for a checkpoint in %s failed", self.checkpoint_dir)
            yield TriggerEvent(
                {"status": "error", "checkpoint_dir": self.checkpoint_dir, "message": f"{type(error).__name__}: {error}"}
            )
        finally:
            self._close()

    async def _poll(self) -> AsyncIterator[TriggerEvent]:
        from pathways_airflow.checkpoints import describe_scan

        failures = 0
        last_line = ""
        while True:
            try:
                scan = await asyncio.to_thread(self._look)
            except Exception as error:
                failures += 1
                message = f"{type(error).__name__}: {error}"
                self.log.warning(
                    "reading %s failed (%d of %d in a row): %s", self.checkpoint_dir, failures, self.max_failures, message
                )
                if failures >= self.max_failures or isinstance(error, StorageUnavailableError):
                    yield TriggerEvent(
                        {
                            "status": "error",
                            "checkpoint_dir": self.checkpoint_dir,
                            "message": f"{failures} looks in a row failed; the last: {message}",
                        }
                    )
                    return
            else:
                failures = 0
                line = describe_scan(scan, newer_than=self.newer_than, min_step=self.min_step)
                if line != last_line:
                    self.log.info("%s", line)
                    last_line = line
                if scan.found is not None:
                    yield TriggerEvent({"status": "found", "checkpoint": scan.found.as_xcom()})
                    return
            await asyncio.sleep(self.poll_interval)

    def _look(self) -> Any:
        """One look, in a worker thread (the storage client is synchronous)."""
        from pathways_airflow.checkpoints import is_gcs
        from pathways_airflow.hooks.storage import scan_checkpoints, storage_client

        if is_gcs(self.checkpoint_dir) and self._client is None:
            self._client = storage_client(self.gcp_conn_id)
        return scan_checkpoints(
            self.checkpoint_dir,
            newer_than=self.newer_than,
            min_step=self.min_step,
            gcp_conn_id=self.gcp_conn_id,
            client=self._client,
            deadline=self.deadline,
        )

    def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None and hasattr(client, "close"):
            client.close()

"""``CheckpointCommittedTrigger``: an event for every newly committed checkpoint step.

For event-driven scheduling of checkpoints written outside Airflow (a training run launched by
hand, by another scheduler, by xpk): use it in an ``AssetWatcher`` and DAGs scheduled on the asset
run once per committed step::

    Asset("llama-checkpoints", uri="gs://bucket/runs/llama/checkpoints",
          watchers=[AssetWatcher("committed", CheckpointCommittedTrigger(checkpoint_dir="gs://bucket/runs/llama/checkpoints"))])

Only committed steps fire (``commit_success.txt`` written last on GCS; never a partial step).
The newest step announced is kept in the asset's state store where the triggerer offers one, so
a triggerer restart does not announce it again.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from pathways_airflow.spec.arguments import POLL_INTERVAL_SECONDS

STATE_KEY = "pathways_last_committed_step"


class CheckpointCommittedTrigger(BaseEventTrigger):
    """Fire each time a newer committed step appears under ``checkpoint_dir``."""

    def __init__(
        self,
        *,
        checkpoint_dir: str,
        gcp_conn_id: str = "google_cloud_default",
        poll_interval: float = POLL_INTERVAL_SECONDS["asset"],
        newer_than: int | None = None,
    ):
        super().__init__()
        self.checkpoint_dir = checkpoint_dir
        self.gcp_conn_id = gcp_conn_id
        self.poll_interval = poll_interval
        self.newer_than = newer_than

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "pathways_airflow.triggers.checkpoint_event.CheckpointCommittedTrigger",
            {
                "checkpoint_dir": self.checkpoint_dir,
                "gcp_conn_id": self.gcp_conn_id,
                "poll_interval": self.poll_interval,
                "newer_than": self.newer_than,
            },
        )

    async def _remembered(self) -> int | None:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return self.newer_than
        try:
            value = await store.aget(STATE_KEY)
        except Exception:  # no state store for this watcher: start from what we were given
            return self.newer_than
        return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else self.newer_than

    async def _remember(self, step: int) -> None:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return
        try:
            await store.aset(STATE_KEY, step)
        except Exception as error:
            self.log.info("could not keep the last committed step in the asset state store: %s", error)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from pathways_airflow.hooks.storage import newest_committed_checkpoint

        last = await self._remembered()
        backoff = self.poll_interval
        while True:
            try:
                found = await asyncio.to_thread(
                    newest_committed_checkpoint, self.checkpoint_dir, newer_than=last, gcp_conn_id=self.gcp_conn_id
                )
                backoff = self.poll_interval
            except Exception as error:  # a listing that fails is tried again; the watcher must not die
                self.log.warning("looking for checkpoints under %s failed: %s", self.checkpoint_dir, error)
                backoff = min(backoff * 2, self.poll_interval * 8)
                found = None
            if found is not None:
                last = found.step
                await self._remember(found.step)
                self.log.info("committed step %d under %s", found.step, self.checkpoint_dir)
                yield TriggerEvent({**found.as_xcom(), "checkpoint_dir": self.checkpoint_dir})
                continue
            await asyncio.sleep(backoff)

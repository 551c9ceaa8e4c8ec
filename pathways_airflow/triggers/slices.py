"""``TpuSliceReadinessTrigger``: wait in the triggerer until enough TPU slices are ready.

Reads the TPU nodes from one shared list+watch per cluster (every slice wait in the triggerer
shares it: nodes change rarely, and a watch costs nothing between changes), asks the pure core
(:func:`pathways_airflow.state.slices.slice_readiness`) on every change and at least every
``poll_interval`` — a scheduled maintenance window moves closer with time alone — and logs
why it keeps waiting whenever that changes. It never raises out of ``run()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from pathways_airflow import well_known
from pathways_airflow.hooks.pathways import ClusterTarget
from pathways_airflow.resources import NODE
from pathways_airflow.state.slices import SliceReadiness, slice_readiness, slice_request
from pathways_airflow.triggers.watch import api_lost, shared_watch, spread, wait_for_change
from pathways_airflow.spec.arguments import POLL_INTERVAL_SECONDS



class TpuSliceReadinessTrigger(BaseTrigger):
    """Yield ``{"status": "ready", "ready": [node pools], "readiness": {...}}`` once ``num_slices`` are ready."""

    def __init__(
        self,
        *,
        target: dict[str, Any],
        machine_type: str,
        topology: str,
        num_slices: int = 1,
        no_maintenance_within: float | None = None,
        poll_interval: float = POLL_INTERVAL_SECONDS["slices"],
    ):
        super().__init__()
        self.target = target
        self.machine_type = machine_type
        self.topology = topology
        self.num_slices = num_slices
        self.no_maintenance_within = no_maintenance_within
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "pathways_airflow.triggers.slices.TpuSliceReadinessTrigger",
            {
                "target": self.target,
                "machine_type": self.machine_type,
                "topology": self.topology,
                "num_slices": self.num_slices,
                "no_maintenance_within": self.no_maintenance_within,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async with contextlib.aclosing(self._wait()) as events:  # its finally runs when the reader stops, not at loop shutdown
                async for event in events:
                    yield event
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never raise out of run(): the task turns this into a clear failure
            self.log.exception("waiting for %s %s slices failed", self.machine_type, self.topology)
            yield TriggerEvent({"status": "error", "message": f"{type(error).__name__}: {error}"})

    async def _wait(self) -> AsyncIterator[TriggerEvent]:
        request = slice_request(
            machine_type=self.machine_type,
            topology=self.topology,
            num_slices=self.num_slices,
            no_maintenance_within=self.no_maintenance_within,
        )
        # Every TPU node of the cluster, whatever its kind: one watch serves every slice wait.
        watch = shared_watch(ClusterTarget.from_dict(self.target), NODE, None, label_selector=well_known.ACCELERATOR)
        subscription = watch.subscribe()
        try:
            last_summary = ""
            while True:
                lost = api_lost([watch])
                if lost:
                    yield TriggerEvent({"status": "error", "message": lost})
                    return
                if not watch.synced.is_set():  # the API is down as the wait starts: wait for it
                    await wait_for_change([subscription], spread(self.poll_interval))
                    continue
                readiness: SliceReadiness = slice_readiness(watch.values(), request, now=time.time())
                summary = readiness.summary()
                if summary != last_summary:
                    self.log.info("%s", summary)
                    last_summary = summary
                if readiness.enough:
                    yield TriggerEvent(
                        {"status": "ready", "ready": list(readiness.ready), "readiness": readiness.to_dict()}
                    )
                    return
                await wait_for_change([subscription], spread(self.poll_interval))
        finally:
            watch.unsubscribe(subscription)

"""``TpuSliceReadinessTrigger``: wait in the triggerer until enough TPU slices are ready.

Reads the TPU nodes from one shared list+watch per cluster (every slice wait in the triggerer
shares it: nodes change rarely, and a watch costs nothing between changes), asks the pure core
(:func:`pathways_airflow.state.slices.slice_readiness`) on every change and at least every
``poll_interval`` — a scheduled maintenance window moves closer with time alone — and logs
why it keeps waiting whenever that changes. It never raises out of ``run()``.

``MaintenancePassedTrigger`` waits the same way for named slices' maintenance to pass: what a
``PathwaysJobOperator`` with ``maintenance_window="wait"`` or ``"start_now"`` defers to before it
submits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator, Callable, Iterable, Mapping

from airflow.triggers.base import BaseTrigger, TriggerEvent

from pathways_airflow import well_known
from pathways_airflow.hooks.pathways import ClusterTarget
from pathways_airflow.resources import NODE
from pathways_airflow.state.slices import maintenance_passed, slice_readiness, slice_request
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

        def judge(nodes: Iterable[Mapping[str, Any]]) -> tuple[str, dict[str, Any] | None]:
            readiness = slice_readiness(nodes, request, now=time.time())
            done = {"status": "ready", "ready": list(readiness.ready), "readiness": readiness.to_dict()}
            return readiness.summary(), done if readiness.enough else None

        async with contextlib.aclosing(_until_nodes_say(self.target, self.poll_interval, judge, self.log)) as events:
            async for event in events:
                yield event


class MaintenancePassedTrigger(BaseTrigger):
    """Yield ``{"status": "passed", "pools": [...]}`` once none of ``pools`` is under maintenance or
    has any announced within ``expected_duration`` seconds from now."""

    def __init__(
        self,
        *,
        target: dict[str, Any],
        machine_type: str,
        topology: str,
        pools: list[str],
        expected_duration: float,
        poll_interval: float = POLL_INTERVAL_SECONDS["slices"],
    ):
        super().__init__()
        self.target = target
        self.machine_type = machine_type
        self.topology = topology
        self.pools = list(pools)
        self.expected_duration = expected_duration
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "pathways_airflow.triggers.slices.MaintenancePassedTrigger",
            {
                "target": self.target,
                "machine_type": self.machine_type,
                "topology": self.topology,
                "pools": self.pools,
                "expected_duration": self.expected_duration,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        request = slice_request(machine_type=self.machine_type, topology=self.topology)

        def judge(nodes: Iterable[Mapping[str, Any]]) -> tuple[str, dict[str, Any] | None]:
            if maintenance_passed(nodes, request, self.pools, now=time.time(), expected_duration=self.expected_duration):
                return "", {"status": "passed", "pools": self.pools}
            return f"waiting for the maintenance of {', '.join(self.pools)} to pass", None

        try:
            async with contextlib.aclosing(_until_nodes_say(self.target, self.poll_interval, judge, self.log)) as events:
                async for event in events:
                    yield event
        except asyncio.CancelledError:
            raise
        except Exception as error:  # never raise out of run(): the task turns this into a clear failure
            self.log.exception("waiting for the maintenance of %s failed", ", ".join(self.pools))
            yield TriggerEvent({"status": "error", "message": f"{type(error).__name__}: {error}"})


async def _until_nodes_say(
    target: Mapping[str, Any],
    poll_interval: float,
    judge: Callable[[Iterable[Mapping[str, Any]]], tuple[str, dict[str, Any] | None]],
    log: Any,
) -> AsyncIterator[TriggerEvent]:
    """Ask ``judge`` about the cluster's TPU nodes on every change and every ``poll_interval``
    until it returns a payload (sent as the one event); log its summary whenever that changes."""
    # Every TPU node of the cluster, whatever its kind: one watch serves every slice wait.
    watch = shared_watch(ClusterTarget.from_dict(dict(target)), NODE, None, label_selector=well_known.ACCELERATOR)
    subscription = watch.subscribe()
    try:
        last_summary = ""
        while True:
            lost = api_lost([watch])
            if lost:
                yield TriggerEvent({"status": "error", "message": lost})
                return
            if watch.synced.is_set():  # else the API is down as the wait starts: wait for it
                summary, done = judge(watch.values())
                if summary and summary != last_summary:
                    log.info("%s", summary)
                    last_summary = summary
                if done is not None:
                    yield TriggerEvent(done)
                    return
            await wait_for_change([subscription], spread(poll_interval))
    finally:
        watch.unsubscribe(subscription)

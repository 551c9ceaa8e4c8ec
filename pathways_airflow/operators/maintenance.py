"""``expected_duration`` and ``maintenance_window``: what a run does about announced maintenance.

GKE announces TPU host maintenance on the nodes ahead of time (``cloud.google.com/scheduled-maintenance-time``),
and "when a host event happens to a VM within a TPU slice, the entire slice gets interrupted".
A ten-hour run started an hour before announced maintenance loses its tail to it; maintenance
started on an idle slice between runs costs nothing. So before a fresh workload is submitted, a
task that knows how long it runs reads the slices it may land on and does what its policy says:

* ``"ignore"`` submits at once (the disruption is handled when it comes);
* ``"wait"`` submits once the maintenance announced inside the run has passed;
* ``"start_now"`` first starts that maintenance on the idle slices (GKE's manual start: the nodes
  are labelled ``cloud.google.com/perform-maintenance=true``), then waits for it to pass. A slice
  another workload runs on is never touched.

The decisions are :func:`pathways_airflow.state.slices.maintenance_ahead`'s; this mixin reads the
nodes (and, for slices with maintenance announced, the pods on them), labels, and waits — in the
triggerer with :class:`~pathways_airflow.triggers.slices.MaintenancePassedTrigger`, or here.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any, Mapping

from pathways_airflow.exceptions import KubernetesApiError
from pathways_airflow.hooks.api import describe
from pathways_airflow.resources import NODE
from pathways_airflow.spec.arguments import looks_templated
from pathways_airflow.spec.errors import SpecProblem
from pathways_airflow.state.slices import (
    MaintenanceAhead,
    MaintenanceWindow,
    SliceRequest,
    busy_pools_of,
    duration_seconds,
    maintenance_ahead,
    maintenance_window_of,
    pools_of,
    slice_readiness,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

MAINTENANCE_POLL_SECONDS = 60.0
"""How often a wait for maintenance to pass looks again without a node change (maintenance takes hours)."""


class MindsMaintenance:
    """The maintenance parameters of :class:`~pathways_airflow.operators.workload.PathwaysJobOperator`."""

    expected_duration: Any = None
    maintenance_window: Any = MaintenanceWindow.WAIT.value

    def maintenance_problems(self, *, only_known: bool) -> list[SpecProblem]:
        """``expected_duration`` must be a positive duration; ``maintenance_window`` a known policy."""
        problems: list[SpecProblem] = []
        if only_known and looks_templated([self.expected_duration, self.maintenance_window]):
            return problems
        if maintenance_window_of(self.maintenance_window) is None:
            problems.append(
                SpecProblem("maintenance_window", self.maintenance_window, "must be one of 'start_now', 'wait', 'ignore'")
            )
        if self.expected_duration is not None and not duration_seconds(self.expected_duration):
            problems.append(SpecProblem("expected_duration", self.expected_duration, "must be a timedelta or seconds > 0"))
        return problems

    def maintenance_before_submitting(self, context: Context, earlier: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """Act on maintenance announced inside the run, then return what was done (the result's
        ``maintenance``); ``None`` without an ``expected_duration``. Defers (deferrable) or waits
        here while the maintenance it waits for has not passed."""
        if self.expected_duration is None:
            return None
        policy = maintenance_window_of(self.maintenance_window)
        duration = duration_seconds(self.expected_duration)
        assert policy is not None and duration  # validated before
        request: SliceRequest = self.slices_wanted()  # type: ignore[attr-defined]
        record = dict(earlier) if earlier else None
        while True:
            nodes = self.hook.nodes_if_permitted()  # type: ignore[attr-defined]
            now = time.time()
            if nodes is None:
                self.log.warning(  # type: ignore[attr-defined]
                    "maintenance_window=%r not applied: this identity may not list nodes, so announced maintenance cannot be read",
                    policy.value,
                )
                return None
            ahead = self._ahead(nodes, request, now, duration, policy)
            self.log.info("before submitting: %s", ahead.summary(now))  # type: ignore[attr-defined]
            for node in ahead.start_on:
                self.hook.start_node_maintenance(node)  # type: ignore[attr-defined]
            record = ahead.recorded(record, now=now, expected_duration=duration)
            if ahead.clear:
                return record
            record = self._wait_for_maintenance(context, request, ahead, duration, record)

    def report_slices(self) -> None:
        """Say which slices are still down after a resubmission: the new workload waits in the
        scheduler until they return. Read once, after the submission: a line for the log never
        holds up the next attempt (a node listing retried through API errors once cost seconds)."""
        try:
            nodes = self.hook.list(NODE, attempts=1)  # type: ignore[attr-defined]
        except Exception as error:
            self.log.info("could not read the slices at resubmission (%s); the new workload waits for them in the scheduler", describe(error))  # type: ignore[attr-defined]
            return
        self.log.info("slices at resubmission: %s", slice_readiness(nodes, self.slices_wanted(), now=time.time()).summary())  # type: ignore[attr-defined]

    def _ahead(
        self, nodes: list[dict[str, Any]], request: SliceRequest, now: float, duration: float, policy: MaintenanceWindow
    ) -> MaintenanceAhead:
        """What is announced inside the run, with the slices other workloads hold left out."""
        ahead = maintenance_ahead(nodes, request, now=now, expected_duration=duration, policy=policy)
        if not ahead.announced or policy is MaintenanceWindow.IGNORE:
            return ahead
        pools = pools_of(nodes, request)
        busy = busy_pools_of(
            {pool: [self.hook.pods_on_node_if_permitted(n["metadata"]["name"]) for n in pools[pool]] for pool in ahead.announced}  # type: ignore[attr-defined]
        )
        if busy is None and policy is MaintenanceWindow.START_NOW:
            self.log.warning(  # type: ignore[attr-defined]
                "maintenance_window='start_now': this identity may not list pods in all namespaces, so an idle slice "
                "cannot be told from a busy one; waiting for the maintenance instead of starting it"
            )
        return maintenance_ahead(nodes, request, now=now, expected_duration=duration, policy=policy, busy_pools=busy)

    def _wait_for_maintenance(
        self, context: Context, request: SliceRequest, ahead: MaintenanceAhead, duration: float, record: dict[str, Any]
    ) -> dict[str, Any]:
        """Wait until the maintenance of ``ahead.waiting_for`` has passed: in the triggerer
        (the task resumes in :meth:`execute_after_maintenance`), or here."""
        from pathways_airflow.triggers.slices import MaintenancePassedTrigger

        trigger = MaintenancePassedTrigger(
            target=self.hook.resolved_target().to_dict(),  # type: ignore[attr-defined]
            machine_type=request.machine_type.name,
            topology=request.topology,
            pools=list(ahead.waiting_for),
            expected_duration=duration,
            poll_interval=MAINTENANCE_POLL_SECONDS,
        )
        if self.deferrable:  # type: ignore[attr-defined]
            deadline = self.deadline(context)  # type: ignore[attr-defined]
            timeout = dt.timedelta(seconds=max(0.0, deadline - time.time())) if deadline else None
            self.defer(  # type: ignore[attr-defined]
                trigger=trigger, method_name="execute_after_maintenance", kwargs={"maintenance": record}, timeout=timeout
            )
        event = self.wait_here(trigger)  # type: ignore[attr-defined]
        if event.get("status") != "passed":
            raise KubernetesApiError(f"stopped waiting for maintenance to pass: {event.get('message')}")
        return record

    def execute_after_maintenance(
        self, context: Context, event: dict[str, Any] | None = None, maintenance: dict[str, Any] | None = None
    ) -> Any:
        """Back from waiting for maintenance: look again, and submit once nothing stands in the way
        (``execute`` carries ``maintenance``, what was done so far, into the result)."""
        if event is not None and event.get("status") != "passed":
            raise KubernetesApiError(f"stopped waiting for maintenance to pass: {event.get('message')}")
        return self.execute(context, maintenance=maintenance)  # type: ignore[attr-defined]


__all__ = ["MAINTENANCE_POLL_SECONDS", "MindsMaintenance"]

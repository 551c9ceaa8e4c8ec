"""``TpuSliceReadinessSensor``: wait until enough TPU slices of a kind are healthy and out of maintenance.

Submitting a multi-slice workload while one of its slices is under maintenance does not fail:
it queues or starts, then restarts when the slice goes, burning the other slices' hours. This
sensor holds a DAG back until ``num_slices`` node pools of the machine type and topology are
whole, ``Ready``, schedulable and not under (or, optionally, close to) maintenance. Every
judgement is made by :mod:`pathways_airflow.state.slices`; the sensor only reads the nodes.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import PokeReturnValue

from pathways_airflow import well_known
from pathways_airflow.sensors.base import DeferrableSensor
from pathways_airflow.spec.arguments import looks_templated
from pathways_airflow.exceptions import KubernetesApiError
from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS, ClusterConnectionMixin
from pathways_airflow.state.slices import (
    SliceRequest,
    slice_readiness,
    slice_request,
)

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger


class TpuSliceReadinessSensor(ClusterConnectionMixin, DeferrableSensor):
    """Wait until ``num_slices`` TPU slices (node pools) of ``tpu``/``machine_type`` and ``topology`` are ready.

    :param tpu: TPU generation shorthand (``"v5e"``, ``"v6e"``, ``"v5p"``, ``"v4"``, ``"tpu7x"``),
        or set ``machine_type`` (``"ct5lp-hightpu-4t"``, ...), as for ``PathwaysJobOperator``.
    :param topology: slice topology, e.g. ``"2x4"``.
    :param num_slices: how many ready slices to wait for.
    :param no_maintenance_within: also wait while a slice has maintenance scheduled
        (``cloud.google.com/scheduled-maintenance-time``) sooner than this (``timedelta`` or
        seconds): set it to the run's expected length to avoid starting a run that
        maintenance would interrupt.
    :param kubernetes_conn_id: and the other cluster parameters: see
        :class:`~pathways_airflow.connection.ClusterConnectionMixin`.

    The XCom value is the sorted list of ready node pool names.
    """

    template_fields: Sequence[str] = ("tpu", "machine_type", "topology", "num_slices", *CLUSTER_TEMPLATE_FIELDS)
    ui_color = "#c5cae9"

    def __init__(
        self,
        *,
        topology: str,
        tpu: str | None = None,
        machine_type: str | None = None,
        num_slices: int | str = 1,
        no_maintenance_within: timedelta | float | None = None,
        poke_interval: timedelta | float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.topology = topology
        self.tpu = tpu
        self.machine_type = machine_type
        self.num_slices = num_slices
        self.no_maintenance_within = no_maintenance_within
        self._last_summary = ""

        if not looks_templated([topology, tpu, machine_type, num_slices]):
            self.slice_request()

    def slice_request(self) -> SliceRequest:
        """What to wait for, validated (a ``ValueError`` naming each bad field)."""
        return slice_request(
            tpu=self.tpu,
            machine_type=self.machine_type,
            topology=self.topology,
            num_slices=self.num_slices,
            no_maintenance_within=self.no_maintenance_within,
        )

    def poke(self, context: Context) -> PokeReturnValue:
        request = self.slice_request()
        selector = f"{well_known.ACCELERATOR}={request.machine_type.accelerator},{well_known.TOPOLOGY}={request.topology}"
        readiness = slice_readiness(self.hook.list_nodes(label_selector=selector), request, now=time.time())
        summary = readiness.summary()
        if summary != self._last_summary:
            self.log.info("%s", summary)
            self._last_summary = summary
        if readiness.enough:
            return PokeReturnValue(is_done=True, xcom_value=list(readiness.ready))
        return PokeReturnValue(is_done=False)

    def trigger(self) -> BaseTrigger:
        from pathways_airflow.triggers.slices import TpuSliceReadinessTrigger

        request = self.slice_request()
        return TpuSliceReadinessTrigger(
            target=self.hook.resolved_target().to_dict(),
            machine_type=request.machine_type.name,
            topology=request.topology,
            num_slices=request.num_slices,
            no_maintenance_within=request.no_maintenance_within,
            poll_interval=float(self.poke_interval),
        )

    def finish(self, context: Context, event: dict[str, Any]) -> list[str]:
        """The ready node pools, or why the trigger stopped watching."""
        if event.get("status") == "ready":
            self.log.info("ready TPU slices: %s", ", ".join(event["ready"]))
            return list(event["ready"])
        raise KubernetesApiError(f"stopped waiting for TPU slices: {event.get('message')}")

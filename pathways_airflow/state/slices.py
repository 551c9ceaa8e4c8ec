"""Node objects → which TPU slices (node pools) could run a workload now, and why the others cannot. Pure.

On GKE one multi-host TPU slice is one node pool: its nodes are the slice's VMs, labelled with
the accelerator (``cloud.google.com/gke-tpu-accelerator``), the topology
(``cloud.google.com/gke-tpu-topology``) and the pool (``cloud.google.com/gke-nodepool``).
"When a host event happens to a VM within a TPU slice, the entire slice gets interrupted", so a
slice is ready only if *every* VM is: registered, ``Ready``, schedulable, not under maintenance
(label ``cloud.google.com/active-node-maintenance``, tested for presence since its values vary)
and not about to terminate (taint ``cloud.google.com/impending-node-termination``). Optionally
it must also have no maintenance scheduled (label ``cloud.google.com/scheduled-maintenance-time``,
Unix seconds) within a window, so a long job is not started on a slice about to be taken away.

The current time is a parameter, never read here, so verdicts are reproducible.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pathways_airflow.state.conditions import condition, is_true
from pathways_airflow import well_known
from pathways_airflow.spec.errors import SpecProblem, raise_if_any
from pathways_airflow.spec.tpu import MACHINE_TYPES, MachineType, resolve_machine_type, slice_shape


Node = Mapping[str, Any]


@dataclass(frozen=True)
class SliceRequest:
    """Which slices to look for: a machine type, a topology, how many, and a maintenance margin."""

    machine_type: MachineType
    topology: str
    num_slices: int = 1
    expected_nodes: int = 1
    """VMs (GKE nodes) in one slice of this machine type and topology."""
    no_maintenance_within: float | None = None
    """Seconds: a slice with maintenance scheduled sooner than this is not ready."""

    @property
    def description(self) -> str:
        return f"{self.machine_type.name} {self.topology}"


def slice_request(
    *,
    topology: Any,
    tpu: Any = None,
    machine_type: Any = None,
    num_slices: Any = 1,
    no_maintenance_within: Any = None,
) -> SliceRequest:
    """Validate what a readiness wait asks for; one ``ValueError`` naming every bad field.

    ``tpu`` takes the same shorthands as the operator (``"v5e"``, ``"v6e"``, ...), or set
    ``machine_type``; the topology must be one the PathwaysJob controller accepts for it.
    ``num_slices`` accepts the strings templates render to; ``no_maintenance_within`` takes
    seconds or a ``timedelta``.
    """
    problems: list[SpecProblem] = []
    machine = None
    try:
        machine = resolve_machine_type(machine_type, tpu)
    except ValueError as error:
        problems.extend(getattr(error, "problems", ()) or [SpecProblem("tpu", tpu, str(error))])
    shape = None
    if machine is not None:
        try:
            shape = slice_shape(machine, str(topology))
        except ValueError as error:
            problems.extend(getattr(error, "problems", ()) or [SpecProblem("topology", topology, str(error))])
    count = _positive_int(num_slices)
    if count is None:
        problems.append(SpecProblem("num_slices", num_slices, "must be an integer between 1 and 999"))
    window = _seconds(no_maintenance_within)
    if no_maintenance_within is not None and window is None:
        problems.append(
            SpecProblem("no_maintenance_within", no_maintenance_within, "must be a timedelta or seconds ≥ 0")
        )
    raise_if_any(problems)
    assert machine is not None and shape is not None and count is not None
    return SliceRequest(machine, shape.topology, count, shape.vms, window)


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,4}\s*", value):  # not "²": isdigit(), yet no int
        value = int(value.strip())
    return value if isinstance(value, int) and 1 <= value <= 999 else None


def _seconds(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else value
    if isinstance(seconds, str):
        try:
            seconds = float(seconds)
        except ValueError:
            return None
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return None
    try:
        seconds = float(seconds)
    except OverflowError:  # an int beyond any float
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


# --- one node, one pool ------------------------------------------------------------------------


def _labels(node: Node) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _name(node: Node) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def is_ready(node: Node) -> bool:
    """The kubelet reports ``Ready=True``."""
    return is_true(node, "Ready")


def not_ready_reason(node: Node) -> str:
    ready = condition(node, "Ready")
    if ready is None:
        return "no Ready condition"
    return str(ready.get("reason") or f"Ready={ready.get('status')}")


def is_cordoned(node: Node) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def is_under_maintenance(node: Node) -> bool:
    return well_known.ACTIVE_MAINTENANCE in _labels(node)


def is_terminating(node: Node) -> bool:
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(t.get("key") == well_known.IMPENDING_TERMINATION for t in taints)


def scheduled_maintenance(node: Node) -> float | None:
    """Unix seconds of the node's next maintenance, if GKE announced one (and it parses)."""
    value = _labels(node).get(well_known.SCHEDULED_MAINTENANCE)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def matches(node: Node, request: SliceRequest) -> bool:
    """A node of a slice of the requested machine type and topology.

    ``ct5lp-hightpu-4t`` and ``ct5lp-hightpu-8t`` (and the two v6e types) share an accelerator
    label but not the number of VMs per slice, so the instance type decides where GKE sets it.
    """
    labels = _labels(node)
    if labels.get(well_known.ACCELERATOR) != request.machine_type.accelerator:
        return False
    if labels.get(well_known.TOPOLOGY) != request.topology:
        return False
    instance_type = labels.get(well_known.INSTANCE_TYPE)
    return instance_type is None or instance_type not in MACHINE_TYPES or instance_type == request.machine_type.name


def in_how_long(seconds: float) -> str:
    """``"in 45 s"``, ``"in 12 min"``, ``"in 3.5 h"``; ``"now"`` for a moment already passed."""
    if seconds <= 0:
        return "now"
    if seconds < 90:
        return f"in {seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"in {seconds / 60:.0f} min"
    return f"in {seconds / 3600:.1f} h"


def pool_problem(nodes: Sequence[Node], request: SliceRequest, now: float) -> str | None:
    """Why the slice made of ``nodes`` cannot run a workload now (one short phrase), or ``None``.

    The most telling reason wins: a slice under maintenance is reported as such, not as the
    ``NotReady`` nodes that follow from it.
    """
    total = len(nodes)
    expected = request.expected_nodes
    if total < expected:
        return f"{total} of {expected} nodes registered"

    def count(predicate: Any) -> int:
        return sum(1 for n in nodes if predicate(n))

    if under := count(is_under_maintenance):
        return f"{under} of {total} nodes under active maintenance"
    if terminating := count(is_terminating):
        return f"{terminating} of {total} nodes about to terminate (impending-node-termination)"
    not_ready = [n for n in nodes if not is_ready(n)]
    if not_ready:
        reasons = sorted({not_ready_reason(n) for n in not_ready})
        return f"{len(not_ready)} of {total} nodes not Ready ({', '.join(reasons)})"
    if cordoned := count(is_cordoned):
        return f"{cordoned} of {total} nodes cordoned (unschedulable)"
    if request.no_maintenance_within is not None:
        times = [t for t in (scheduled_maintenance(n) for n in nodes) if t is not None]
        if times and min(times) <= now + request.no_maintenance_within:
            return f"maintenance scheduled {in_how_long(min(times) - now)}"
    return None


# --- the verdict -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceReadiness:
    """Which node pools of the requested kind are ready, and why each of the others is not."""

    request_description: str
    num_slices: int
    ready: tuple[str, ...] = ()
    not_ready: Mapping[str, str] = field(default_factory=dict)

    @property
    def enough(self) -> bool:
        return len(self.ready) >= self.num_slices

    def summary(self) -> str:
        """One line for the task log."""
        have = (
            f"{len(self.ready)} of {self.num_slices} {self.request_description} slice(s) ready"
            if len(self.ready) <= self.num_slices
            else f"{len(self.ready)} {self.request_description} slices ready, {self.num_slices} needed"
        )
        if not self.ready and not self.not_ready:
            return f"{have}: no node pool has {self.request_description} slices"
        parts = [have]
        if self.ready:
            parts.append(f"ready: {', '.join(self.ready)}")
        if self.not_ready:
            parts.append("; ".join(f"{pool}: {why}" for pool, why in self.not_ready.items()))
        return " — ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request_description,
            "num_slices": self.num_slices,
            "ready": list(self.ready),
            "not_ready": dict(self.not_ready),
        }


def slice_readiness(nodes: Iterable[Node], request: SliceRequest, *, now: float) -> SliceReadiness:
    """Group the requested kind of TPU nodes by node pool and judge each pool (``now``: Unix seconds)."""
    pools: dict[str, list[Node]] = {}
    for node in nodes:
        if matches(node, request):
            pools.setdefault(_labels(node).get(well_known.NODEPOOL, ""), []).append(node)
    ready: list[str] = []
    not_ready: dict[str, str] = {}
    for pool in sorted(pools):
        problem = pool_problem(sorted(pools[pool], key=_name), request, now)
        if problem is None:
            ready.append(pool)
        else:
            not_ready[pool] = problem
    return SliceReadiness(request.description, request.num_slices, tuple(ready), not_ready)

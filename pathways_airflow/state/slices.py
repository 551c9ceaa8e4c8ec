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

Before a run is submitted, :func:`maintenance_ahead` says which slices it may land on have
maintenance announced inside its expected duration, and what its ``maintenance_window`` policy
does about it: go ahead, wait until the maintenance has passed, or start it now on idle slices
(GKE's manual start, label ``cloud.google.com/perform-maintenance=true``) and then wait.

The current time is a parameter, never read here, so verdicts are reproducible.
"""

from __future__ import annotations

import enum
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


def pools_of(nodes: Iterable[Node], request: SliceRequest) -> dict[str, list[Node]]:
    """The requested kind of TPU nodes by node pool (one pool, one slice), each sorted by name."""
    pools: dict[str, list[Node]] = {}
    for node in nodes:
        if matches(node, request):
            pools.setdefault(_labels(node).get(well_known.NODEPOOL, ""), []).append(node)
    return {pool: sorted(members, key=_name) for pool, members in sorted(pools.items())}


def slice_readiness(nodes: Iterable[Node], request: SliceRequest, *, now: float) -> SliceReadiness:
    """Group the requested kind of TPU nodes by node pool and judge each pool (``now``: Unix seconds)."""
    pools = pools_of(nodes, request)
    ready: list[str] = []
    not_ready: dict[str, str] = {}
    for pool in pools:
        problem = pool_problem(pools[pool], request, now)
        if problem is None:
            ready.append(pool)
        else:
            not_ready[pool] = problem
    return SliceReadiness(request.description, request.num_slices, tuple(ready), not_ready)


# --- maintenance announced inside a run ----------------------------------------------------------


class MaintenanceWindow(str, enum.Enum):
    """What a run does about maintenance GKE announced on its slices inside its expected duration."""

    START_NOW = "start_now"
    """Start it now on the idle slices (GKE's manual start), wait for it to pass, then submit."""
    WAIT = "wait"
    """Submit once the maintenance has passed."""
    IGNORE = "ignore"
    """Submit at once; the disruption is handled when it comes."""


def maintenance_window_of(value: Any) -> MaintenanceWindow | None:
    """The policy named by ``value`` (a string or the enum), or ``None`` if it names none."""
    try:
        return MaintenanceWindow(value)
    except ValueError:
        return None


def duration_seconds(value: Any) -> float | None:
    """A run's expected duration in seconds (``timedelta``, seconds, or a rendered number), ``None`` if invalid."""
    return _seconds(value)


def is_perform_maintenance_asked(node: Node) -> bool:
    """Someone (we, or an operator) already asked GKE to start this node's maintenance now."""
    return _labels(node).get(well_known.PERFORM_MAINTENANCE) == "true"


def occupies_node(pod: Mapping[str, Any]) -> bool:
    """A pod that makes its node busy: not finished, not a DaemonSet's, not a static pod's mirror.

    A slice whose nodes run only device plugins and log agents is idle: starting its maintenance
    takes nothing from anyone.
    """
    meta = pod.get("metadata") or {}
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if well_known.MIRROR_POD in (meta.get("annotations") or {}):
        return False
    return not any(owner.get("kind") == "DaemonSet" for owner in meta.get("ownerReferences") or ())


def busy_pools_of(pods_by_pool: Mapping[str, Sequence[Sequence[Mapping[str, Any]] | None]]) -> set[str] | None:
    """The node pools another workload runs on, from the pods on each of their nodes (``None`` for a
    node whose pods could not be read: then no pool can be told idle, and ``None`` is the answer)."""
    if any(pods is None for listed in pods_by_pool.values() for pods in listed):
        return None
    return {pool for pool, listed in pods_by_pool.items() if any(occupies_node(p) for pods in listed for p in pods or ())}


@dataclass(frozen=True)
class MaintenanceAhead:
    """Maintenance on the slices a run may land on, inside its expected duration, and what to do now.

    Slices busy with another workload are left out: the run cannot land there now, and their
    maintenance is never started for it.
    """

    policy: MaintenanceWindow
    announced: Mapping[str, float] = field(default_factory=dict)
    """Node pool → the earliest maintenance time announced on it (Unix seconds), inside the run."""
    in_progress: tuple[str, ...] = ()
    """Node pools under maintenance now (started by GKE, by us, or by anyone)."""
    start_on: tuple[str, ...] = ()
    """Nodes to label ``perform-maintenance=true`` now (``start_now``: every node of each idle
    announced slice not already labelled)."""
    busy: tuple[str, ...] = ()
    """Announced node pools left alone because another workload runs on them."""

    @property
    def clear(self) -> bool:
        """Nothing stands between the run and its submission."""
        return self.policy is MaintenanceWindow.IGNORE or not (self.announced or self.in_progress)

    @property
    def waiting_for(self) -> tuple[str, ...]:
        """The node pools whose maintenance the run waits out before it is submitted."""
        return tuple(sorted({*self.announced, *self.in_progress})) if not self.clear else ()

    def summary(self, now: float) -> str:
        """One line for the task log: what is announced or under way, and what the run does about it."""
        parts = [f"{pool}: maintenance {in_how_long(when - now)}" for pool, when in sorted(self.announced.items())]
        parts += [f"{pool}: under maintenance" for pool in self.in_progress]
        if not parts and self.busy:
            return f"maintenance announced inside the run only on slices other workloads hold, left alone: {', '.join(self.busy)}"
        if not parts:
            return "no maintenance announced on the slices this run may land on, within its expected duration"
        said = "; ".join(parts)
        if self.policy is MaintenanceWindow.IGNORE:
            return f"{said} — submitting anyway (maintenance_window='ignore')"
        doing = (
            f"starting the maintenance of {len(self.start_on)} idle node(s) now (maintenance_window='start_now'), "
            "then submitting once it has passed"
            if self.start_on
            else "submitting once it has passed"
        )
        busy = f"; left alone (busy): {', '.join(self.busy)}" if self.busy else ""
        return f"{said} — {doing}{busy}"

    def recorded(self, earlier: Mapping[str, Any] | None, *, now: float, expected_duration: float) -> dict[str, Any]:
        """The result's ``maintenance``: what was announced when first looked at (seconds ahead),
        the nodes whose maintenance the run started, the slices it waited for and how long (so far)."""
        earlier = earlier or {}
        since = float(earlier.get("since") or now)
        return {
            "policy": self.policy.value,
            "expected_duration_seconds": expected_duration,
            "since": since,
            "announced": dict(earlier.get("announced") or {pool: round(when - now, 1) for pool, when in sorted(self.announced.items())}),
            "started_on": sorted({*(earlier.get("started_on") or ()), *self.start_on}),
            "waited_for": sorted({*(earlier.get("waited_for") or ()), *self.waiting_for}),
            "busy": sorted({*(earlier.get("busy") or ()), *self.busy}),
            "waited_seconds": round(now - since, 1),
        }


def maintenance_ahead(
    nodes: Iterable[Node],
    request: SliceRequest,
    *,
    now: float,
    expected_duration: float,
    policy: MaintenanceWindow,
    busy_pools: Iterable[str] | None = (),
) -> MaintenanceAhead:
    """Which slices of the run's shape have maintenance inside ``[now, now + expected_duration]``.

    ``busy_pools``: pools another workload runs on (left out); ``None`` when that cannot be read,
    so every pool counts and none is started (we never take a slice from someone else's run).
    A maintenance time already passed, and not yet begun, counts as inside.
    """
    pools = pools_of(nodes, request)
    busy = set(busy_pools) if busy_pools is not None else set()
    announced: dict[str, float] = {}
    in_progress: list[str] = []
    start_on: list[str] = []
    left_alone: list[str] = []
    for pool, members in pools.items():
        if any(is_under_maintenance(n) for n in members):
            in_progress.append(pool)
            continue
        times = [t for t in (scheduled_maintenance(n) for n in members) if t is not None]
        if not times or min(times) > now + expected_duration:
            continue
        if pool in busy:
            left_alone.append(pool)
            continue
        announced[pool] = min(times)
        if policy is MaintenanceWindow.START_NOW and busy_pools is not None:
            start_on.extend(_name(n) for n in members if not is_perform_maintenance_asked(n))
    return MaintenanceAhead(policy, announced, tuple(in_progress), tuple(start_on), tuple(left_alone))


def maintenance_passed(nodes: Iterable[Node], request: SliceRequest, pools: Iterable[str], *, now: float, expected_duration: float) -> bool:
    """The named pools have no maintenance under way and none announced inside the run any more
    (a pool gone from the cluster has none either)."""
    wanted = set(pools)
    by_pool = {pool: members for pool, members in pools_of(nodes, request).items() if pool in wanted}
    for members in by_pool.values():
        if any(is_under_maintenance(n) for n in members):
            return False
        times = [t for t in (scheduled_maintenance(n) for n in members) if t is not None]
        if times and min(times) <= now + expected_duration:
            return False
    return True

"""Slice readiness verdicts from real-shaped Node objects, and the readiness sensor's arguments."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pathways_airflow.sensors.slices import TpuSliceReadinessSensor
from pathways_airflow.state.slices import SliceRequest, in_how_long, slice_readiness, slice_request
from pathways_airflow_testing.nodes import (
    ACTIVE_MAINTENANCE_LABEL,
    IMPENDING_TERMINATION_TAINT,
    SCHEDULED_MAINTENANCE_LABEL,
    NodePool,
    node_manifests,
    tpu_pool,
)
from pathways_airflow.triggers.slices import TpuSliceReadinessTrigger

NOW = 1_760_000_000.0


def cluster_nodes() -> list[dict]:
    """A CPU pool, three v5e 2x4 slices (2 VMs each), one v5e 8-chip 2x4 slice (1 VM), a v6e 4x4 slice."""
    pools = [
        NodePool("default-pool", "n2-standard-64", nodes=2),
        *(tpu_pool(f"v5e-{i}", "ct5lp-hightpu-4t", "2x4") for i in range(3)),
        tpu_pool("v5e-8t", "ct5lp-hightpu-8t", "2x4"),
        tpu_pool("v6e-0", "ct6e-standard-4t", "4x4"),
    ]
    return [node for pool in pools for node in node_manifests(pool)]


def in_pool(nodes: list[dict], pool: str) -> list[dict]:
    return [n for n in nodes if n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == pool]


V5E_2X4 = slice_request(tpu="v5e", topology="2x4", num_slices=3)


def test_healthy_slices_of_the_requested_kind_are_ready_and_others_ignored():
    verdict = slice_readiness(cluster_nodes(), V5E_2X4, now=NOW)
    # v5e-8t has the same accelerator and topology labels but is a one-VM ct5lp-hightpu-8t slice.
    assert verdict.ready == ("v5e-0", "v5e-1", "v5e-2")
    assert verdict.not_ready == {}
    assert verdict.enough
    assert slice_readiness(cluster_nodes(), slice_request(machine_type="ct5lp-hightpu-8t", topology="2x4"), now=NOW).ready == ("v5e-8t",)
    assert slice_readiness(cluster_nodes(), slice_request(tpu="v6e", topology="4x4"), now=NOW).ready == ("v6e-0",)


def test_a_slice_under_active_maintenance_is_not_ready():
    nodes = cluster_nodes()
    for node in in_pool(nodes, "v5e-1"):
        node["metadata"]["labels"][ACTIVE_MAINTENANCE_LABEL] = "ONGOING"
        node["spec"]["unschedulable"] = True
        node["spec"]["taints"].append({"key": IMPENDING_TERMINATION_TAINT, "value": "true", "effect": "NoSchedule"})
    verdict = slice_readiness(nodes, V5E_2X4, now=NOW)
    assert verdict.ready == ("v5e-0", "v5e-2")
    assert verdict.not_ready == {"v5e-1": "2 of 2 nodes under active maintenance"}
    assert not verdict.enough
    assert verdict.summary() == (
        "2 of 3 ct5lp-hightpu-4t 2x4 slice(s) ready — ready: v5e-0, v5e-2 — v5e-1: 2 of 2 nodes under active maintenance"
    )


def test_one_bad_vm_makes_the_whole_slice_not_ready():
    nodes = cluster_nodes()
    in_pool(nodes, "v5e-0")[1]["metadata"]["labels"][ACTIVE_MAINTENANCE_LABEL] = "passthrough"
    in_pool(nodes, "v5e-1")[0]["spec"]["taints"].append(
        {"key": IMPENDING_TERMINATION_TAINT, "value": "true", "effect": "NoSchedule"}
    )
    in_pool(nodes, "v5e-2")[0]["status"]["conditions"] = [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
    ]
    verdict = slice_readiness(nodes, V5E_2X4, now=NOW)
    assert verdict.ready == ()
    assert verdict.not_ready == {
        "v5e-0": "1 of 2 nodes under active maintenance",
        "v5e-1": "1 of 2 nodes about to terminate (impending-node-termination)",
        "v5e-2": "1 of 2 nodes not Ready (NodeStatusUnknown)",
    }


def test_a_cordoned_node_or_a_missing_vm_makes_a_slice_not_ready():
    nodes = cluster_nodes()
    in_pool(nodes, "v5e-0")[0]["spec"]["unschedulable"] = True
    nodes.remove(in_pool(nodes, "v5e-2")[1])
    verdict = slice_readiness(nodes, V5E_2X4, now=NOW)
    assert verdict.not_ready == {
        "v5e-0": "1 of 2 nodes cordoned (unschedulable)",
        "v5e-2": "1 of 2 nodes registered",
    }


@pytest.mark.parametrize(
    ("window", "scheduled_in", "expected"),
    [
        (None, 720, None),  # no window asked: scheduled maintenance alone does not matter
        (3600, 720, "maintenance scheduled in 12 min"),
        (3600, 4000, None),
        (timedelta(hours=2), 4000, "maintenance scheduled in 67 min"),
        (3600, -30, "maintenance scheduled now"),
        (30 * 3600, 5 * 3600, "maintenance scheduled in 5.0 h"),
    ],
)
def test_scheduled_maintenance_within_the_window(window, scheduled_in, expected):
    nodes = cluster_nodes()
    in_pool(nodes, "v6e-0")[2]["metadata"]["labels"][SCHEDULED_MAINTENANCE_LABEL] = str(int(NOW + scheduled_in))
    verdict = slice_readiness(nodes, slice_request(tpu="v6e", topology="4x4", no_maintenance_within=window), now=NOW)
    assert verdict.not_ready.get("v6e-0") == expected
    assert verdict.enough is (expected is None)


def test_no_matching_pool_says_so():
    verdict = slice_readiness(cluster_nodes(), slice_request(tpu="v5p", topology="2x2x1"), now=NOW)
    assert verdict.summary() == "0 of 1 ct5p-hightpu-4t 2x2x1 slice(s) ready: no node pool has ct5p-hightpu-4t 2x2x1 slices"
    assert verdict.to_dict() == {"request": "ct5p-hightpu-4t 2x2x1", "num_slices": 1, "ready": [], "not_ready": {}}


def test_durations_read_like_a_human_wrote_them():
    assert [in_how_long(s) for s in (-1, 45, 720, 7200, 12600)] == ["now", "in 45 s", "in 12 min", "in 2.0 h", "in 3.5 h"]


def test_a_request_resolves_shorthands_and_rendered_numbers():
    request = slice_request(tpu="v5e", topology="4x4", num_slices="2", no_maintenance_within=timedelta(minutes=5))
    assert request == SliceRequest(request.machine_type, "4x4", 2, 4, 300.0)
    assert request.machine_type.name == "ct5lp-hightpu-4t"


def test_bad_arguments_name_every_field():
    with pytest.raises(ValueError) as refused:
        slice_request(tpu="v9", topology="2x4", num_slices=0, no_maintenance_within=-5)
    assert refused.value.fields == ("tpu", "num_slices", "no_maintenance_within")
    with pytest.raises(ValueError, match=r"topology='3x3': not a valid topology for ct5lp-hightpu-4t \(TPU v5e\); valid: 2x2, 2x4"):
        TpuSliceReadinessSensor(task_id="slices", tpu="v5e", topology="3x3")
    with pytest.raises(ValueError, match="machine_type"):
        TpuSliceReadinessSensor(task_id="slices", topology="2x4")


def test_templated_arguments_wait_until_rendered():
    sensor = TpuSliceReadinessSensor(task_id="slices", tpu="{{ params.tpu }}", topology="2x4", num_slices="{{ params.n }}")
    sensor.tpu, sensor.num_slices = "v6e", "x"
    with pytest.raises(ValueError, match="num_slices='x'"):
        sensor.slice_request()


def test_the_trigger_round_trips():
    trigger = TpuSliceReadinessTrigger(
        target={"kubernetes_conn_id": "k"}, machine_type="ct6e-standard-4t", topology="4x4", num_slices=2,
        no_maintenance_within=600.0, poll_interval=5.0,
    )
    path, kwargs = trigger.serialize()
    assert path == "pathways_airflow.triggers.slices.TpuSliceReadinessTrigger"
    assert TpuSliceReadinessTrigger(**kwargs).serialize() == (path, kwargs)


# --- maintenance announced inside a run -------------------------------------------------------------

from pathways_airflow.state.slices import (  # noqa: E402
    MaintenanceWindow,
    maintenance_ahead,
    maintenance_passed,
    maintenance_window_of,
    occupies_node,
)
from pathways_airflow_testing.nodes import PERFORM_MAINTENANCE_LABEL  # noqa: E402

V5E_ONE = slice_request(tpu="v5e", topology="2x4")
HOUR = 3600.0


def announce(nodes: list[dict], pool: str, seconds_ahead: float) -> None:
    """GKE's notice on every VM of the slice (it announces per node; a host event takes the slice)."""
    for node in in_pool(nodes, pool):
        node["metadata"]["labels"][SCHEDULED_MAINTENANCE_LABEL] = str(int(NOW + seconds_ahead))


@pytest.mark.parametrize("policy", list(MaintenanceWindow))
def test_nothing_announced_inside_the_run_lets_every_policy_submit(policy):
    nodes = cluster_nodes()
    announce(nodes, "v5e-1", 20 * HOUR)  # after the run's ten hours
    ahead = maintenance_ahead(nodes, V5E_ONE, now=NOW, expected_duration=10 * HOUR, policy=policy)
    assert ahead.clear and ahead.waiting_for == () and ahead.start_on == ()
    assert ahead.summary(NOW) == "no maintenance announced on the slices this run may land on, within its expected duration"


def test_wait_waits_for_every_slice_the_run_may_land_on_with_maintenance_inside_it():
    nodes = cluster_nodes()
    announce(nodes, "v5e-1", HOUR)
    announce(nodes, "v5e-2", -60)  # overdue, not begun: still ahead of the run
    ahead = maintenance_ahead(nodes, V5E_ONE, now=NOW, expected_duration=10 * HOUR, policy=MaintenanceWindow.WAIT)
    assert not ahead.clear
    assert ahead.announced == {"v5e-1": NOW + HOUR, "v5e-2": NOW - 60}
    assert ahead.waiting_for == ("v5e-1", "v5e-2") and ahead.start_on == ()
    assert ahead.summary(NOW) == "v5e-1: maintenance in 60 min; v5e-2: maintenance now — submitting once it has passed"


def test_start_now_labels_every_vm_of_each_idle_announced_slice_and_leaves_busy_ones_alone():
    nodes = cluster_nodes()
    for pool in ("v5e-0", "v5e-1", "v5e-2"):
        announce(nodes, pool, 2 * HOUR)
    in_pool(nodes, "v5e-2")[0]["metadata"]["labels"][PERFORM_MAINTENANCE_LABEL] = "true"  # asked already
    ahead = maintenance_ahead(
        nodes, V5E_ONE, now=NOW, expected_duration=10 * HOUR, policy=MaintenanceWindow.START_NOW, busy_pools={"v5e-0"}
    )
    assert ahead.busy == ("v5e-0",)
    assert ahead.waiting_for == ("v5e-1", "v5e-2")
    assert ahead.start_on == (
        *(n["metadata"]["name"] for n in in_pool(nodes, "v5e-1")),
        in_pool(nodes, "v5e-2")[1]["metadata"]["name"],
    )
    assert ahead.summary(NOW).endswith(
        "— starting the maintenance of 3 idle node(s) now (maintenance_window='start_now'), then submitting once it "
        "has passed; left alone (busy): v5e-0"
    )


@pytest.mark.parametrize("policy", [MaintenanceWindow.WAIT, MaintenanceWindow.START_NOW])
def test_maintenance_announced_only_on_busy_slices_is_said_and_nothing_waits(policy):
    nodes = cluster_nodes()
    announce(nodes, "v5e-0", HOUR)
    ahead = maintenance_ahead(nodes, V5E_ONE, now=NOW, expected_duration=10 * HOUR, policy=policy, busy_pools={"v5e-0"})
    assert ahead.clear and ahead.waiting_for == () and ahead.start_on == ()
    assert ahead.summary(NOW) == "maintenance announced inside the run only on slices other workloads hold, left alone: v5e-0"


def test_start_now_starts_nothing_when_busy_slices_cannot_be_told_apart():
    nodes = cluster_nodes()
    announce(nodes, "v5e-1", HOUR)
    ahead = maintenance_ahead(nodes, V5E_ONE, now=NOW, expected_duration=10 * HOUR, policy=MaintenanceWindow.START_NOW, busy_pools=None)
    assert ahead.start_on == () and ahead.waiting_for == ("v5e-1",)


def test_ignore_goes_ahead_and_says_what_it_goes_ahead_of():
    nodes = cluster_nodes()
    announce(nodes, "v5e-1", HOUR)
    ahead = maintenance_ahead(nodes, V5E_ONE, now=NOW, expected_duration=10 * HOUR, policy=MaintenanceWindow.IGNORE)
    assert ahead.clear and ahead.start_on == ()
    assert ahead.summary(NOW) == "v5e-1: maintenance in 60 min — submitting anyway (maintenance_window='ignore')"


def test_a_slice_under_maintenance_is_waited_for_and_passes_once_it_is_back_clean():
    nodes = cluster_nodes()
    for node in in_pool(nodes, "v5e-1"):
        node["metadata"]["labels"][ACTIVE_MAINTENANCE_LABEL] = "ONGOING"
    ahead = maintenance_ahead(nodes, V5E_ONE, now=NOW, expected_duration=HOUR, policy=MaintenanceWindow.WAIT)
    assert ahead.in_progress == ("v5e-1",) and ahead.waiting_for == ("v5e-1",)
    assert not maintenance_passed(nodes, V5E_ONE, ["v5e-1"], now=NOW, expected_duration=HOUR)
    for node in in_pool(nodes, "v5e-1"):
        del node["metadata"]["labels"][ACTIVE_MAINTENANCE_LABEL]
    assert maintenance_passed(nodes, V5E_ONE, ["v5e-1"], now=NOW, expected_duration=HOUR)
    announce(nodes, "v5e-1", 30 * 60)  # announced again, inside the run: not passed
    assert not maintenance_passed(nodes, V5E_ONE, ["v5e-1"], now=NOW, expected_duration=HOUR)
    assert maintenance_passed(nodes, V5E_ONE, ["gone-pool"], now=NOW, expected_duration=HOUR)


def test_the_record_keeps_what_was_first_announced_and_adds_up_the_wait():
    nodes = cluster_nodes()
    announce(nodes, "v5e-1", HOUR)
    first = maintenance_ahead(nodes, V5E_ONE, now=NOW, expected_duration=10 * HOUR, policy=MaintenanceWindow.START_NOW, busy_pools=set())
    record = first.recorded(None, now=NOW, expected_duration=10 * HOUR)
    assert record == {
        "policy": "start_now", "expected_duration_seconds": 10 * HOUR, "since": NOW, "announced": {"v5e-1": HOUR},
        "started_on": sorted(first.start_on), "waited_for": ["v5e-1"], "busy": [], "waited_seconds": 0.0,
    }
    later = maintenance_ahead(cluster_nodes(), V5E_ONE, now=NOW + 900, expected_duration=10 * HOUR, policy=MaintenanceWindow.START_NOW, busy_pools=set())
    final = later.recorded(record, now=NOW + 900, expected_duration=10 * HOUR)
    assert final["announced"] == {"v5e-1": HOUR} and final["started_on"] == record["started_on"]
    assert final["waited_for"] == ["v5e-1"] and final["waited_seconds"] == 900.0


def test_daemonset_mirror_and_finished_pods_leave_a_node_idle():
    base = {"metadata": {"name": "p", "namespace": "ns"}, "status": {"phase": "Running"}}
    assert occupies_node(base)
    assert not occupies_node({**base, "metadata": {**base["metadata"], "ownerReferences": [{"kind": "DaemonSet", "name": "tpu-device-plugin"}]}})
    assert not occupies_node({**base, "metadata": {**base["metadata"], "annotations": {"kubernetes.io/config.mirror": "abc"}}})
    assert not occupies_node({**base, "status": {"phase": "Succeeded"}})
    assert occupies_node({**base, "status": {"phase": "Pending"}})


def test_policies_are_named_as_the_operator_takes_them():
    assert [maintenance_window_of(v) for v in ("start_now", "wait", "ignore", "later")] == [*MaintenanceWindow, None]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"maintenance_window": "later", "expected_duration": 3600}, "maintenance_window"),
        ({"expected_duration": 0}, "expected_duration"),
        ({"expected_duration": "soon"}, "expected_duration"),
    ],
)
def test_the_operator_refuses_a_bad_window_or_duration_before_anything_is_submitted(kwargs, field):
    from pathways_airflow.operators import PathwaysJobOperator

    with pytest.raises(ValueError, match=f"{field}="):
        PathwaysJobOperator(task_id="train", tpu="v5e", topology="2x4", pathways_dir="gs://bucket/tmp", **kwargs)
    templated = PathwaysJobOperator(
        task_id="train", tpu="v5e", topology="2x4", pathways_dir="gs://bucket/tmp", expected_duration="{{ params.hours * 3600 }}"
    )
    assert "expected_duration" in templated.template_fields


def test_a_pool_is_busy_when_a_pod_of_another_workload_runs_on_any_of_its_nodes_and_unknown_when_one_node_is_unread():
    from pathways_airflow.state.slices import busy_pools_of

    running = {"metadata": {"name": "other-team-worker-0"}, "status": {"phase": "Running"}}
    agent = {"metadata": {"name": "fluentbit", "ownerReferences": [{"kind": "DaemonSet"}]}, "status": {"phase": "Running"}}
    assert busy_pools_of({"v5e-0": [[agent], [running]], "v5e-1": [[agent], []]}) == {"v5e-0"}
    assert busy_pools_of({"v5e-0": [[agent], None]}) is None
    assert busy_pools_of({}) == set()

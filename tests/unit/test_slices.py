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

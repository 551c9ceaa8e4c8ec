"""The local LeaderWorkerSet controller: groups of leader and workers, readiness, group restarts, cleanup."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest
import yaml
from kubernetes import client, config

from pathways_airflow_testing.cluster import LocalCluster
from pathways_airflow_testing.controllers.lws import (
    Group,
    group_breakage,
    leader_pod,
    lws_conditions,
    lws_spec,
    revision_hash,
    worker_pod,
)

T = TypeVar("T")
LWS = ("leaderworkerset.x-k8s.io", "v1")
PREFIX = "leaderworkerset.sigs.k8s.io"
NAME = f"{PREFIX}/name"
NODEPOOL = "cloud.google.com/gke-nodepool"


# --- pure decisions ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jetstream(upstream_samples: Path) -> dict[str, Any]:
    """GKE's JetStream + Pathways LeaderWorkerSet, as stored (namespace and uid filled in)."""
    document = next(
        d
        for d in yaml.safe_load_all((upstream_samples / "seed-jetstream-lws-single.yaml").read_text())
        if d and d["kind"] == "LeaderWorkerSet"
    )
    document["metadata"].update(namespace="default", uid="lws-uid")
    return document


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


def test_leader_and_worker_pods_of_the_jetstream_manifest(jetstream):
    spec = lws_spec(jetstream)
    revision = revision_hash(jetstream)
    leader = leader_pod(spec, 0, revision)
    assert leader["metadata"]["name"] == "jetstream-pathways-0"
    group_key = hashlib.sha1(b"default/jetstream-pathways-0").hexdigest()
    assert leader["metadata"]["labels"] == {
        "app": "jetstream-pathways",
        NAME: "jetstream-pathways",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
        "leaderworkerset.sigs.k8s.io/group-index": "0",
        "leaderworkerset.sigs.k8s.io/group-key": group_key,
        "leaderworkerset.sigs.k8s.io/template-revision-hash": revision,
    }
    assert leader["metadata"]["annotations"] == {
        "leaderworkerset.sigs.k8s.io/size": "5",
        "leaderworkerset.sigs.k8s.io/exclusive-topology": NODEPOOL,
    }
    assert (leader["spec"]["hostname"], leader["spec"]["subdomain"]) == (
        "jetstream-pathways-0",
        "jetstream-pathways",
    )
    assert leader["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    rm = next(c for c in leader["spec"]["containers"] if c["name"] == "pathways-rm")
    # LWS's variables come first, so the manifest's $(LWS_LEADER_ADDRESS) expands.
    assert [e["name"] for e in rm["env"]][:4] == [
        "LWS_LEADER_ADDRESS",
        "LWS_GROUP_SIZE",
        "LWS_WORKER_INDEX",
        "HOST_ADDRESS",
    ]
    assert env_of(rm)["LWS_LEADER_ADDRESS"] == "jetstream-pathways-0.jetstream-pathways.default"
    assert "TPU_WORKER_ID" not in env_of(rm)  # the leader asks for no chips

    worker = worker_pod(spec, leader, 3, topology_value="tpu-v6e-4x4-1")
    assert worker["metadata"]["name"] == "jetstream-pathways-0-3"
    assert worker["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "3"
    assert worker["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"] == group_key
    assert (
        worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"] == "jetstream-pathways-0"
    )
    assert worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] == NODEPOOL
    assert worker["spec"]["nodeSelector"][NODEPOOL] == "tpu-v6e-4x4-1"
    env = env_of(worker["spec"]["containers"][0])
    assert (env["LWS_WORKER_INDEX"], env["LWS_GROUP_SIZE"], env["TPU_WORKER_ID"], env["TPU_NAME"]) == (
        "3",
        "5",
        "2",
        "jetstream-pathways-0",
    )
    assert env["TPU_WORKER_HOSTNAMES"] == ",".join(
        f"jetstream-pathways-0-{i}.jetstream-pathways" for i in range(1, 5)
    )

    changed = {**jetstream, "spec": {**jetstream["spec"], "replicas": 3}}
    assert revision_hash(changed) == revision  # scaling is not a new template revision


def _pod(name: str, phase: str = "Running", restarts: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": name},
        "status": {"phase": phase, "containerStatuses": [{"restartCount": restarts}]},
    }


def test_what_breaks_a_group():
    leader = _pod("s-0")
    healthy = Group(0, leader, {1: _pod("s-0-1"), 2: _pod("s-0-2")})
    assert group_breakage(healthy, 3, True, "RecreateGroupOnPodRestart") is None
    assert (
        group_breakage(Group(0, leader, {1: _pod("s-0-1", "Failed")}), 3, True, "RecreateGroupOnPodRestart")
        == "pod s-0-1 failed"
    )
    assert (
        group_breakage(
            Group(0, leader, {1: _pod("s-0-1", restarts=1), 2: _pod("s-0-2")}),
            3,
            True,
            "RecreateGroupOnPodRestart",
        )
        == "pod s-0-1 restarted a container"
    )
    assert (
        group_breakage(Group(0, leader, {1: _pod("s-0-1")}), 3, True, "RecreateGroupOnPodRestart")
        == "worker pod s-0-2 is gone"
    )
    assert (
        group_breakage(Group(0, None, {1: _pod("s-0-1")}), 3, True, "RecreateGroupOnPodRestart")
        == "the leader pod is gone"
    )
    assert (
        group_breakage(Group(0, leader, {}), 3, False, "RecreateGroupOnPodRestart") is None
    )  # workers not created yet
    assert group_breakage(Group(0, leader, {1: _pod("s-0-1", "Failed")}), 3, True, "None") is None


def test_available_and_progressing_exclude_each_other():
    conditions = lws_conditions([], ["Progressing"], "t1")
    assert [(c["type"], c["status"]) for c in conditions] == [("Progressing", "True")]
    conditions = lws_conditions(conditions, ["Available"], "t2")
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("Progressing", "False", "GroupsProgressing"),
        ("Available", "True", "AllGroupsReady"),
    ]
    conditions = lws_conditions(conditions, ["Progressing"], "t3")
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("Progressing", "True", "GroupsProgressing"),
        ("Available", "False", "AllGroupsReady"),
    ]


# --- against the local cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(crds: Path):
    with LocalCluster(
        crds=[crds], gcs=False, kueue=False, speed=100, namespaces=("groups", "ready", "slices")
    ) as running:
        yield running


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(cluster.kubeconfig)


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.03)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def lws_manifest(name: str, *, replicas: int, size: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": {
                    "metadata": {"labels": {"role": "leader"}},
                    "spec": {"containers": [{"name": "leader", "image": "busybox"}]},
                },
                "workerTemplate": {
                    "spec": {
                        "containers": [
                            {
                                "name": "worker",
                                "image": "busybox",
                                "env": [{"name": "LEADER", "value": "$(LWS_LEADER_ADDRESS)"}],
                            }
                        ]
                    }
                },
            },
            **spec,
        },
    }


def condition_of(lws: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    return next(
        (c for c in ((lws or {}).get("status") or {}).get("conditions") or () if c["type"] == type_), {}
    )


def get_lws(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(*LWS, namespace, "leaderworkersets", name)


def available(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    lws = get_lws(custom, namespace, name)
    return lws if condition_of(lws, "Available").get("status") == "True" else None


def pods_of(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, client.V1Pod]:
    return {
        p.metadata.name: p for p in core.list_namespaced_pod(namespace, label_selector=f"{NAME}={name}").items
    }


def test_groups_are_created_become_available_restart_whole_and_go_with_their_lws(cluster, api):
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    custom.create_namespaced_custom_object(
        *LWS, "groups", "leaderworkersets", lws_manifest("srv", replicas=2, size=3)
    )

    lws = wait_for(lambda: available(custom, "groups", "srv"), what="Available")
    assert condition_of(lws, "Available")["reason"] == "AllGroupsReady"
    assert {k: lws["status"][k] for k in ("replicas", "readyReplicas", "updatedReplicas")} == {
        "replicas": 2,
        "readyReplicas": 2,
        "updatedReplicas": 2,
    }
    assert lws["status"]["hpaPodSelector"] == f"{NAME}=srv,leaderworkerset.sigs.k8s.io/worker-index=0"
    pods = pods_of(core, "groups", "srv")
    assert sorted(pods) == ["srv-0", "srv-0-1", "srv-0-2", "srv-1", "srv-1-1", "srv-1-2"]
    assert all(p.status.phase == "Running" for p in pods.values())
    worker = pods["srv-1-2"]
    leader = pods["srv-1"]
    assert (worker.metadata.labels[NAME], worker.metadata.labels[f"{PREFIX}/group-index"]) == ("srv", "1")
    assert worker.metadata.labels[f"{PREFIX}/group-key"] == leader.metadata.labels[f"{PREFIX}/group-key"]
    assert (leader.metadata.labels["role"], leader.metadata.annotations[f"{PREFIX}/size"]) == ("leader", "3")
    assert {e.name: e.value for e in worker.spec.containers[0].env} == {
        "LWS_LEADER_ADDRESS": "srv-1.srv.groups",
        "LWS_GROUP_SIZE": "3",
        "LWS_WORKER_INDEX": "2",
        "LEADER": "$(LWS_LEADER_ADDRESS)",
    }
    assert (worker.spec.hostname, worker.spec.subdomain) == ("srv-1-2", "srv")
    service = core.read_namespaced_service("srv", "groups")
    assert (service.spec.cluster_ip, service.spec.selector) == ("None", {NAME: "srv"})
    assert service.spec.publish_not_ready_addresses is True

    # A worker's program fails: its whole group is recreated, the other group is left alone.
    before = {name: pod.metadata.uid for name, pod in pods.items()}
    assert cluster.fail_pod("groups", "srv-1-2", exit_code=1)
    recreated = wait_for(
        lambda: (
            (now := pods_of(core, "groups", "srv"))
            and all(
                now.get(n) is not None and now[n].metadata.uid != before[n]
                for n in ("srv-1", "srv-1-1", "srv-1-2")
            )
            and now
        ),
        what="group 1 recreated",
    )
    assert all(recreated[n].metadata.uid == before[n] for n in ("srv-0", "srv-0-1", "srv-0-2"))
    messages = [e["message"] for e in cluster.list("v1", "Event", "groups") if e["reason"] == "RecreateGroup"]
    assert messages and "group 1" in messages[0]
    wait_for(
        lambda: (
            available(custom, "groups", "srv")
            and all(p.status.phase == "Running" for p in pods_of(core, "groups", "srv").values())
        ),
        what="Available again",
    )

    # A deleted pod also takes its group with it.
    leader_uid = pods_of(core, "groups", "srv")["srv-0"].metadata.uid
    core.delete_namespaced_pod("srv-0-1", "groups")
    wait_for(
        lambda: (
            (p := pods_of(core, "groups", "srv").get("srv-0")) is not None and p.metadata.uid != leader_uid
        ),
        what="group 0 recreated",
    )

    # Scaling down removes whole groups; deleting the LeaderWorkerSet removes its pods and Service.
    custom.patch_namespaced_custom_object(
        *LWS, "groups", "leaderworkersets", "srv", {"spec": {"replicas": 1}}
    )
    wait_for(
        lambda: sorted(pods_of(core, "groups", "srv")) == ["srv-0", "srv-0-1", "srv-0-2"],
        what="scaled to one group",
    )
    custom.delete_namespaced_custom_object(*LWS, "groups", "leaderworkersets", "srv")
    wait_for(lambda: not pods_of(core, "groups", "srv"), what="pods deleted with the LWS")
    assert not [s for s in core.list_namespaced_service("groups").items if s.metadata.name == "srv"]


def test_leader_ready_startup_waits_for_the_leader_and_a_template_change_rolls_the_group(cluster, api):
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    manifest = lws_manifest("gated", replicas=1, size=2, startupPolicy="LeaderReady")
    leader_spec = manifest["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    leader_spec["containers"][0]["readinessProbe"] = {
        "httpGet": {"path": "/ready", "port": 8000},
        "periodSeconds": 1,
    }
    custom.create_namespaced_custom_object(*LWS, "ready", "leaderworkersets", manifest)

    wait_for(
        lambda: (
            (p := pods_of(core, "ready", "gated").get("gated-0")) is not None and p.status.phase == "Running"
        ),
        what="leader running",
    )
    time.sleep(0.3)  # 30 simulated seconds: the leader is never ready, so no worker may appear
    assert sorted(pods_of(core, "ready", "gated")) == ["gated-0"]
    lws = get_lws(custom, "ready", "gated")
    assert condition_of(lws, "Progressing")["status"] == "True" and not condition_of(lws, "Available")
    old_revision = pods_of(core, "ready", "gated")["gated-0"].metadata.labels[
        "leaderworkerset.sigs.k8s.io/template-revision-hash"
    ]

    del leader_spec["containers"][0]["readinessProbe"]
    custom.patch_namespaced_custom_object(
        *LWS,
        "ready",
        "leaderworkersets",
        "gated",
        {"spec": {"leaderWorkerTemplate": manifest["spec"]["leaderWorkerTemplate"]}},
    )
    lws = wait_for(lambda: available(custom, "ready", "gated"), what="rolled and Available")
    pods = pods_of(core, "ready", "gated")
    assert sorted(pods) == ["gated-0", "gated-0-1"]
    new_revision = pods["gated-0"].metadata.labels["leaderworkerset.sigs.k8s.io/template-revision-hash"]
    assert (
        new_revision != old_revision
        and pods["gated-0-1"].metadata.labels["leaderworkerset.sigs.k8s.io/template-revision-hash"]
        == new_revision
    )
    assert lws["status"]["updatedReplicas"] == 1
    custom.delete_namespaced_custom_object(*LWS, "ready", "leaderworkersets", "gated")


def test_exclusive_topology_gives_each_group_a_slice_of_its_own(cluster, api):
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    selector = {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
    }
    toleration = [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]
    manifest = lws_manifest("serve", replicas=2, size=5)
    manifest["metadata"]["annotations"] = {"leaderworkerset.sigs.k8s.io/exclusive-topology": NODEPOOL}
    template = manifest["spec"]["leaderWorkerTemplate"]
    template["leaderTemplate"]["spec"].update(nodeSelector=selector, tolerations=toleration)
    template["workerTemplate"]["spec"].update(nodeSelector=selector)
    template["workerTemplate"]["spec"]["containers"][0]["resources"] = {"limits": {"google.com/tpu": "4"}}
    custom.create_namespaced_custom_object(*LWS, "slices", "leaderworkersets", manifest)

    wait_for(lambda: available(custom, "slices", "serve"), what="Available")
    nodes = {n.metadata.name: n.metadata.labels[NODEPOOL] for n in core.list_node().items}
    pools: dict[str, set[str]] = {}
    for pod in pods_of(core, "slices", "serve").values():
        assert pod.metadata.annotations["leaderworkerset.sigs.k8s.io/exclusive-topology"] == NODEPOOL
        pools.setdefault(pod.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"], set()).add(
            nodes[pod.spec.node_name]
        )
    assert all(len(p) == 1 for p in pools.values()) and pools["0"] != pools["1"], pools
    worker = pods_of(core, "slices", "serve")["serve-1-4"]
    assert worker.spec.node_selector[NODEPOOL] == next(iter(pools["1"]))
    assert {e.name: e.value for e in worker.spec.containers[0].env}["TPU_WORKER_ID"] == "3"
    custom.delete_namespaced_custom_object(*LWS, "slices", "leaderworkersets", "serve")

"""Lists read a page at a time (``limit`` and ``continue``): the local API server pages as Kubernetes
does, and a shared watch builds its cache from every page of one snapshot."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget
from pathways_airflow.resources import Resource
from pathways_airflow.triggers import watch as watch_module
from pathways_airflow.triggers.watch import SharedWatch

NAMESPACE = "pages"
CONFIGMAP = Resource("", "v1", "configmaps", "ConfigMap")


@pytest.fixture(scope="module")
def core(pathways_cluster) -> client.CoreV1Api:
    api = client.CoreV1Api(config.new_client_from_config(pathways_cluster.kubeconfig))
    api.create_namespace({"metadata": {"name": NAMESPACE}})
    for index in range(7):
        api.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": f"cm-{index}", "labels": {"page": "yes"}}})
    return api


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": pathways_cluster.kubeconfig}}),
    )


def test_pages_cover_one_snapshot_in_name_order_whatever_changes_between_them(core):
    first = core.list_namespaced_config_map(NAMESPACE, limit=3)
    assert [c.metadata.name for c in first.items] == ["cm-0", "cm-1", "cm-2"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 4

    core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "cm-late"}})
    try:
        second = core.list_namespaced_config_map(NAMESPACE, limit=3, _continue=first.metadata._continue)
        third = core.list_namespaced_config_map(NAMESPACE, limit=3, _continue=second.metadata._continue)
        assert [c.metadata.name for c in second.items + third.items] == ["cm-3", "cm-4", "cm-5", "cm-6"]
        assert not third.metadata._continue
        assert first.metadata.resource_version == second.metadata.resource_version == third.metadata.resource_version
    finally:
        core.delete_namespaced_config_map("cm-late", NAMESPACE)

    selected = core.list_namespaced_config_map(NAMESPACE, limit=3, label_selector="page=yes")
    assert selected.metadata._continue and selected.metadata.remaining_item_count is None


def test_a_continue_the_server_no_longer_holds_is_410_expired(core):
    with pytest.raises(ApiException) as expired:
        core.list_namespaced_config_map(NAMESPACE, limit=3, _continue="eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MX0=")
    assert expired.value.status == 410


def test_a_shared_watch_caches_every_page_of_its_list(core, monkeypatch):
    monkeypatch.setattr(watch_module, "LIST_PAGE", 2)

    async def cached() -> list[str]:
        watch = SharedWatch(ClusterTarget(), CONFIGMAP, NAMESPACE, "page=yes")
        subscription = watch.subscribe()
        try:
            await asyncio.wait_for(watch.synced.wait(), 30)
            return sorted(name for _, name in watch.objects)
        finally:
            watch.unsubscribe(subscription)
            await AsyncPathwaysHook.close_all()

    assert asyncio.run(cached()) == [f"cm-{index}" for index in range(7)]

"""Two clusters in one process: each connection gets a client and configuration of its own.

A triggerer serves the deferred tasks of many DAGs from one process; tasks that reach different
clusters must never share a configuration (the process-wide default one is never written).
Runs against two local clusters, one reached through ``kube_config_path`` and one through
``kube_config`` content, on every Airflow/cncf-kubernetes lane.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import kubernetes.client
import kubernetes_asyncio.client
import pytest

from pathways_airflow.hooks.clients import async_api_client, environment_proxy, kube_config_source
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget, PathwaysHook
from pathways_airflow.exceptions import BadSpecError
from pathways_airflow.testing import LocalCluster

from tests.support.connections import kubernetes_connection


@pytest.fixture(scope="module")
def two_clusters(monkeypatch_module):
    with LocalCluster(gcs=False, kueue=False, namespaces=("team-a",)) as a, LocalCluster(
        gcs=False, kueue=False, namespaces=("team-b",)
    ) as b:
        monkeypatch_module.setenv("AIRFLOW_CONN_CLUSTER_A", kubernetes_connection(path=a.kubeconfig))
        monkeypatch_module.setenv("AIRFLOW_CONN_CLUSTER_B", kubernetes_connection(content=Path(b.kubeconfig).read_text()))
        yield a, b


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def namespaces(listing: dict) -> set[str]:
    return {item["metadata"]["name"] for item in listing["items"]}


def test_sync_hooks_reach_their_own_cluster(two_clusters):
    a, b = two_clusters
    hook_a = PathwaysHook(ClusterTarget(kubernetes_conn_id="cluster_a"))
    hook_b = PathwaysHook(ClusterTarget(kubernetes_conn_id="cluster_b"))

    assert hook_a.api_client.configuration.host == a.server
    assert hook_b.api_client.configuration.host == b.server
    assert hook_a.api_client.configuration is not hook_b.api_client.configuration
    assert "team-a" in namespaces(hook_a.request("GET", "/api/v1/namespaces"))
    assert "team-b" in namespaces(hook_b.request("GET", "/api/v1/namespaces"))
    assert "team-a" not in namespaces(hook_b.request("GET", "/api/v1/namespaces"))
    # Nothing was loaded into the process-wide default configuration.
    assert kubernetes.client.Configuration.get_default_copy().host not in (a.server, b.server)


def test_async_hooks_built_concurrently_on_one_loop_stay_apart(two_clusters):
    a, b = two_clusters

    async def scenario():
        try:
            hook_a = AsyncPathwaysHook(ClusterTarget(kubernetes_conn_id="cluster_a"))
            hook_b = AsyncPathwaysHook(ClusterTarget(kubernetes_conn_id="cluster_b"))
            # Both clients are first built at the same time, as two triggers starting together do.
            async with contextlib.AsyncExitStack() as held:
                client_a, client_b = await asyncio.gather(
                    held.enter_async_context(hook_a.api_client()), held.enter_async_context(hook_b.api_client())
                )
                assert client_a.configuration.host == a.server
                assert client_b.configuration.host == b.server
                assert client_a.configuration is not client_b.configuration
            listed_a, listed_b = await asyncio.gather(
                hook_a.request("GET", "/api/v1/namespaces"), hook_b.request("GET", "/api/v1/namespaces")
            )
            assert "team-a" in namespaces(listed_a) and "team-a" not in namespaces(listed_b)
            assert "team-b" in namespaces(listed_b) and "team-b" not in namespaces(listed_a)
            assert kubernetes_asyncio.client.Configuration.get_default_copy().host not in (a.server, b.server)
        finally:
            await AsyncPathwaysHook.close_all()

    asyncio.run(scenario())


def test_async_clients_read_the_proxy_environment_once_not_per_request(two_clusters, monkeypatch):
    a, _ = two_clusters
    target = ClusterTarget(kubernetes_conn_id="cluster_a")

    async def client_proxy_and_trust() -> tuple[str | None, bool]:
        client = await async_api_client(target)
        try:
            return client.configuration.proxy, client.rest_client.pool_manager.trust_env
        finally:
            await client.close()

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert asyncio.run(client_proxy_and_trust()) == ("http://proxy.internal:3128", False)

    # NO_PROXY exempts the API server: no proxy, and requests go straight to it.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert asyncio.run(client_proxy_and_trust()) == (None, False)

    async def listed() -> dict:
        try:
            return await AsyncPathwaysHook(target).request("GET", "/api/v1/namespaces")
        finally:
            await AsyncPathwaysHook.close_all()

    assert "team-a" in namespaces(asyncio.run(listed()))
    assert environment_proxy(a.server) is None


def test_a_connection_naming_two_sources_is_refused_before_any_request():
    with pytest.raises(BadSpecError, match="in_cluster, kube_config_path"):
        kube_config_source({"in_cluster": True, "kube_config_path": "/k"}, "both")


def test_connection_extras_are_read_as_the_cncf_provider_writes_them():
    source = kube_config_source(
        {"extra__kubernetes__kube_config": '{"apiVersion": "v1", "clusters": []}', "cluster_context": "ctx", "disable_verify_ssl": "true"}
    )
    assert source.config_dict == {"apiVersion": "v1", "clusters": []}
    assert (source.context, source.verify_ssl, source.in_cluster, source.config_file) == ("ctx", False, False, None)
    assert kube_config_source({}).is_explicit is False
    with pytest.raises(BadSpecError, match="not a kubeconfig object"):
        kube_config_source({"kube_config": "just text"}, "c")

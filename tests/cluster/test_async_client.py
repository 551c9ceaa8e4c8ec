"""The real ``kubernetes_asyncio`` client, unchanged, against the local cluster."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException


def run(coroutine):
    return asyncio.run(coroutine)


async def api_client(cluster):
    return await config.new_client_from_config(config_file=cluster.kubeconfig)


def test_crud_list_and_custom_objects(pathways_cluster):
    async def scenario():
        async with await api_client(pathways_cluster) as api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_config_map("default", {"metadata": {"name": "async-cm"}, "data": {"k": "v"}})
            read = await core.read_namespaced_config_map("async-cm", "default")
            assert read.data == {"k": "v"}
            patched = await core.patch_namespaced_config_map("async-cm", "default", {"data": {"k": "w"}})
            assert patched.data == {"k": "w"}
            custom = client.CustomObjectsApi(api)
            listed = await custom.list_namespaced_custom_object("pathways-job.pathways.domain", "v1", "default", "pathwaysjobs")
            assert listed["kind"] == "PathwaysJobList"
            await core.delete_namespaced_config_map("async-cm", "default")
            with pytest.raises(ApiException) as missing:
                await core.read_namespaced_config_map("async-cm", "default")
            assert missing.value.status == 404

    run(scenario())


def test_watch_sees_changes_and_410_after_compaction(pathways_cluster):
    async def scenario():
        async with await api_client(pathways_cluster) as api:
            core = client.CoreV1Api(api)
            start = (await core.list_namespaced_config_map("default")).metadata.resource_version
            await core.create_namespaced_config_map("default", {"metadata": {"name": "async-w"}})
            seen = []
            async with watch.Watch() as stream:
                async for event in stream.stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1):
                    seen.append((event["type"], event["object"].metadata.name))
            assert ("ADDED", "async-w") in seen
            await core.delete_namespaced_config_map("async-w", "default")
            pathways_cluster.compact()
            with pytest.raises(ApiException) as gone:
                async with watch.Watch() as stream:
                    async for _ in stream.stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1):
                        pass
            assert gone.value.status == 410

    run(scenario())


def test_injected_500_and_a_dropped_watch(pathways_cluster):
    async def scenario():
        async with await api_client(pathways_cluster) as api:
            core = client.CoreV1Api(api)
            pathways_cluster.inject_fault(r"/api/v1/namespaces/default/pods$", status=500, methods=["GET"])
            with pytest.raises(ApiException) as error:
                await core.list_namespaced_pod("default")
            assert error.value.status == 500
            rv = (await core.list_namespaced_pod("default")).metadata.resource_version

            async def consume():
                async with watch.Watch() as stream:
                    async for _ in stream.stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=30):
                        pass

            task = asyncio.create_task(consume())
            for _ in range(100):
                if pathways_cluster.api.open_watches:
                    break
                await asyncio.sleep(0.02)
            dropped = await asyncio.to_thread(pathways_cluster.drop_watches)
            assert dropped >= 1
            await asyncio.wait_for(task, 5)

    run(scenario())

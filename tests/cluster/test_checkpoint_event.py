"""The AssetWatcher trigger fires once per newly committed step, never for a partial one."""

from __future__ import annotations

import asyncio

from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from pathways_airflow.triggers.checkpoint_event import CheckpointCommittedTrigger

from tests.support.connections import connect


def test_fires_for_each_newly_committed_step_and_not_for_partial_ones(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)
    bucket = storage.Client(project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": pathways_cluster.gcs_endpoint}).bucket("pathways-demo")
    base = "watched/run/checkpoints"

    def write(step: int, committed: bool) -> None:
        bucket.blob(f"{base}/{step}/_CHECKPOINT_METADATA").upload_from_string(b"{}")
        bucket.blob(f"{base}/{step}/items/a").upload_from_string(b"x")
        if committed:
            bucket.blob(f"{base}/{step}/commit_success.txt").upload_from_string(b"ok")

    write(10, committed=True)
    classpath, kwargs = CheckpointCommittedTrigger(checkpoint_dir=f"gs://pathways-demo/{base}", poll_interval=0.1).serialize()
    trigger = CheckpointCommittedTrigger(**kwargs)

    async def scenario():
        events = trigger.run()
        first = (await asyncio.wait_for(events.__anext__(), 10)).payload
        write(20, committed=False)  # a save in progress: must not fire
        nxt = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.6)
        assert not nxt.done()
        bucket.blob(f"{base}/20/commit_success.txt").upload_from_string(b"ok")
        second = (await asyncio.wait_for(nxt, 10)).payload
        await events.aclose()
        return first, second

    first, second = asyncio.run(scenario())
    assert first["step"] == 10 and first["uri"] == f"gs://pathways-demo/{base}/10"
    assert second["step"] == 20

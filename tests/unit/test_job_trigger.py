"""BatchJobTrigger's serialized form: what the triggerer's database row holds must rebuild it."""

from __future__ import annotations

import json

from pathways_airflow.triggers.job import BatchJobTrigger


def test_the_objects_to_delete_on_kill_survive_serialization():
    trigger = BatchJobTrigger(
        name="bench-1a2b3c4d-bench",
        namespace="serving",
        target={"kubernetes_conn_id": "k"},
        poll_interval=5,
        deadline=1.5e9,
        also_delete=[{"kind": "LeaderWorkerSet", "name": "bench-1a2b3c4d"}, {"kind": "Service", "name": "bench-1a2b3c4d-svc"}],
    )
    path, kwargs = trigger.serialize()
    assert path == "pathways_airflow.triggers.job.BatchJobTrigger"
    revived = BatchJobTrigger(**json.loads(json.dumps(kwargs)))
    assert revived.serialize() == (path, kwargs)
    assert [item["kind"] for item in revived.also_delete] == ["LeaderWorkerSet", "Service"]


def test_a_trigger_serialized_without_objects_to_delete_still_rebuilds():
    kwargs = {"name": "convert-abc", "namespace": "serving", "target": {}, "poll_interval": 2.0, "deadline": None, "max_failures": 10}
    assert BatchJobTrigger(**kwargs).also_delete == []

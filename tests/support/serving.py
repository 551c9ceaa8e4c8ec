"""What an inference task may leave in the local cluster: nothing, once it has ended."""

from __future__ import annotations

import time

from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.names import TASK_KEY_LABEL
from pathways_airflow.spec.serving import serving_names


def committed_serving_checkpoint(bucket, step: str) -> dict:
    """A committed serving checkpoint at ``step`` of ``bucket``, as CheckpointConversionOperator reports it."""
    bucket.blob(f"{step}/items/params.bin").upload_from_string(b"weights")
    bucket.blob(f"{step}/commit_success.txt").upload_from_string(b"")
    return {"uri": f"gs://{bucket.name}/{step}", "items_uri": f"gs://{bucket.name}/{step}/items"}


def leftovers(cluster, identity: TaskIdentity) -> list[str]:
    """Everything of the task still in the cluster (objects terminating count)."""
    names = serving_names(identity)
    found = []
    for api, kind in (
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
        ("v1", "Service"),
        ("batch/v1", "Job"),
    ):
        found += [
            f"{kind}/{o['metadata']['name']}"
            for o in cluster.list(api, kind, "default", labels={TASK_KEY_LABEL: identity.key})
        ]
    found += [f"Service/{names.lws}"] if cluster.get("v1", "Service", names.lws) else []
    for labels in (
        {"leaderworkerset.sigs.k8s.io/name": names.lws},
        {"batch.kubernetes.io/job-name": names.job},
    ):
        found += [f"Pod/{p['metadata']['name']}" for p in cluster.list("v1", "Pod", "default", labels=labels)]
    return found


def eventually_nothing_left(cluster, identity: TaskIdentity, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while (left := leftovers(cluster, identity)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []

"""JetStream on Pathways (LeaderWorkerSet) serving from a committed checkpoint, and a benchmark Job."""

from __future__ import annotations

import json

import yaml
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from kubernetes import client, config

from tests.support.waiting import wait_for


def seed_lws(upstream_samples, checkpoint: str) -> list[dict]:
    text = (upstream_samples / "seed-jetstream-lws-single.yaml").read_text()
    text = text.replace("TPU_ACCELERATOR_TYPE", "tpu-v6e-slice").replace("TPU_TOPOLOGY", "4x4").replace("GCS_CHECKPOINT_PATH", checkpoint)
    return [d for d in yaml.safe_load_all(text) if d]


def test_jetstream_serves_through_the_service_proxy_and_the_benchmark_writes_results(pathways_cluster, upstream_samples):
    cluster = pathways_cluster
    gcs = storage.Client(project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": cluster.gcs_endpoint})
    bucket = gcs.bucket("pathways-demo")
    for name in ("serving/ckpt/checkpoints/0/items/params.bin", "serving/ckpt/checkpoints/0/commit_success.txt"):
        bucket.blob(name).upload_from_string(b"x")
    api = config.new_client_from_config(cluster.kubeconfig)
    lws, service = seed_lws(upstream_samples, "gs://pathways-demo/serving/ckpt/checkpoints/0/items")
    lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][2]["env"] = [
        {"name": "PATHWAYS_TESTING_WARMUP_SECONDS", "value": "120"}
    ]
    client.CustomObjectsApi(api).create_namespaced_custom_object("leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets", lws)
    client.CoreV1Api(api).create_namespaced_service("default", service)

    available = wait_for(
        lambda: any(
            c["type"] == "Available" and c["status"] == "True"
            for c in (cluster.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "jetstream-pathways") or {}).get("status", {}).get("conditions", [])
        ),
        timeout=60,
    )
    assert available
    core = client.CoreV1Api(api)
    health = wait_for(
        lambda: (r := core.connect_get_namespaced_service_proxy_with_path("jetstream-svc:8000", "default", "healthcheck", _preload_content=False)) and r.status == 200 and r,
        timeout=60,
    )
    assert health.status == 200
    pods = core.list_namespaced_pod("default", label_selector="leaderworkerset.sigs.k8s.io/name=jetstream-pathways").items
    assert sorted(p.metadata.name for p in pods) == ["jetstream-pathways-0", *(f"jetstream-pathways-0-{i}" for i in range(1, 5))]

    benchmark = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "benchmark",
                            "image": "jetstream-benchmark",
                            "command": ["bash", "-c"],
                            "args": [
                                "python3 benchmark_serving.py --server jetstream-svc --port 8000 --num-prompts 8 --save-result "
                                "&& gsutil cp *.json gs://pathways-demo/serving/results/run1.json"
                            ],
                        }
                    ],
                }
            },
        },
    }
    client.BatchV1Api(api).create_namespaced_job("default", benchmark)
    job = wait_for(lambda: (j := cluster.get("batch/v1", "Job", "bench")) and j.get("status", {}).get("conditions") and j, timeout=60)
    assert [c["type"] for c in job["status"]["conditions"] if c["status"] == "True"][-1] == "Complete"
    result = json.loads(bucket.blob("serving/results/run1.json").download_as_bytes())
    assert result["metrics"]["completed"] == 8 and result["metrics"]["p99_ttft_ms"] > 0

    client.CustomObjectsApi(api).delete_namespaced_custom_object("leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets", "jetstream-pathways")
    wait_for(lambda: not core.list_namespaced_pod("default", label_selector="leaderworkerset.sigs.k8s.io/name=jetstream-pathways").items, timeout=60)
    core.delete_namespaced_service("jetstream-svc", "default")

"""``pathways-airflow local-cluster`` in the foreground, driven as a user would."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SCRIPT = shutil.which("pathways-airflow", path=str(Path(sys.executable).parent))


def test_local_cluster_prints_where_it_is_serves_kubectl_and_runs_scenarios(tmp_path, crds):
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [SCRIPT, "local-cluster", "--crds", str(crds), "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        printed = {}
        deadline = time.monotonic() + 60
        while "running" not in printed and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            key, _, value = line.partition(":")
            printed[key.strip()] = value.strip()
            if line.startswith("running"):
                printed["running"] = "yes"
        assert printed.get("kubeconfig") == str(kubeconfig) and printed["api server"].startswith("http://127.0.0.1:")
        assert printed["gcs endpoint"].startswith("http://127.0.0.1:")
        with urllib.request.urlopen(printed["gcs endpoint"] + "/storage/v1/b") as response:
            assert "pathways-demo" in response.read().decode()
        if shutil.which("kubectl"):
            nodes = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "name"], capture_output=True, text=True, check=True)
            assert "node/gke-local-tpu-v5e-2x4-0-0" in nodes.stdout
        import yaml

        token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
        request = urllib.request.Request(
            printed["api server"] + "/_local/scenarios/maintenance",
            data=json.dumps({"node_pool": "tpu-v5e-2x4-1", "duration": 60}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request) as response:
            assert json.loads(response.read())["ok"] is True
        node_url = printed["api server"] + "/api/v1/nodes/gke-local-tpu-v5e-2x4-1-0"
        for _ in range(50):
            with urllib.request.urlopen(urllib.request.Request(node_url, headers={"Authorization": f"Bearer {token}"})) as response:
                labels = json.loads(response.read())["metadata"]["labels"]
            if "cloud.google.com/active-node-maintenance" in labels:
                break
            time.sleep(0.1)
        assert labels["cloud.google.com/active-node-maintenance"] == "ONGOING"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    assert process.returncode == 0

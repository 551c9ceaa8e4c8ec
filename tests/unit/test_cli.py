"""The ``pathways-airflow render`` console script, run as a user runs it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

SCRIPT = shutil.which("pathways-airflow", path=str(Path(sys.executable).parent))
COMMON = ["--tpu", "v5e", "--topology", "2x4", "--num-slices", "2", "--pathways-dir", "gs://my-bucket/tmp"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    assert SCRIPT, "the pathways-airflow console script is not installed"
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=60)


def test_render_both_backends_with_a_command_after_the_separator(crds):
    for backend, kind in (("pathwaysjob", "PathwaysJob"), ("jobset", "JobSet")):
        result = run(
            "render", "--backend", backend, *COMMON, "--image", "python:3.11", "--env", "STEPS=10",
            "--queue-name", "tpu-queue", "--crds", str(crds), "--", "python3", "train.py", "--steps", "10",
        )
        assert result.returncode == 0, result.stderr
        manifest = yaml.safe_load(result.stdout)
        assert manifest["kind"] == kind
        assert manifest["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "tpu-queue"}
        assert "&id" not in result.stdout  # no YAML anchors for kubectl users
        text = result.stdout
        assert "- train.py" in text and "- --steps" in text


def test_bad_input_exits_2_with_every_problem_and_prints_no_manifest():
    result = run("render", "--tpu", "v6e", "--topology", "3x3", "--pathways-dir", "s3://x", "--image", "i")
    assert result.returncode == 2 and result.stdout == ""
    assert "topology='3x3'" in result.stderr and "valid: 1x1, 2x2" in result.stderr
    assert "pathways_dir='s3://x'" in result.stderr


def test_a_name_that_cannot_fit_is_refused():
    result = run("render", *COMMON, "--name", "a-name-that-is-far-too-long-for-pathways")
    assert result.returncode == 2 and "at most 22 characters" in result.stderr


def test_custom_components_from_flags():
    result = run(
        "render", *COMMON, "--custom-image", "proxy_server=proxy:1", "--custom-flag", "proxy_server=--x=1",
        "--custom-flag", "worker=--y=2",
    )
    assert result.returncode == 0, result.stderr
    components = yaml.safe_load(result.stdout)["spec"]["customComponents"]
    assert components == [
        {"componentType": "proxy_server", "image": "proxy:1", "customFlags": ["--x=1"]},
        {"componentType": "worker", "customFlags": ["--y=2"]},
    ]




MANIFESTS = Path(__file__).parent / "fixtures" / "manifests"


def test_render_a_manifest_prints_it_supervised_and_says_what_changed_on_stderr(crds):
    result = run("render", "--manifest", str(MANIFESTS / "xpk-pathways-jobset.yaml"), "--crds", str(crds))
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load(result.stdout)
    assert manifest["metadata"]["name"] == "demo-pathways"
    assert [r["name"] for r in manifest["spec"]["failurePolicy"]["rules"]] == ["disruptionRestartsFree", "userErrorFailsJobSet"]
    assert "2 × ct5lp-hightpu-4t 2x4, program in pathways-head/jax-tpu" in result.stderr
    assert "replicatedJobs[worker].restartPolicy: OnFailure → Never" in result.stderr


def test_render_a_serving_leaderworkerset_prints_it_with_the_tasks_service(crds):
    result = run("render", "--manifest", str(MANIFESTS / "lws-multihost-inference.yaml"), "--engine", "vllm", "--crds", str(crds))
    assert result.returncode == 0, result.stderr
    lws, service = yaml.safe_load_all(result.stdout)
    assert (lws["kind"], service["kind"], service["metadata"]["name"]) == ("LeaderWorkerSet", "Service", "tpu-offline-inference-multihost-svc")
    assert "vllm in vllm-leader, health check GET /health on 8000" in result.stderr


def test_render_refuses_a_manifest_it_cannot_supervise_and_needs_the_shape_without_one():
    result = run("render", "--manifest", str(MANIFESTS / "lws-multihost-inference.yaml"), "--engine", "jetstream", "--main-container", "sidecar")
    assert result.returncode == 2 and result.stdout == "" and "main_container='sidecar': is not a container of the leader" in result.stderr
    result = run("render", "--tpu", "v5e")
    assert result.returncode == 2 and "--topology=None: is required (or give --manifest)" in result.stderr

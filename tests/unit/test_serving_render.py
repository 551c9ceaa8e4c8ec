"""JetStream-on-Pathways LeaderWorkerSet, Service and benchmark Job rendering; reading their state."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pathways_airflow.operators.inference import InferenceBenchmarkOperator
from pathways_airflow.spec import MACHINE_TYPES, TaskIdentity
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.state.serving import crashed_container, server_progress
from pathways_airflow.spec.benchmark import (
    JOB_DEADLINE_GRACE,
    benchmark_metrics,
    benchmark_script,
    build_benchmark,
    job_deadline,
    render_benchmark_job,
    result_object_uri,
)
from pathways_airflow.spec.serving import (
    MAX_SERVING_NAME,
    build_server,
    checkpoint_items_uri,
    names_for,
    render_leaderworkerset,
    render_service,
    serving_names,
)
from pathways_airflow.spec.jetstream import DATASETS, ENGINE as JETSTREAM, METRIC_KEYS
from pathways_airflow.spec.tpu import slice_shape, topologies_by_size
from pathways_airflow_testing.programs.args import command_tokens, parse_params
from pathways_airflow_testing.programs.benchmark import copy_destination

CHECKPOINT = {
    "uri": "gs://my-bucket/serving/run/checkpoints/0",
    "items_uri": "gs://my-bucket/serving/run/checkpoints/0/items",
}
SERVER = dict(engine=JETSTREAM, checkpoint=CHECKPOINT, model_name="llama2-70b", pathways_dir="gs://my-bucket/pathways")
BENCHMARK = dict(
    engine=JETSTREAM,
    model_name="llama2-70b", dataset="test", num_prompts=100, request_rate=4, max_output_length=1024
)
LABELS = TaskIdentity("nightly", "bench", "scheduled__2026-11-22T00:00:00+00:00").labels()


def lws_of(machine_type: str, topology: str, **overrides: Any) -> dict[str, Any]:
    server = build_server(machine_type=machine_type, topology=topology, **{**SERVER, **overrides})
    return render_leaderworkerset(
        server, name="bench-abcdefgh", namespace="serving", labels=LABELS, annotations={"a/b": "c"}
    )


def containers(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in template["spec"]["containers"]}


# --- the LeaderWorkerSet -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "machine_type, topology",
    [
        (m, t)
        for m in MACHINE_TYPES
        for t in dict.fromkeys((topologies_by_size(MACHINE_TYPES[m])[0], topologies_by_size(MACHINE_TYPES[m])[-1]))
    ],
)
def test_every_leaderworkerset_validates_strictly_against_the_crd(schema_validator, machine_type, topology):
    manifest = lws_of(
        machine_type,
        topology,
        env={
            "HF_TOKEN": {"valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
            "LOG_LEVEL": "INFO",
        },
        server_args=["per_device_batch_size=10", "quantization=int8"],
        node_selector={"cloud.google.com/reservation-name": "r1"},
        service_account_name="jetstream",
    )
    assert schema_validator.errors(manifest) == []
    shape = slice_shape(MACHINE_TYPES[machine_type], topology)
    template = manifest["spec"]["leaderWorkerTemplate"]
    assert template["size"] == shape.vms + 1
    worker = containers(template["workerTemplate"])["worker"]
    assert worker["resources"]["limits"] == {"google.com/tpu": str(MACHINE_TYPES[machine_type].chips_per_vm)}
    rm_args = containers(template["leaderTemplate"])["pathways-rm"]["args"]
    assert f"--instance_type={MACHINE_TYPES[machine_type].pathways_instance_type}:{topology}" in rm_args
    for role in ("leaderTemplate", "workerTemplate"):
        assert template[role]["spec"]["nodeSelector"] == {
            "cloud.google.com/reservation-name": "r1",
            "cloud.google.com/gke-tpu-accelerator": MACHINE_TYPES[machine_type].accelerator,
            "cloud.google.com/gke-tpu-topology": topology,
        }


def test_strict_validation_catches_a_misspelled_field(schema_validator):
    manifest = lws_of("ct6e-standard-4t", "4x4")
    manifest["spec"]["leaderWorkerTemplate"]["sizee"] = 5
    errors = schema_validator.errors(manifest)
    assert len(errors) == 1 and "sizee" in errors[0]


def seed(upstream_samples: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    text = (upstream_samples / "seed-jetstream-lws-single.yaml").read_text()
    text = text.replace("TPU_ACCELERATOR_TYPE", "tpu-v6e-slice").replace("TPU_TOPOLOGY", "4x4")
    text = text.replace("GCS_CHECKPOINT_PATH", CHECKPOINT["items_uri"])
    lws, service = [d for d in yaml.safe_load_all(text) if d]
    return lws, service


def structure(lws: dict[str, Any]) -> dict[str, Any]:
    """What the seed and ours must share: containers, ports, probes, flags, placement, size."""
    template = lws["spec"]["leaderWorkerTemplate"]

    def container_shape(c: dict[str, Any]) -> dict[str, Any]:
        return {
            "ports": [p["containerPort"] for p in c.get("ports", [])],
            "probes": {k: v["httpGet"] for k, v in c.items() if k.endswith("Probe")},
            "flags": sorted(
                a.split("=", 1)[0] for a in c.get("args", []) if a.startswith("--") and "debugging" not in a
            ),
            "env": sorted(e["name"] for e in c.get("env", [])),
            "tpus": c.get("resources", {}).get("limits", {}).get("google.com/tpu"),
        }

    return {
        "annotations": {
            k: v for k, v in lws["metadata"]["annotations"].items() if k.startswith("leaderworkerset")
        },
        "replicas": lws["spec"]["replicas"],
        "size": template["size"],
        **{
            role: {
                "containers": {c["name"]: container_shape(c) for c in template[role]["spec"]["containers"]},
                "order": [c["name"] for c in template[role]["spec"]["containers"]],
                "nodeSelector": template[role]["spec"]["nodeSelector"],
                "tolerations": template[role]["spec"]["tolerations"],
            }
            for role in ("leaderTemplate", "workerTemplate")
        },
    }


def test_the_leaderworkerset_has_the_seed_manifests_structure(upstream_samples):
    seed_lws, _ = seed(upstream_samples)
    ours = lws_of("ct6e-standard-4t", "4x4")
    assert structure(ours) == structure(seed_lws)
    leader = containers(ours["spec"]["leaderWorkerTemplate"]["leaderTemplate"])
    seeded = containers(seed_lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"])
    assert leader["jax-tpu"]["args"][:3] == [
        "MaxText/configs/base.yml",
        "model_name=llama2-70b",
        f"load_parameters_path={CHECKPOINT['items_uri']}",
    ]
    assert f"load_parameters_path={CHECKPOINT['items_uri']}" in seeded["jax-tpu"]["args"]
    for name in ("pathways-proxy", "pathways-rm"):
        scratch = [
            a for a in seeded[name]["args"] if not a.startswith(("--gcs_scratch_location", "--temporary"))
        ]
        assert [a for a in leader[name]["args"] if not a.startswith("--gcs_scratch_location")] == scratch
        assert "--gcs_scratch_location=gs://my-bucket/pathways" in leader[name]["args"]
    assert leader["pathways-rm"]["env"] == seeded["pathways-rm"]["env"]


def test_the_kubelet_waits_for_the_restore_as_long_as_the_operator_does():
    for seconds in (1, 600, 1800, 1801):
        probe = containers(
            lws_of("ct5lp-hightpu-4t", "2x4", startup_seconds=seconds)["spec"]["leaderWorkerTemplate"][
                "leaderTemplate"
            ]
        )["jax-tpu"]["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] >= seconds


def test_labels_reach_every_pod_and_the_service_selects_only_the_leader(schema_validator):
    lws = lws_of("ct5lp-hightpu-4t", "2x4")
    template = lws["spec"]["leaderWorkerTemplate"]
    assert (
        template["leaderTemplate"]["metadata"]["labels"]
        == LABELS
        == template["workerTemplate"]["metadata"]["labels"]
    )
    service = render_service(
        engine=JETSTREAM,
        name="bench-abcdefgh-svc", namespace="serving", lws_name="bench-abcdefgh", labels=LABELS
    )
    assert service["spec"]["selector"] == {
        "leaderworkerset.sigs.k8s.io/name": "bench-abcdefgh",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    assert {(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        ("jetstream-http", 8000, 8000),
        ("jetstream-grpc", 9000, 9000),
    }


def test_the_service_keeps_the_seed_services_http_port(upstream_samples):
    _, seeded = seed(upstream_samples)
    service = render_service(engine=JETSTREAM, name="x-svc", namespace="serving", lws_name="x")
    assert seeded["spec"]["ports"][0] in service["spec"]["ports"]


# --- names ---------------------------------------------------------------------------------------


def test_names_are_deterministic_and_every_derived_name_fits():
    identity = TaskIdentity("d" * 200, "benchmark_llama_405b_nightly", "manual__2026-11-22T00:00:00+00:00", 7)
    names = serving_names(identity)
    assert names == serving_names(identity) and names != serving_names(
        TaskIdentity(identity.dag_id, identity.task_id, "other")
    )
    assert (names.service, names.job) == (f"{names.lws}-svc", f"{names.lws}-bench")
    longest = names_for("a" * MAX_SERVING_NAME)
    most_vms = max(slice_shape(m, t).vms for m in MACHINE_TYPES.values() for t in m.topologies)
    derived = [
        longest.service,
        f"{longest.lws}-0-{'h' * 10}",  # the worker StatefulSet's controller-revision-hash label
        f"{longest.lws}-0-{most_vms}",  # the last worker pod's hostname
        f"{longest.job}-{'x' * 5}",  # a benchmark pod
    ]
    assert max(len(n) for n in derived) == 63
    with pytest.raises(InvalidWorkloadSpec, match=r"name='a{51}'.*at most 50"):
        names_for("a" * (MAX_SERVING_NAME + 1))


# --- inputs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "checkpoint, expected",
    [
        (CHECKPOINT, CHECKPOINT["items_uri"]),
        ({"uri": "gs://my-bucket/c/0"}, "gs://my-bucket/c/0/items"),
        ("gs://my-bucket/c/0/items/", "gs://my-bucket/c/0/items"),
        (str(CHECKPOINT), CHECKPOINT["items_uri"]),
    ],
)
def test_checkpoint_from_the_conversion_result_or_a_uri(checkpoint, expected):
    assert checkpoint_items_uri(checkpoint) == expected


@pytest.mark.parametrize(
    "checkpoint",
    [{"step": 0}, "/local/ckpt/items", "gs://my-bucket/a b/items", 42, None, "None", "{'uri': 3"],
)
def test_a_checkpoint_that_cannot_be_served_is_refused(checkpoint):
    with pytest.raises(InvalidWorkloadSpec, match="checkpoint="):
        checkpoint_items_uri(checkpoint)


def test_result_object_is_the_json_given_or_one_per_server_in_a_directory():
    assert result_object_uri("gs://my-bucket/r/run.json", "bench-x") == "gs://my-bucket/r/run.json"
    assert result_object_uri("gs://my-bucket/r/", "bench-x") == "gs://my-bucket/r/bench-x.json"
    assert result_object_uri("gs://my-bucket", "bench-x") == "gs://my-bucket/bench-x.json"
    with pytest.raises(InvalidWorkloadSpec, match="results_uri='gs://my-bucket/r/\\*.json'"):
        result_object_uri("gs://my-bucket/r/*.json", "bench-x")


def test_every_problem_is_reported_at_once_with_field_value_and_choices():
    with pytest.raises(InvalidWorkloadSpec) as server_error:
        build_server(
            engine=JETSTREAM,
            checkpoint="s3://elsewhere/items",
            model_name="llama 2",
            tpu="v6e",
            topology="3x3",
            pathways_dir="gs://my-bucket/p",
            server_args=["model_name=other", "--flag"],
            image_pull_policy="Sometimes",
            startup_seconds=0,
        )
    assert set(server_error.value.fields) == {
        "checkpoint",
        "model_name",
        "topology",
        "server_args",
        "image_pull_policy",
        "startup_timeout",
    }
    message = str(server_error.value)
    assert "topology='3x3': not a valid topology for ct6e-standard-4t (TPU v6e); valid: 1x1, 2x2" in message
    assert (
        "server_args='model_name=other': model_name is set from the operator's model_name parameter"
        in message
    )
    assert "image_pull_policy='Sometimes': unknown policy; valid: Always, IfNotPresent, Never" in message

    with pytest.raises(InvalidWorkloadSpec) as benchmark_error:
        build_benchmark(
            engine=JETSTREAM,
            model_name="m",
            dataset="imagenet",
            num_prompts=0,
            request_rate="fast",
            max_output_length="x",
            extra_args=["--port", "8000"],
        )
    message = str(benchmark_error.value)
    assert f"dataset='imagenet': not a dataset of the benchmark of engine='jetstream'; valid: {', '.join(DATASETS)}" in message
    assert "num_prompts=0: must be a positive integer" in message
    assert "request_rate='fast'" in message and "max_output_length='x'" in message
    assert "benchmark_args='--port': is set by the operator's own parameters" in message


def test_a_dataset_read_from_a_file_needs_its_path():
    with pytest.raises(
        InvalidWorkloadSpec, match="dataset_path=None: dataset='sharegpt' is read from a file"
    ):
        build_benchmark(**{**BENCHMARK, "dataset": "sharegpt"})
    run = build_benchmark(**{**BENCHMARK, "dataset": "sharegpt", "dataset_path": "/data/sharegpt.json"})
    assert run.arguments("svc")[run.arguments("svc").index("--dataset-path") + 1] == "/data/sharegpt.json"


@pytest.mark.parametrize(
    "rate, rendered", [("inf", "inf"), (float("inf"), "inf"), (4, "4.0"), ("0.5", "0.5")]
)
def test_request_rate_accepts_numbers_strings_and_inf(rate, rendered):
    argv = build_benchmark(**{**BENCHMARK, "request_rate": rate}).arguments("svc")
    assert argv[argv.index("--request-rate") + 1] == rendered


# --- the benchmark Job ---------------------------------------------------------------------------


def test_the_benchmark_job_runs_once_against_the_grpc_port_and_copies_its_result():
    run = build_benchmark(
        **BENCHMARK, env={"HF_TOKEN": {"valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}}
    )
    job = render_benchmark_job(
        run,
        name="bench-x-bench",
        namespace="serving",
        service="bench-x-svc",
        result_uri="gs://my-bucket/r/run.json",
        labels=LABELS,
    )
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["template"]["metadata"]["labels"] == LABELS == job["metadata"]["labels"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["bash", "-c"] and container["env"][0]["name"] == "HF_TOKEN"
    tokens = command_tokens([*container["command"], *container["args"]])
    params = parse_params(tokens, switches=["save-result"])
    assert (params.text("server"), params.text("port"), params.text("num_prompts")) == (
        "bench-x-svc",
        "9000",
        "100",
    )
    assert params.text("save_result") == "true"
    assert copy_destination(tokens) == ("*.json", "gs://my-bucket/r/run.json")


HOSTILE = [
    "gs://my-bucket/r/x'; touch CANARY; echo '.json",
    "gs://my-bucket/r/$(touch CANARY)/`touch CANARY`/run.json",
    "gs://my-bucket/r/a b && touch CANARY #.json",
]


@pytest.mark.parametrize("results_uri", HOSTILE)
def test_hostile_values_reach_the_programs_as_single_words_and_run_nothing(tmp_path, results_uri):
    run = build_benchmark(
        **{**BENCHMARK, "dataset": "sharegpt"},
        dataset_path="/data/$(touch CANARY)/x'y\".json",
        tokenizer="`touch CANARY`",
        extra_args=["--warmup-mode", "sampled; touch CANARY"],
        script="bench mark/benchmark_serving.py",
    )
    script = benchmark_script(run, server="bench-x-svc", result_uri=results_uri)
    stubs, work = tmp_path / "bin", tmp_path / "work"
    stubs.mkdir()
    work.mkdir()
    for program, effect in (("python3", "echo '{}' > JetStream-inf.json"), ("gsutil", ":")):
        stub = stubs / program
        stub.write_text(f"#!/bin/bash\nprintf '%s\\0' \"$@\" > {tmp_path}/{program}.argv\n{effect}\n")
        stub.chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "HOME": str(tmp_path)}

    subprocess.run(["bash", "-c", script], cwd=work, env=env, check=True, timeout=30)

    def argv(program: str) -> list[str]:
        return (tmp_path / f"{program}.argv").read_text().split("\0")[:-1]

    assert argv("python3") == run.arguments("bench-x-svc")[1:]
    assert argv("gsutil") == ["cp", "JetStream-inf.json", results_uri]
    assert not list(tmp_path.rglob("CANARY"))
    assert shlex.split(script)[-1] == results_uri


def test_a_results_uri_with_a_newline_or_wildcard_never_reaches_the_shell():
    run = build_benchmark(**BENCHMARK)
    for bad in ("gs://my-bucket/r\n/touch", "gs://my-bucket/r/*.json"):
        with pytest.raises(InvalidWorkloadSpec, match="results_uri="):
            benchmark_script(run, server="s", result_uri=bad)


# --- the result ----------------------------------------------------------------------------------


def jetstream_result(**overrides: Any) -> dict[str, Any]:
    metrics = {key: 1.5 for key in METRIC_KEYS} | {
        "completed": 100,
        "total_input_tokens": 2048,
        "total_output_tokens": 9000,
    }
    return {
        "metrics": metrics | overrides,
        "dimensions": {"date": "20261122-000000", "model_id": "llama2-70b"},
    }


def test_metrics_are_read_with_every_key():
    metrics = benchmark_metrics(jetstream_result(), JETSTREAM)
    assert list(metrics) == [*METRIC_KEYS, "total_input_tokens", "total_output_tokens"]
    assert metrics["completed"] == 100


def test_older_results_with_the_misspelled_request_throughput_are_read():
    result = jetstream_result()
    result["metrics"]["request_inthroughput"] = result["metrics"].pop("request_throughput")
    assert benchmark_metrics(result, JETSTREAM)["request_throughput"] == 1.5


def test_a_result_without_its_metrics_says_which_are_missing():
    result = jetstream_result()
    del result["metrics"]["p99_ttst_ms"], result["metrics"]["duration"]
    with pytest.raises(ValueError, match="gs://b/r.json: missing metrics p99_ttst_ms, duration"):
        benchmark_metrics(result, JETSTREAM, source="gs://b/r.json")
    with pytest.raises(ValueError, match="metric completed='100' is not a number"):
        benchmark_metrics(jetstream_result(completed="100"), JETSTREAM)


# --- reading the server and the Job --------------------------------------------------------------


def pod(
    name: str, worker_index: str, phase: str = "Running", ready: bool = True, statuses: list | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"leaderworkerset.sigs.k8s.io/worker-index": worker_index},
        },
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": statuses or [],
        },
    }


def lws_status(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "spec": {"leaderWorkerTemplate": {"size": 3}},
        "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]},
    }


def test_server_progress_waits_for_available_and_names_the_leader():
    pods = [pod("s-0", "0", ready=False), pod("s-0-1", "1"), pod("s-0-2", "2", phase="Pending", ready=False)]
    progress = server_progress(lws_status(("Progressing", "True")), pods, "jax-tpu")
    assert not progress.available and progress.leader == "s-0" and progress.crash is None
    assert progress.summary == "2/3 pods running, 1 ready; leader s-0 running"
    assert server_progress(lws_status(("Available", "True"), ("Progressing", "False")), pods, "jax-tpu").available


def test_a_jetstream_crash_is_seen_now_or_after_its_restart():
    crashed = [
        {
            "name": "jax-tpu",
            "restartCount": 1,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        }
    ]
    progress = server_progress(lws_status(("Progressing", "True")), [pod("s-0", "0", statuses=crashed)], "jax-tpu")
    assert progress.crash is not None and (progress.crash.exit_code, progress.crash.restarted) == (1, True)
    stopped = pod(
        "s-0", "0", phase="Failed", statuses=[{"name": "jax-tpu", "state": {"terminated": {"exitCode": 143}}}]
    )
    stopped["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}
    )
    assert server_progress(lws_status(("Progressing", "True")), [stopped], "jax-tpu").crash is None
    sidecar = [{"name": "pathways-proxy", "state": {"terminated": {"exitCode": 137}}}]
    assert crashed_container(pod("s-0", "0", statuses=sidecar), "jax-tpu") is None
    clean = [{"name": "jax-tpu", "state": {"terminated": {"exitCode": 0}}}]
    assert crashed_container(pod("s-0", "0", statuses=clean), "jax-tpu") is None


# --- the operator's dry run ----------------------------------------------------------------------


def operator(**overrides: Any) -> InferenceBenchmarkOperator:
    params = dict(
        **{**SERVER, "engine": "jetstream"},
        tpu="v5e",
        topology="2x4",
        **{k: v for k, v in BENCHMARK.items() if k not in ("model_name", "engine")},
        results_uri="gs://my-bucket/results/",
    )
    return InferenceBenchmarkOperator(task_id="bench", **{**params, **overrides})


def test_the_dry_run_renders_what_execute_applies(schema_validator):
    lws, service, job = operator().render_manifests()
    assert schema_validator.errors(lws) == []
    assert (lws["kind"], service["kind"], job["kind"]) == ("LeaderWorkerSet", "Service", "Job")
    assert service["metadata"]["name"] == f"{lws['metadata']['name']}-svc"
    assert copy_destination(
        command_tokens(["bash", "-c", job["spec"]["template"]["spec"]["containers"][0]["args"][0]])
    )[1] == (f"gs://my-bucket/results/{lws['metadata']['name']}.json")


def test_bad_parameters_fail_at_parse_time_and_templates_wait_for_rendering():
    with pytest.raises(InvalidWorkloadSpec) as error:
        operator(deferrable="yes", topology="9x9", results_uri="/tmp/results")
    assert set(error.value.fields) == {"deferrable", "topology", "results_uri"}
    assert operator(deferrable=True).deferrable is True
    templated = operator(topology="{{ params.topology }}", num_prompts="{{ params.prompts }}")
    with pytest.raises(InvalidWorkloadSpec, match="topology='{{ params.topology }}'"):
        templated.render_manifests()


@pytest.mark.parametrize("configured", ["True", "False"])
def test_the_benchmark_defers_by_the_operators_default_deferrable_setting(configured, tmp_path):
    code = (
        "from pathways_airflow.operators import InferenceBenchmarkOperator as Op;"
        "print(Op(task_id='b', engine='jetstream', checkpoint='gs://bkt/c/0/items', model_name='llama2-7b', tpu='v5e', topology='2x4',"
        " pathways_dir='gs://bkt/p', num_prompts=1, request_rate=1, max_output_length=1, dataset='test',"
        " results_uri='gs://bkt/r/').deferrable)"
    )
    env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": configured, "AIRFLOW_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == configured


def test_the_benchmark_wait_ends_after_the_jobs_own_deadline_or_the_tasks_whichever_is_first():
    assert job_deadline(1000.0, 3600, None) == (1000.0 + 3600 + JOB_DEADLINE_GRACE, f"{3600 + JOB_DEADLINE_GRACE}s")
    assert job_deadline(1000.0, 3600, 2000.0, "execution_timeout (0:16:40)") == (2000.0, "execution_timeout (0:16:40)")
    assert job_deadline(1000.0, 60, 9000.0)[1] == f"{60 + JOB_DEADLINE_GRACE}s"

"""vLLM on TPU as the serving engine: its LeaderWorkerSet (on Pathways and alone on one VM),
Service, ``vllm bench serve`` Job and result JSON, as the operators render and read them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pathways_airflow.operators.inference import InferenceBenchmarkOperator
from pathways_airflow.spec import MACHINE_TYPES, TaskIdentity
from pathways_airflow.spec.benchmark import benchmark_script, build_benchmark, render_benchmark_job, result_metrics
from pathways_airflow.spec.engines import DEFAULT_ENGINE, ENGINES, engine_named
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.serving import build_server, render_leaderworkerset, render_service
from pathways_airflow.spec.tpu import slice_shape
from pathways_airflow.spec.vllm import ENGINE as VLLM
from pathways_airflow.spec.vllm import METRIC_KEYS, RESULT_DIR, RESULT_FILE
from pathways_airflow_testing.programs.args import command_tokens, parse_params

CHECKPOINT = "gs://my-bucket/serving/run/checkpoints/0/items"
SERVER = dict(
    engine=VLLM,
    checkpoint=CHECKPOINT,
    model_name="qwen3-30b-a3b",
    hf_model="Qwen/Qwen3-30B-A3B",
    image="us-docker.pkg.dev/my-project/maxtext/maxtext-vllm:2026.11",
    pathways_dir="gs://my-bucket/pathways",
)
LABELS = TaskIdentity("nightly", "bench", "scheduled__2026-11-22T00:00:00+00:00").labels()


def lws_of(machine_type: str, topology: str, **overrides: Any) -> dict[str, Any]:
    server = build_server(machine_type=machine_type, topology=topology, **{**SERVER, **overrides})
    return render_leaderworkerset(server, name="bench-abcdefgh", namespace="serving", labels=LABELS)


def containers(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in template["spec"]["containers"]}


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_vllm_is_the_default_engine_and_unknown_engines_are_refused():
    assert DEFAULT_ENGINE == "vllm" and set(ENGINES) == {"vllm", "jetstream"}
    with pytest.raises(InvalidWorkloadSpec, match="engine='tgi': not a serving engine; valid: vllm, jetstream"):
        engine_named("tgi")


@pytest.mark.parametrize(
    "machine_type, topology", [("ct6e-standard-4t", "4x4"), ("ct5lp-hightpu-4t", "2x4"), ("ct5p-hightpu-4t", "2x2x2")]
)
def test_on_pathways_the_leader_runs_vllm_through_the_proxy_and_validates_against_the_crd(
    schema_validator, machine_type, topology
):
    manifest = lws_of(machine_type, topology, server_args=["--max-model-len", "4096"])
    assert schema_validator.errors(manifest) == []
    shape = slice_shape(MACHINE_TYPES[machine_type], topology)
    template = manifest["spec"]["leaderWorkerTemplate"]
    assert template["size"] == shape.vms + 1
    leader = containers(template["leaderTemplate"])
    assert list(leader) == ["pathways-proxy", "pathways-rm", "vllm"]
    vllm = leader["vllm"]
    assert "resources" not in vllm, "the workers hold the chips; the leader drives them through the proxy"
    assert {e["name"]: e["value"] for e in vllm["env"]} == {
        "JAX_PLATFORMS": "proxy,cpu",
        "JAX_BACKEND_TARGET": "grpc://127.0.0.1:38681",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_ENGINE_READY_TIMEOUT_S": "1800",  # vLLM waits for its engine as long as the task does
    }
    assert "--server_port=38681" in leader["pathways-proxy"]["args"]
    command = vllm["command"]
    assert command[:3] == ["vllm", "serve", "Qwen/Qwen3-30B-A3B"]
    assert (flag(command, "--port"), flag(command, "--tensor-parallel-size")) == ("8000", str(shape.chips))
    assert json.loads(flag(command, "--hf-overrides")) == {"architectures": ["MaxTextForCausalLM"]}
    assert json.loads(flag(command, "--additional-config")) == {
        "maxtext_config": {"model_name": "qwen3-30b-a3b", "load_parameters_path": CHECKPOINT}
    }
    assert command[-2:] == ["--max-model-len", "4096"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert vllm[probe]["httpGet"] == {"path": "/health", "port": 8000, "scheme": "HTTP"}
    assert vllm["startupProbe"]["failureThreshold"] == 180
    worker = containers(template["workerTemplate"])["worker"]
    assert worker["resources"]["limits"] == {"google.com/tpu": str(shape.chips_per_vm)}


def test_tensor_parallelism_spans_every_jax_device_and_a_users_split_is_kept():
    def command_of(machine_type: str, topology: str, args: list[str]) -> list[str]:
        template = lws_of(machine_type, topology, server_args=args)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        return containers(template)["vllm"]["command"]

    assert flag(command_of("tpu7x-standard-4t", "2x2x2", []), "--tensor-parallel-size") == "16"  # 8 chips, 2 cores each
    assert flag(command_of("ct5p-hightpu-4t", "2x2x2", []), "--tensor-parallel-size") == "8"  # megacore: 1 per chip
    split = command_of("ct6e-standard-4t", "4x4", ["--data_parallel_size", "2"])
    assert "--tensor-parallel-size" not in split and split[-2:] == ["--data_parallel_size", "2"]


def test_without_a_checkpoint_vllm_serves_the_hugging_face_weights_and_the_user_may_set_parallelism():
    command = containers(lws_of("ct6e-standard-4t", "4x4", checkpoint=None, model_name=None, server_args=["-tp", "8"])[
        "spec"
    ]["leaderWorkerTemplate"]["leaderTemplate"])["vllm"]["command"]
    assert "--hf-overrides" not in command and "--additional-config" not in command
    assert "--tensor-parallel-size" not in command and command[-2:] == ["-tp", "8"]


def test_on_one_vm_without_pathways_one_pod_serves_and_holds_the_chips(schema_validator):
    manifest = lws_of("ct6e-standard-4t", "2x2", pathways=False, pathways_dir=None)
    assert schema_validator.errors(manifest) == []
    template = manifest["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 1 and "leaderTemplate" not in template
    pod = template["workerTemplate"]
    assert pod["metadata"]["labels"] == LABELS
    (vllm,) = pod["spec"]["containers"]
    assert vllm["resources"] == {"limits": {"google.com/tpu": "4"}}
    assert vllm["env"] == [{"name": "VLLM_ENGINE_READY_TIMEOUT_S", "value": "1800"}], "no Pathways proxy to point JAX at"
    assert flag(vllm["command"], "--tensor-parallel-size") == "4"
    assert pod["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "2x2"


def test_the_users_json_settings_are_merged_with_maxtexts_plugin_and_never_override_it():
    sharding = {"sharding": {"sharding_strategy": {"enable_dp_attention": True}}}
    command = containers(
        lws_of("ct6e-standard-4t", "4x4", server_args=["--additional-config", json.dumps(sharding), "--hf_overrides={}"])[
            "spec"
        ]["leaderWorkerTemplate"]["leaderTemplate"]
    )["vllm"]["command"]
    assert json.loads(flag(command, "--additional-config")) == {
        **sharding,
        "maxtext_config": {"model_name": "qwen3-30b-a3b", "load_parameters_path": CHECKPOINT},
    }
    assert json.loads(flag(command, "--hf-overrides")) == {"architectures": ["MaxTextForCausalLM"]}
    assert command.count("--additional-config") == 1 and "--hf_overrides={}" not in command
    alone = containers(
        lws_of("ct6e-standard-4t", "4x4", checkpoint=None, model_name=None, server_args=["--additional-config", json.dumps(sharding)])[
            "spec"
        ]["leaderWorkerTemplate"]["leaderTemplate"]
    )["vllm"]["command"]
    assert json.loads(flag(alone, "--additional-config")) == sharding and "--hf-overrides" not in alone
    with pytest.raises(InvalidWorkloadSpec) as error:
        lws_of(
            "ct6e-standard-4t",
            "4x4",
            server_args=['--hf_overrides={"architectures": ["LlamaForCausalLM"]}', "--served_model_name", "x", "--additional-config", "[1]"],
        )
    message = str(error.value)
    assert "--hf-overrides architectures is set from checkpoint and model_name" in message
    assert "server_args='--served_model_name': is set by the operator" in message
    assert "server_args='[1]': --additional-config takes a JSON object" in message


def test_the_service_exposes_vllms_one_port():
    service = render_service(engine=VLLM, name="x-svc", namespace="serving", lws_name="x")
    assert service["spec"]["ports"] == [{"name": "http", "protocol": "TCP", "port": 8000, "targetPort": 8000}]


def test_every_vllm_problem_is_reported_at_once_and_names_the_engine():
    with pytest.raises(InvalidWorkloadSpec) as error:
        build_server(
            engine=VLLM,
            checkpoint=CHECKPOINT,
            model_name=None,
            hf_model=None,
            tpu="v6e",
            topology="4x4",
            pathways=False,
            http_image="jetstream-http:v1",
            config="MaxText/configs/base.yml",
            server_args=["--port=9000", "--max-model-len", 4096],
            env={"JAX_PLATFORMS": "tpu"},
            pathways_dir="gs://my-bucket/p",
        )
    message = str(error.value)
    assert set(error.value.fields) == {"hf_model", "image", "model_name", "pathways", "http_image", "config", "server_args"}
    assert "engine='vllm' serves a Hugging Face model" in message
    assert "the slice must be one TPU VM; 4x4 of ct6e-standard-4t is 4 VMs" in message
    assert "server_args='--port=9000': is set by the operator" in message
    assert "server_args=4096: every item must be a string" in message
    with pytest.raises(InvalidWorkloadSpec, match=r"image=None: engine='vllm' serves a MaxText checkpoint only from an image with MaxText's vLLM adapter \(maxtext\[tpu-post-train\]\)"):
        build_server(**{**SERVER, "image": None}, tpu="v6e", topology="4x4")
    assert build_server(**{**SERVER, "image": None, "checkpoint": None}, tpu="v6e", topology="4x4").image == "vllm/vllm-tpu:latest"
    # what a template renders for an engine's default ("{{ ... else None }}") is the engine's default
    jetstream = {**SERVER, "engine": ENGINES["jetstream"], "hf_model": "None", "image": "None"}
    assert build_server(**jetstream, tpu="v6e", topology="4x4").image == ENGINES["jetstream"].default_image
    assert build_benchmark(**{**BENCHMARK, "engine": ENGINES["jetstream"], "dataset": "None"}, image="None", server_image="None").image == (
        ENGINES["jetstream"].default_image
    )
    with pytest.raises(InvalidWorkloadSpec, match="env='JAX_PLATFORMS': is set for engine='vllm'"):
        build_server(**SERVER, tpu="v6e", topology="4x4", env={"JAX_PLATFORMS": "tpu"})
    with pytest.raises(InvalidWorkloadSpec, match="pathways=False: engine='jetstream' serves only on Pathways"):
        build_server(**{**SERVER, "engine": ENGINES["jetstream"], "hf_model": None}, tpu="v6e", topology="2x2", pathways=False)


# --- the benchmark -------------------------------------------------------------------------------

BENCHMARK = dict(
    engine=VLLM, model_name="Qwen/Qwen3-30B-A3B", dataset="random", num_prompts=200, request_rate=8, max_output_length=128
)


def test_the_benchmark_job_runs_vllm_bench_serve_once_and_uploads_its_result():
    run = build_benchmark(**BENCHMARK, max_concurrency=16, tokenizer="Qwen/Qwen3-30B-A3B")
    job = render_benchmark_job(
        run, name="bench-x-bench", namespace="serving", service="bench-x-svc", result_uri="gs://my-bucket/r/run.json"
    )
    assert job["spec"]["backoffLimit"] == 0
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "vllm/vllm-tpu:latest"
    tokens = command_tokens([*container["command"], *container["args"]])
    assert tokens[:5] == ["bash", "-c", "vllm", "bench", "serve"]
    params = parse_params(tokens, switches=["save-result"])
    assert {
        k: params.text(k)
        for k in ("backend", "base_url", "endpoint", "model", "dataset_name", "num_prompts", "request_rate",
                  "max_concurrency", "output_len", "percentile_metrics", "result_dir", "result_filename", "save_result")
    } == {
        "backend": "vllm",
        "base_url": "http://bench-x-svc:8000",
        "endpoint": "/v1/completions",
        "model": "Qwen/Qwen3-30B-A3B",
        "dataset_name": "random",
        "num_prompts": "200",
        "request_rate": "8.0",
        "max_concurrency": "16",
        "output_len": "128",
        "percentile_metrics": "ttft,tpot,itl,e2el",
        "result_dir": RESULT_DIR,
        "result_filename": RESULT_FILE,
        "save_result": "true",
    }
    upload = tokens[tokens.index("&&") + 1 :]
    assert upload[:2] == ["python3", "-c"] and upload[3:] == [f"{RESULT_DIR}/{RESULT_FILE}", "gs://my-bucket/r/run.json"]


def test_benchmark_flags_the_operator_sets_are_refused_in_any_spelling_and_random_takes_no_file():
    with pytest.raises(InvalidWorkloadSpec) as error:
        build_benchmark(**BENCHMARK, extra_args=["--metric_percentiles", "50"], dataset_path="/data/sharegpt.json")
    message = str(error.value)
    assert "benchmark_args='--metric_percentiles': is set by the operator's own parameters" in message
    assert "dataset_path='/data/sharegpt.json': dataset='random' generates its prompts and takes no file" in message
    assert build_benchmark(**BENCHMARK, max_concurrency="None").max_concurrency is None  # a template's None


def test_benchmark_settings_of_the_other_engine_are_refused():
    with pytest.raises(InvalidWorkloadSpec) as error:
        build_benchmark(**{**BENCHMARK, "dataset": "test"}, extra_args=["--result-dir", "/x"], max_concurrency=0)
    message = str(error.value)
    assert "dataset='test': not a dataset of the benchmark of engine='vllm'; valid: random, sharegpt" in message
    assert "benchmark_args='--result-dir': is set by the operator's own parameters" in message
    assert "max_concurrency=0: must be a positive integer" in message
    with pytest.raises(InvalidWorkloadSpec, match="max_concurrency=4: the benchmark of engine='jetstream' has no such limit"):
        build_benchmark(**{**BENCHMARK, "engine": ENGINES["jetstream"], "dataset": "test"}, max_concurrency=4)


def test_hostile_values_reach_vllm_and_the_upload_as_single_words(tmp_path: Path):
    results_uri = "gs://my-bucket/r/x'; touch CANARY; echo '.json"
    run = build_benchmark(
        **{**BENCHMARK, "dataset": "sharegpt"},
        dataset_path="/data/$(touch CANARY)/x'y\".json",
        tokenizer="`touch CANARY`",
        extra_args=["--seed", "1; touch CANARY"],
    )
    script = benchmark_script(run, server="bench-x-svc", result_uri=results_uri)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for program in ("vllm", "python3"):
        stub = stubs / program
        stub.write_text(f"#!/bin/bash\nprintf '%s\\0' \"$@\" > {tmp_path}/{program}.argv\n")
        stub.chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, check=True, timeout=30)

    def argv(program: str) -> list[str]:
        return (tmp_path / f"{program}.argv").read_text().split("\0")[:-1]

    assert argv("vllm") == run.arguments("bench-x-svc")[1:]
    assert argv("python3")[2:] == [f"{RESULT_DIR}/{RESULT_FILE}", results_uri]
    assert not list(tmp_path.rglob("CANARY"))


# --- the result ----------------------------------------------------------------------------------


def vllm_result(**overrides: Any) -> dict[str, Any]:
    """A result as ``vllm bench serve --save-result --percentile-metrics ttft,tpot,itl,e2el`` saves it."""
    result: dict[str, Any] = {
        "date": "20261122-000000",
        "endpoint_type": "vllm",
        "label": None,
        "model_id": "Qwen/Qwen3-30B-A3B",
        "tokenizer_id": "Qwen/Qwen3-30B-A3B",
        "num_prompts": 200,
        "request_rate": 8.0,
        "burstiness": 1.0,
        "max_concurrency": 16,
        "duration": 31.2,
        "completed": 200,
        "failed": 0,
        "total_input_tokens": 204800,
        "total_output_tokens": 25600,
        "request_throughput": 6.41,
        "request_goodput": None,
        "output_throughput": 820.5,
        "total_token_throughput": 7384.6,
        "input_lens": [1024] * 2,
        "output_lens": [128] * 2,
        "ttfts": [0.2, 0.21],
        "itls": [[0.01], [0.01]],
        "errors": ["", ""],
        "max_output_tokens_per_s": 960.0,
        "max_concurrent_requests": 16,
    }
    for metric in ("ttft", "tpot", "itl", "e2el"):
        result |= {f"mean_{metric}_ms": 12.5, f"median_{metric}_ms": 11.0, f"std_{metric}_ms": 2.0, f"p99_{metric}_ms": 30.0}
    return result | overrides


def test_the_flat_result_is_read_with_every_key_and_goodput_only_when_measured():
    metrics = result_metrics(json.dumps(vllm_result()).encode(), VLLM, "gs://b/r.json")
    assert list(metrics) == [*METRIC_KEYS, "total_input_tokens", "total_output_tokens", "max_output_tokens_per_s"]
    assert metrics["p99_itl_ms"] == 30.0 and metrics["failed"] == 0
    assert result_metrics(json.dumps(vllm_result(request_goodput=5.5)).encode(), VLLM, "s")["request_goodput"] == 5.5


def test_a_run_whose_requests_failed_is_no_measurement():
    result = vllm_result(completed=190, failed=10, errors=["", "HTTP 500: The model ran out of KV cache"])
    with pytest.raises(ValueError) as error:
        result_metrics(json.dumps(result).encode(), VLLM, "gs://b/r.json")
    assert str(error.value) == (
        "10 of 200 benchmark requests failed, so the run measured a different load; the first error: "
        "HTTP 500: The model ran out of KV cache (result kept at gs://b/r.json)"
    )


def test_a_missing_or_wrong_result_says_what_is_wrong():
    with pytest.raises(ValueError, match=f"gs://b/r.json does not exist: did it save its result \\({RESULT_DIR}/{RESULT_FILE}\\)"):
        result_metrics(None, VLLM, "gs://b/r.json")
    without = {k: v for k, v in vllm_result().items() if k != "p99_e2el_ms"}
    with pytest.raises(ValueError, match="missing metrics p99_e2el_ms"):
        result_metrics(json.dumps(without).encode(), VLLM, "gs://b/r.json")
    with pytest.raises(ValueError, match="metric completed='200' is not a number"):
        result_metrics(json.dumps(vllm_result(completed="200")).encode(), VLLM, "gs://b/r.json")


# --- the operator's dry run ----------------------------------------------------------------------


def test_the_operator_deploys_vllm_by_default_and_renders_valid_objects(schema_validator):
    operator = InferenceBenchmarkOperator(
        task_id="bench",
        checkpoint={"uri": "gs://my-bucket/serving/run/checkpoints/0"},
        model_name="qwen3-30b-a3b",
        hf_model="Qwen/Qwen3-30B-A3B",
        image="us-docker.pkg.dev/my-project/maxtext/maxtext-vllm:2026.11",
        tpu="v6e",
        topology="4x4",
        pathways_dir="gs://my-bucket/pathways",
        dataset="random",
        num_prompts=100,
        request_rate="inf",
        max_output_length=64,
        max_concurrency=8,
        results_uri="gs://my-bucket/results/",
    )
    lws, service, job = operator.render_manifests()
    assert schema_validator.errors(lws) == []
    assert [c["name"] for c in lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]][-1] == "vllm"
    assert service["spec"]["ports"][0]["port"] == 8000
    container = job["spec"]["template"]["spec"]["containers"][0]
    tokens = command_tokens([*container["command"], *container["args"]])
    assert parse_params(tokens).text("model") == "Qwen/Qwen3-30B-A3B"


def test_jetstream_only_parameters_are_refused_when_the_dag_is_parsed():
    with pytest.raises(InvalidWorkloadSpec) as error:
        InferenceBenchmarkOperator(
            task_id="bench",
            hf_model="Qwen/Qwen3-30B-A3B",
            http_image="jetstream-http:v0.2.3",
            tpu="v6e",
            topology="4x4",
            pathways_dir="gs://my-bucket/pathways",
            dataset="test",
            num_prompts=1,
            request_rate=1,
            max_output_length=1,
            results_uri="gs://my-bucket/results/",
        )
    assert set(error.value.fields) == {"http_image", "dataset"}


def test_a_rendered_pathways_flag_and_a_users_engine_timeout_are_read_as_written():
    one_pod = lws_of("ct6e-standard-4t", "2x2", pathways="False", pathways_dir="None")["spec"]["leaderWorkerTemplate"]
    assert one_pod["size"] == 1 and "leaderTemplate" not in one_pod  # "False" from a template is False
    with pytest.raises(InvalidWorkloadSpec, match="pathways='maybe': must be True or False"):
        lws_of("ct6e-standard-4t", "2x2", pathways="maybe")
    template = lws_of("ct6e-standard-4t", "4x4", env={"VLLM_ENGINE_READY_TIMEOUT_S": "7200"})["spec"]["leaderWorkerTemplate"]
    env = containers(template["leaderTemplate"])["vllm"]["env"]
    assert [e["value"] for e in env if e["name"] == "VLLM_ENGINE_READY_TIMEOUT_S"] == ["7200"]


def test_a_serving_dag_whose_checkpoint_comes_from_an_xcom_hears_every_problem_at_parse_time():
    """A DAG written before vLLM became the default engine: its checkpoint is the conversion's XCom.
    That there will be a (MaxText) checkpoint is known when the DAG is parsed, so the image it
    needs is said then too, beside hf_model, not in a second round at run time."""
    with pytest.raises(InvalidWorkloadSpec) as error:
        InferenceBenchmarkOperator(
            task_id="bench", checkpoint="{{ ti.xcom_pull(task_ids='convert') }}", model_name="llama2-7b", tpu="v6e",
            topology="{{ params.topology }}", pathways_dir="gs://my-bucket/pathways", num_prompts=1, request_rate=1,
            max_output_length=1, results_uri="gs://my-bucket/results/",
        )
    assert set(error.value.fields) == {"hf_model", "image"}  # nothing about the templates: the run renders them
    assert "MaxText's vLLM adapter" in str(error.value)

"""vLLM on TPU (tpu-inference) as a serving engine: its container, health check, benchmark and result. Pure.

The server is ``vllm serve <hf_model>`` on port 8000, answering ``GET /health`` (200 once the
engine is up; before that nothing listens) and the OpenAI API (``/v1/completions``,
``/v1/models``). Sources:

* On Pathways, tpu-inference drives the slice through the proxy when ``JAX_PLATFORMS`` contains
  ``proxy`` (``tpu_inference/__init__.py`` then calls ``pathwaysutils.initialize()``); its
  Pathways guide sets ``JAX_PLATFORMS=proxy,cpu``, ``JAX_BACKEND_TARGET=grpc://127.0.0.1:<proxy
  port>`` and ``VLLM_ENABLE_V1_MULTIPROCESSING=0``. The proxy is the leader pod's own
  ``pathways-proxy`` (:data:`pathways_airflow.spec.serving.PROXY_PORT`).
* A MaxText checkpoint is served through MaxText's vLLM model plugin (maxtext
  ``docs/tutorials/inference.md``): ``--hf-overrides '{"architectures": ["MaxTextForCausalLM"]}'``
  and ``--additional-config '{"maxtext_config": {"model_name": ..., "load_parameters_path": ...}}'``,
  with the Hugging Face model id naming the architecture's tokenizer. Without a checkpoint,
  ``hf_model``'s own weights are served.
* The benchmark is ``vllm bench serve`` (flags from ``vllm/benchmarks/serve.py``'s
  ``add_cli_args`` and ``vllm/benchmarks/datasets.py``'s ``--dataset-name`` choices). With
  ``--save-result --result-dir D --result-filename F`` it writes one flat JSON object:
  ``duration``, ``completed``, ``failed``, ``request_throughput``, ``output_throughput``,
  ``total_token_throughput``, ``errors``, … and ``{mean,median,std,p99}_{m}_ms`` for each metric
  ``m`` of ``--percentile-metrics``. The vLLM TPU image has no ``gsutil``; the file is uploaded
  with google-cloud-storage, which the image installs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pathways_airflow.spec.benchmark import flag_name, has_control_characters, numeric_metrics, quoted, upload_command
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.errors import SpecProblem
from pathways_airflow.spec.serving import PROXY_PORT, health_probes, model_id_problem

if TYPE_CHECKING:
    from pathways_airflow.spec.benchmark import BenchmarkRun
    from pathways_airflow.spec.serving import InferenceServer

NAME = "vllm"
HTTP_PORT = 8000
HEALTH_PATH = "/health"
SERVER_CONTAINER = "vllm"
DEFAULT_IMAGE = "vllm/vllm-tpu:latest"
"""vLLM's TPU image, as tpu-inference's guides run it (pin a release tag for comparable nightly runs).
It serves Hugging Face weights; a MaxText checkpoint needs MaxText's vLLM adapter installed too
(``maxtext[tpu-post-train]``, maxtext ``docs/tutorials/inference.md``), so it must name its image."""
MAXTEXT_ARCHITECTURE = "MaxTextForCausalLM"

PATHWAYS_ENV = (
    ("JAX_PLATFORMS", "proxy,cpu"),
    ("JAX_BACKEND_TARGET", f"grpc://127.0.0.1:{PROXY_PORT}"),
    ("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
)
"""What tpu-inference needs to run through the Pathways proxy instead of local TPUs."""
READY_TIMEOUT_ENV = "VLLM_ENGINE_READY_TIMEOUT_S"
"""How long the API server waits for its engine to load (vLLM's default: 600 s); given the
operator's ``startup_timeout``, so that vLLM never gives up on a restore the task still waits for."""
OWNED_SERVER_FLAGS = ("--host", "--port", "--served-model-name")
"""Set by the operator: where the server listens, and the name the benchmark asks for (``hf_model``)."""
MERGED_SERVER_FLAGS = ("--hf-overrides", "--additional-config")
"""JSON objects the user may give; serving a checkpoint adds MaxText's plugin to them."""
PLUGIN_KEYS = {"--hf-overrides": "architectures", "--additional-config": "maxtext_config"}
PARALLELISM_FLAGS = ("--tensor-parallel-size", "-tp", "--data-parallel-size", "-dp")
"""With any of them the user has split the devices; the operator's default would not add up."""

DATASETS = ("random", "sharegpt", "sonnet", "burstgpt", "hf", "custom", "prefix_repetition")
"""``vllm bench serve --dataset-name`` choices for text generation (``vllm/benchmarks/datasets.py``)."""
DATASETS_WITHOUT_PATH = ("random", "prefix_repetition")
"""Generated prompts; every other dataset is a file or a Hugging Face dataset id (``--dataset-path``)."""
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
RESULT_DIR = "/tmp/pathways-airflow-benchmark"
RESULT_FILE = "result.json"
OWNED_BENCHMARK_FLAGS = frozenset(
    {
        "--metric-percentiles",
        "--served-model-name",
        "--backend",
        "--base-url",
        "--host",
        "--port",
        "--endpoint",
        "--model",
        "--dataset-name",
        "--num-prompts",
        "--request-rate",
        "--max-concurrency",
        "--output-len",
        "--percentile-metrics",
        "--save-result",
        "--result-dir",
        "--result-filename",
    }
)

METRIC_KEYS = (
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    *(f"{stat}_{metric}_ms" for metric in PERCENTILE_METRICS for stat in ("mean", "median", "p99")),
    "completed",
    "failed",
    "duration",
)
"""What the operator returns from the result JSON; each must be there."""
OPTIONAL_METRIC_KEYS = ("total_input_tokens", "total_output_tokens", "max_output_tokens_per_s", "request_goodput")


def check_server(problems: list[SpecProblem], given: Mapping[str, Any]) -> None:
    """vLLM serves ``hf_model``; a MaxText checkpoint also needs the model's MaxText name."""
    model_id_problem(
        problems,
        "hf_model",
        given["hf_model"],
        "engine='vllm' serves a Hugging Face model: give its id or path, one word, e.g. 'meta-llama/Llama-2-70b-hf'",
    )
    if given["checkpoint"] is not None:
        _maxtext_checkpoint_problems(problems, given)
    for name, why in (
        ("http_image", "is JetStream's HTTP front end; engine='vllm' serves HTTP itself"),
        ("config", "is JetStream's MaxText config; engine='vllm' takes its settings from server_args"),
    ):
        if given[name] is not None:
            problems.append(SpecProblem(name, given[name], why))
    if given["pathways"] is True:
        env = given["env"]
        names = set(env) if isinstance(env, Mapping) else {e.get("name") for e in env or () if isinstance(e, Mapping)}
        for reserved, _ in PATHWAYS_ENV:
            if reserved in names:
                problems.append(SpecProblem("env", reserved, "is set for engine='vllm' to run through the Pathways proxy"))


def _maxtext_checkpoint_problems(problems: list[SpecProblem], given: Mapping[str, Any]) -> None:
    """Serving a MaxText checkpoint needs an image with MaxText's adapter, the model's MaxText name,
    and leaves the plugin's keys to the operator."""
    if given["image"] is None:
        problems.append(
            SpecProblem(
                "image",
                None,
                "engine='vllm' serves a MaxText checkpoint only from an image with MaxText's vLLM adapter "
                f"(maxtext[tpu-post-train]); {DEFAULT_IMAGE} has none: set image",
            )
        )
    _plugin_clashes(problems, given["server_args"])
    if given["model_name"] is None:
        problems.append(
            SpecProblem("model_name", None, "engine='vllm' serves a MaxText checkpoint by its MaxText model name, e.g. 'llama2-70b'")
        )


def split_json_flags(args: tuple[str, ...] | list[str]) -> tuple[list[str], dict[str, str]]:
    """``args`` without :data:`MERGED_SERVER_FLAGS`, and those flags' raw values (``--f=V`` or ``--f V``)."""
    rest: list[str] = []
    found: dict[str, str] = {}
    words = iter(args)
    for word in words:
        name = flag_name(word)
        if name in MERGED_SERVER_FLAGS:
            found[name] = word.split("=", 1)[1] if "=" in word else next(words, "")
        else:
            rest.append(word)
    return rest, found


def json_object(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def server_args(problems: list[SpecProblem], value: Any) -> tuple[str, ...]:
    """More ``vllm serve`` flags and their values, one list item each (``['--max-model-len', '4096']``)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        problems.append(
            SpecProblem("server_args", value, "must be a list of vllm serve arguments for engine='vllm', e.g. ['--max-model-len', '4096']")
        )
        return ()
    args: list[str] = []
    for item in value:
        if not isinstance(item, str) or has_control_characters(item):
            problems.append(SpecProblem("server_args", item, "every item must be a string without control characters"))
        elif flag_name(item) in OWNED_SERVER_FLAGS:
            problems.append(
                SpecProblem("server_args", item, "is set by the operator (where it listens, and hf_model as the served name)", OWNED_SERVER_FLAGS)
            )
        else:
            args.append(item)
    for name, raw in split_json_flags(args)[1].items():
        if json_object(raw) is None:
            problems.append(SpecProblem("server_args", raw, f"{name} takes a JSON object"))
    return tuple(args)


def _plugin_clashes(problems: list[SpecProblem], server_args: Any) -> None:
    """With a checkpoint the operator sets MaxText's plugin keys; a user's copy would override them."""
    if not isinstance(server_args, (list, tuple)) or not all(isinstance(a, str) for a in server_args):
        return
    for name, raw in split_json_flags(list(server_args))[1].items():
        given = json_object(raw) or {}
        if PLUGIN_KEYS[name] in given:
            problems.append(
                SpecProblem("server_args", raw, f"{name} {PLUGIN_KEYS[name]} is set from checkpoint and model_name (engine='vllm')")
            )


def serving_containers(server: InferenceServer) -> list[dict[str, Any]]:
    """``vllm``: ``vllm serve`` on port 8000, through the Pathways proxy when on Pathways.

    Tensor parallelism spans the slice's JAX devices (chips, or both TensorCores of a TPU7x chip)
    unless ``server_args`` splits them itself.
    """
    assert server.hf_model is not None
    command = ["vllm", "serve", server.hf_model, "--host", "0.0.0.0", "--port", str(HTTP_PORT)]
    rest, raw = split_json_flags(server.server_args)
    if not any(flag_name(arg) in PARALLELISM_FLAGS for arg in rest):
        command += ["--tensor-parallel-size", str(server.shape.chips * server.shape.machine_type.devices_per_chip)]
    merged = {name: json_object(value) or {} for name, value in raw.items()}
    if server.load_parameters_path:
        maxtext = {"model_name": server.model_name, "load_parameters_path": server.load_parameters_path}
        merged["--hf-overrides"] = {**merged.get("--hf-overrides", {}), "architectures": [MAXTEXT_ARCHITECTURE]}
        merged["--additional-config"] = {**merged.get("--additional-config", {}), "maxtext_config": maxtext}
    for name in MERGED_SERVER_FLAGS:
        if name in merged:
            command += [name, json.dumps(merged[name])]
    own_env = [{"name": name, "value": value} for name, value in PATHWAYS_ENV] if server.on_pathways else []
    if READY_TIMEOUT_ENV not in {e.get("name") for e in server.env}:
        own_env.append({"name": READY_TIMEOUT_ENV, "value": str(server.startup_seconds)})
    container: dict[str, Any] = {
        "name": SERVER_CONTAINER,
        "image": server.image,
        "imagePullPolicy": server.image_pull_policy,
        "command": [*command, *rest],
        "ports": [{"containerPort": HTTP_PORT, "name": "http"}],
        **health_probes(server),
    }
    env = [*own_env, *(dict(e) for e in server.env)]
    if env:
        container["env"] = env
    return [container]


def benchmark_argv(run: BenchmarkRun, server: str) -> list[str]:
    """``vllm bench serve`` against ``server``'s OpenAI completions API; the result goes to
    :data:`RESULT_DIR`/:data:`RESULT_FILE`."""
    argv = [
        run.script,
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        f"http://{server}:{HTTP_PORT}",
        "--endpoint",
        "/v1/completions",
        "--model",
        run.model_name,
        "--dataset-name",
        run.dataset,
    ]
    if run.dataset_path:
        argv += ["--dataset-path", run.dataset_path]
    if run.tokenizer:
        argv += ["--tokenizer", run.tokenizer]
    argv += ["--num-prompts", str(run.num_prompts), "--request-rate", run.rate_word]
    if run.max_concurrency is not None:
        argv += ["--max-concurrency", str(run.max_concurrency)]
    return [
        *argv,
        "--output-len",
        str(run.max_output_length),
        "--percentile-metrics",
        ",".join(PERCENTILE_METRICS),
        *run.extra_args,
        "--save-result",
        "--result-dir",
        RESULT_DIR,
        "--result-filename",
        RESULT_FILE,
    ]


def read_metrics(result: Any, source: str) -> dict[str, Any]:
    """The flat result object; ``failed`` is passed on for the caller to judge the run by."""
    if not isinstance(result, Mapping):
        raise ValueError(f"{source}: expected the JSON object vllm bench serve saves; got {type(result).__name__}")
    present = {k: v for k, v in result.items() if not (k in OPTIONAL_METRIC_KEYS and v is None)}
    return numeric_metrics(present, METRIC_KEYS, OPTIONAL_METRIC_KEYS, source)


ENGINE = Engine(
    name=NAME,
    container=SERVER_CONTAINER,
    http_port=HTTP_PORT,
    health_path=HEALTH_PATH,
    # nothing listens until the engine is loaded: the service proxy answers 502/503 meanwhile
    not_yet_serving=frozenset({0, 500, 502, 503, 504}),
    benchmark_port=HTTP_PORT,
    default_image=DEFAULT_IMAGE,
    runs_without_pathways=True,
    check_server=check_server,
    server_args=server_args,
    serving_containers=serving_containers,
    service_ports=({"name": "http", "protocol": "TCP", "port": HTTP_PORT, "targetPort": HTTP_PORT},),
    datasets=DATASETS,
    datasets_without_path=DATASETS_WITHOUT_PATH,
    datasets_refusing_path=("random",),
    default_benchmark_entry_point="vllm",
    benchmark_model="hf_model",
    owned_benchmark_flags=OWNED_BENCHMARK_FLAGS,
    benchmark_argv=benchmark_argv,
    saved_result=f"{RESULT_DIR}/{RESULT_FILE}",
    upload_result=lambda uri: quoted(upload_command(f"{RESULT_DIR}/{RESULT_FILE}", uri)),
    read_metrics=read_metrics,
    supports_max_concurrency=True,
)

__all__ = ["ENGINE", "HTTP_PORT"]

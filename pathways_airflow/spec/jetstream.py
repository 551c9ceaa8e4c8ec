"""JetStream on Pathways as a serving engine: its containers, health check, benchmark and result. Pure.

The server pod's engine containers are those of Google's multi-host JetStream-on-Pathways
manifests: ``jax-tpu`` (MaxEngine, gRPC 9000, a MaxText config file then ``key=value`` settings)
and ``jetstream-http`` (8000, ``GET /healthcheck`` answers 500 until the model is loaded). The
benchmark is JetStream's ``benchmarks/benchmark_serving.py`` (flags as its ``argparse`` parser
defines them) against the gRPC port, with ``--save-result``; its JSON is
``{"metrics": {...}, "dimensions": {...}}``. JetStream is archived (read-only since 2026-02-01);
it stays for the images and DAGs that still run it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pathways_airflow.spec.benchmark import numeric_metrics
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.errors import SpecProblem
from pathways_airflow.spec.serving import health_probes
from pathways_airflow.spec.workload import IMAGE_REFERENCE

if TYPE_CHECKING:
    from pathways_airflow.spec.benchmark import BenchmarkRun
    from pathways_airflow.spec.serving import InferenceServer

NAME = "jetstream"
GRPC_PORT = 9000
"""JetStream's gRPC port: what ``benchmark_serving.py`` talks to."""
HTTP_PORT = 8000
"""``jetstream-http``: ``/healthcheck`` (500 until the model is loaded) and ``/generate``."""
HEALTH_PATH = "/healthcheck"
SERVER_CONTAINER = "jax-tpu"
HTTP_CONTAINER = "jetstream-http"

DEFAULT_SERVER_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/inference/jetstream-pathways:v0.2.0"
DEFAULT_HTTP_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/inference/jetstream-http:v0.2.3"
DEFAULT_CONFIG = "MaxText/configs/base.yml"
"""The config path in JetStream's MaxText images (archived with JetStream: they keep the legacy layout)."""
RESERVED_SERVER_ARGS = ("load_parameters_path", "model_name")
"""MaxText settings the operator sets itself from ``checkpoint`` and ``model_name``."""

DEFAULT_BENCHMARK_SCRIPT = "JetStream/benchmarks/benchmark_serving.py"
"""Where JetStream's benchmark sits in the JetStream/MaxText images (``./JetStream`` in their workdir)."""
DATASETS = ("test", "sharegpt", "openorca", "mmlu", "math500", "longcontext", "prefix_cache_test")
"""``benchmark_serving.py --dataset`` choices (JetStream ``benchmarks/benchmark_serving.py``)."""
DATASETS_WITHOUT_PATH = ("test",)
"""``test`` generates mock requests; every other dataset is read from ``--dataset-path``."""
OWNED_FLAGS = frozenset(
    {
        "--server",
        "--port",
        "--save-result",
        "--num-prompts",
        "--request-rate",
        "--max-output-length",
        "--dataset",
        "--model",
    }
)

METRIC_KEYS = (
    "request_throughput",
    "input_throughput",
    "output_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_ttst_ms",
    "median_ttst_ms",
    "p99_ttst_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "completed",
    "duration",
)
"""What the operator returns from the result JSON's ``metrics``; each must be there."""
OPTIONAL_METRIC_KEYS = ("total_input_tokens", "total_output_tokens")
METRIC_ALIASES = {"request_inthroughput": "request_throughput"}
"""Older ``benchmark_serving.py`` releases misspelled ``request_throughput``."""

_MAXTEXT_ARG = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.*)\Z", re.DOTALL)


def check_server(problems: list[SpecProblem], given: Mapping[str, Any]) -> None:
    """JetStream restores a MaxText checkpoint: it needs one, and the model's MaxText name."""
    if given["checkpoint"] is None and not any(p.field == "checkpoint" for p in problems):
        problems.append(
            SpecProblem("checkpoint", None, "engine='jetstream' serves a MaxText checkpoint: none given (did the upstream conversion return nothing?)")
        )
    if given["model_name"] is None:
        problems.append(SpecProblem("model_name", None, "engine='jetstream' needs the checkpoint's MaxText model name, e.g. 'llama2-70b'"))
    if given["hf_model"] is not None:
        problems.append(SpecProblem("hf_model", given["hf_model"], "only engine='vllm' serves a Hugging Face model (this is engine='jetstream')"))
    http_image = given["http_image"]
    if http_image is not None and (not isinstance(http_image, str) or not IMAGE_REFERENCE.match(http_image)):
        problems.append(SpecProblem("http_image", http_image, "must be a non-empty container image reference"))
    config = given["config"]
    if config is not None and (
        not isinstance(config, str) or not config.strip() or "=" in config or any(c.isspace() for c in config)
    ):
        problems.append(
            SpecProblem("config", config, "must be a MaxText config file path such as 'MaxText/configs/base.yml'")
        )


def server_args(problems: list[SpecProblem], value: Any) -> tuple[str, ...]:
    """MaxText ``key=value`` settings after the config file; never the two the operator owns."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        problems.append(
            SpecProblem(
                "server_args",
                value,
                "must be a list of MaxText key=value strings, e.g. ['per_device_batch_size=10']",
            )
        )
        return ()
    args: list[str] = []
    for item in value:
        match = _MAXTEXT_ARG.match(item) if isinstance(item, str) and "\x00" not in item else None
        if match is None:
            problems.append(SpecProblem("server_args", item, "every item must be a MaxText key=value setting (engine='jetstream')"))
        elif match.group(1) in RESERVED_SERVER_ARGS:
            problems.append(
                SpecProblem(
                    "server_args",
                    item,
                    f"{match.group(1)} is set from the operator's "
                    f"{'checkpoint' if match.group(1) == 'load_parameters_path' else 'model_name'} parameter",
                    RESERVED_SERVER_ARGS,
                )
            )
        else:
            args.append(item)
    return tuple(args)


def serving_containers(server: InferenceServer) -> list[dict[str, Any]]:
    """``jax-tpu`` (JetStream with MaxText on Pathways) and its HTTP front end."""
    container: dict[str, Any] = {
        "name": SERVER_CONTAINER,
        "image": server.image,
        "imagePullPolicy": server.image_pull_policy,
        "args": [
            server.config or DEFAULT_CONFIG,
            f"model_name={server.model_name}",
            f"load_parameters_path={server.load_parameters_path}",
            *server.server_args,
        ],
        "ports": [{"containerPort": GRPC_PORT}],
        **health_probes(server),
    }
    if server.env:
        container["env"] = [dict(e) for e in server.env]
    front_end = {
        "name": HTTP_CONTAINER,
        "image": server.http_image or DEFAULT_HTTP_IMAGE,
        "imagePullPolicy": server.image_pull_policy,
        "ports": [{"containerPort": HTTP_PORT}],
    }
    return [container, front_end]


def benchmark_argv(run: BenchmarkRun, server: str) -> list[str]:
    """``benchmark_serving.py`` against ``server``'s gRPC port; it saves ``*.json`` in its workdir."""
    argv = [
        "python3",
        run.script,
        "--server",
        server,
        "--port",
        str(GRPC_PORT),
        "--model",
        run.model_name,
        "--dataset",
        run.dataset,
    ]
    if run.dataset_path:
        argv += ["--dataset-path", run.dataset_path]
    if run.tokenizer:
        argv += ["--tokenizer", run.tokenizer]
    argv += [
        "--num-prompts",
        str(run.num_prompts),
        "--request-rate",
        run.rate_word,
        "--max-output-length",
        str(run.max_output_length),
        *run.extra_args,
        "--save-result",
    ]
    return argv


def read_metrics(result: Any, source: str) -> dict[str, Any]:
    """``{"metrics": {...}, "dimensions": {...}}``; a flat object of metrics is accepted too. Every
    key of :data:`METRIC_KEYS` must be present; the token totals are passed on when there."""
    metrics = result.get("metrics", result) if isinstance(result, Mapping) else None
    if not isinstance(metrics, Mapping):
        raise ValueError(f"{source}: expected a JSON object with 'metrics'; got {type(result).__name__}")
    found = {METRIC_ALIASES.get(k, k): v for k, v in metrics.items()}
    return numeric_metrics(found, METRIC_KEYS, OPTIONAL_METRIC_KEYS, source)


ENGINE = Engine(
    name=NAME,
    container=SERVER_CONTAINER,
    http_port=HTTP_PORT,
    health_path=HEALTH_PATH,
    not_yet_serving=frozenset({0, 500, 502, 503, 504}),
    benchmark_port=GRPC_PORT,
    default_image=DEFAULT_SERVER_IMAGE,
    runs_without_pathways=False,
    check_server=check_server,
    server_args=server_args,
    serving_containers=serving_containers,
    service_ports=(
        {"name": HTTP_CONTAINER, "protocol": "TCP", "port": HTTP_PORT, "targetPort": HTTP_PORT},
        {"name": "jetstream-grpc", "protocol": "TCP", "port": GRPC_PORT, "targetPort": GRPC_PORT},
    ),
    datasets=DATASETS,
    datasets_without_path=DATASETS_WITHOUT_PATH,
    datasets_refusing_path=(),
    default_benchmark_entry_point=DEFAULT_BENCHMARK_SCRIPT,
    benchmark_model="model_name",
    owned_benchmark_flags=OWNED_FLAGS,
    benchmark_argv=benchmark_argv,
    saved_result="*.json",
    upload_result=lambda uri: f"gsutil cp *.json {shlex.quote(uri)}",
    read_metrics=read_metrics,
)
"""JetStream on Pathways: ``/healthcheck`` answers 500 while it loads, the proxy 503 while no pod serves."""

__all__ = ["ENGINE", "GRPC_PORT", "HTTP_PORT"]

"""The ``benchmark_serving.py`` Job of an inference benchmark, and the metrics of its result. Pure.

The Job runs JetStream's ``benchmarks/benchmark_serving.py`` (flags as its ``argparse`` parser
defines them) against the server's gRPC port, with ``--save-result``, and copies the ``*.json``
it writes to ``results_uri`` with ``gsutil``; :func:`benchmark_metrics` reads the ``metrics``
object of that file. The server it benchmarks is :mod:`pathways_airflow.spec.serving`.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pathways_airflow.checkpoints import join
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem, raise_if_any
from pathways_airflow.spec.names import is_dns_label
from pathways_airflow.spec.serving import (
    DEFAULT_SERVER_IMAGE,
    GRPC_PORT,
    MODEL_NAME,
    object_metadata,
    positive_int,
    service_account_problems,
)
from pathways_airflow.spec.workload import (
    GCS_PATH,
    IMAGE_PULL_POLICIES,
    IMAGE_REFERENCE,
    MAX_INT32,
    EnvVar,
    env_vars_from,
    optional_text,
)

BENCHMARK_CONTAINER = "benchmark"
JOB_DEADLINE_GRACE = 300
"""Seconds past the Job's own ``activeDeadlineSeconds`` before the task stops waiting on it."""
TASK_LIMIT = "execution_timeout"
DEFAULT_BENCHMARK_SCRIPT = "JetStream/benchmarks/benchmark_serving.py"
"""Where JetStream's benchmark sits in the JetStream/MaxText images (``./JetStream`` in their workdir)."""
DATASETS = ("test", "sharegpt", "openorca", "mmlu", "math500", "longcontext", "prefix_cache_test")
"""``benchmark_serving.py --dataset`` choices (JetStream ``benchmarks/benchmark_serving.py``)."""
DATASETS_WITHOUT_PATH = ("test",)
"""``test`` generates mock requests; every other dataset is read from ``--dataset-path``."""

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


# --- where the result goes ----------------------------------------------------------------------


def result_object_uri(results_uri: str, name: str) -> str:
    """The object the result JSON is copied to: ``results_uri`` itself if it names a ``.json``
    object, else ``<results_uri>/<name>.json`` (one object per task instance, overwritten by retries)."""
    problem = results_uri_problem(results_uri)
    if problem:
        raise InvalidWorkloadSpec([problem])
    if results_uri.endswith(".json"):
        return results_uri
    return join(results_uri, f"{name}.json")


def results_uri_problem(results_uri: Any) -> SpecProblem | None:
    if not isinstance(results_uri, str) or not GCS_PATH.match(results_uri):
        return SpecProblem(
            "results_uri", results_uri, "must be a gs://BUCKET/PATH (a .json object or a directory)"
        )
    if any(c in results_uri for c in "*?[") or "\n" in results_uri:
        return SpecProblem(
            "results_uri", results_uri, "must name one object or directory (no wildcards or newlines)"
        )
    return None


# --- the benchmark -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkRun:
    """A valid ``benchmark_serving.py`` run; built by :func:`build_benchmark`."""

    model_name: str
    dataset: str
    num_prompts: int
    request_rate: float
    max_output_length: int
    dataset_path: str | None = None
    tokenizer: str | None = None
    extra_args: tuple[str, ...] = ()
    image: str = DEFAULT_SERVER_IMAGE
    script: str = DEFAULT_BENCHMARK_SCRIPT
    env: tuple[EnvVar, ...] = ()
    image_pull_policy: str = "Always"
    timeout_seconds: int = 3600
    service_account_name: str | None = None

    def arguments(self, server: str) -> list[str]:
        """``benchmark_serving.py``'s argv (unquoted) against ``server``'s gRPC port."""
        argv = [
            "python3",
            self.script,
            "--server",
            server,
            "--port",
            str(GRPC_PORT),
            "--model",
            self.model_name,
            "--dataset",
            self.dataset,
        ]
        if self.dataset_path:
            argv += ["--dataset-path", self.dataset_path]
        if self.tokenizer:
            argv += ["--tokenizer", self.tokenizer]
        argv += [
            "--num-prompts",
            str(self.num_prompts),
            "--request-rate",
            "inf" if math.isinf(self.request_rate) else repr(self.request_rate),
            "--max-output-length",
            str(self.max_output_length),
            *self.extra_args,
            "--save-result",
        ]
        return argv


def build_benchmark(
    *,
    model_name: Any,
    dataset: Any,
    num_prompts: Any,
    request_rate: Any,
    max_output_length: Any,
    dataset_path: Any = None,
    tokenizer: Any = None,
    extra_args: Any = None,
    image: Any = DEFAULT_SERVER_IMAGE,
    script: Any = DEFAULT_BENCHMARK_SCRIPT,
    env: Any = None,
    image_pull_policy: Any = "Always",
    timeout_seconds: Any = 3600,
    service_account_name: Any = None,
) -> BenchmarkRun:
    """Check the benchmark's settings and return the run, or raise one error listing every problem."""
    problems: list[SpecProblem] = []
    dataset_path, tokenizer = optional_text(dataset_path), optional_text(tokenizer)
    if not isinstance(model_name, str) or not MODEL_NAME.match(model_name):
        problems.append(
            SpecProblem("model_name", model_name, "must be a MaxText model name such as 'llama2-70b'")
        )
    if dataset not in DATASETS:
        problems.append(SpecProblem("dataset", dataset, "not a benchmark_serving.py dataset", DATASETS))
    elif dataset not in DATASETS_WITHOUT_PATH and not dataset_path:
        problems.append(
            SpecProblem(
                "dataset_path", dataset_path, f"dataset={dataset!r} is read from a file: set dataset_path"
            )
        )
    for name, value in (("dataset_path", dataset_path), ("tokenizer", tokenizer)):
        if value is not None and (not isinstance(value, str) or not value.strip() or has_control_characters(value)):
            problems.append(SpecProblem(name, value, "must be a non-empty string without control characters"))
    prompts = positive_int(problems, "num_prompts", num_prompts)
    output_length = positive_int(problems, "max_output_length", max_output_length)
    rate = _request_rate(problems, request_rate)
    extra = _extra_benchmark_args(problems, extra_args)
    if not isinstance(image, str) or not IMAGE_REFERENCE.match(image):
        problems.append(
            SpecProblem("benchmark_image", image, "must be a non-empty container image reference")
        )
    if not isinstance(script, str) or not script.strip() or has_control_characters(script):
        problems.append(
            SpecProblem(
                "benchmark_script", script, "must be the path of benchmark_serving.py in benchmark_image"
            )
        )
    env_vars = env_vars_from(problems, "benchmark_env", env)
    if image_pull_policy not in IMAGE_PULL_POLICIES:
        problems.append(
            SpecProblem("image_pull_policy", image_pull_policy, "unknown policy", IMAGE_PULL_POLICIES)
        )
    timeout = positive_int(problems, "benchmark_timeout", timeout_seconds, maximum=MAX_INT32)
    service_account_problems(problems, service_account_name)
    raise_if_any(problems)
    assert prompts is not None and output_length is not None and rate is not None and timeout is not None
    return BenchmarkRun(
        model_name=model_name,
        dataset=dataset,
        num_prompts=prompts,
        request_rate=rate,
        max_output_length=output_length,
        dataset_path=dataset_path,
        tokenizer=tokenizer,
        extra_args=extra,
        image=image,
        script=script,
        env=env_vars,
        image_pull_policy=image_pull_policy,
        timeout_seconds=timeout,
        service_account_name=service_account_name,
    )


def _request_rate(problems: list[SpecProblem], value: Any) -> float | None:
    """Requests per second (Poisson arrivals), or ``inf``: every request at once."""
    rate: float | None = None
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rate = float(value)
        elif isinstance(value, str) and len(value) <= 100:
            rate = float(value.strip())
    except (ValueError, OverflowError):  # not a number, or an int beyond any float
        rate = None
    if rate is None or math.isnan(rate) or rate <= 0:
        problems.append(
            SpecProblem("request_rate", value, "must be a number of requests per second > 0, or 'inf'")
        )
        return None
    return rate


def has_control_characters(text: str) -> bool:
    """NUL, newlines, carriage returns, escapes...: nothing a path or an argument needs, and what
    a shell script line or a terminal would read differently from the value given."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _extra_benchmark_args(problems: list[SpecProblem], value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        problems.append(
            SpecProblem(
                "benchmark_args", value, "must be a list of strings, e.g. ['--warmup-mode', 'sampled']"
            )
        )
        return ()
    bad = [item for item in value if not isinstance(item, str)]
    if bad:
        problems.append(SpecProblem("benchmark_args", bad[0], "every item must be a string"))
        return ()
    if any(has_control_characters(item) for item in value):
        problems.append(SpecProblem("benchmark_args", value, "control characters cannot be passed through the shell script"))
        return ()
    owned = {
        "--server",
        "--port",
        "--save-result",
        "--num-prompts",
        "--request-rate",
        "--max-output-length",
        "--dataset",
        "--model",
    }
    clashes = [item for item in value if item.split("=", 1)[0] in owned]
    if clashes:
        problems.append(
            SpecProblem(
                "benchmark_args", clashes[0], "is set by the operator's own parameters", sorted(owned)
            )
        )
    return tuple(value)


def benchmark_script(run: BenchmarkRun, *, server: str, result_uri: str) -> str:
    """The ``bash -c`` script: run the benchmark, then copy its result JSON to ``result_uri``.

    Every word that comes from a user is quoted with ``shlex.quote``; only the ``*.json`` glob is
    left for the shell to expand.
    """
    problem = results_uri_problem(result_uri)
    if problem:
        raise InvalidWorkloadSpec([problem])
    benchmark = " ".join(shlex.quote(word) for word in run.arguments(server))
    return f"{benchmark} && gsutil cp *.json {shlex.quote(result_uri)}"


def render_benchmark_job(
    run: BenchmarkRun,
    *,
    name: str,
    namespace: str,
    service: str,
    result_uri: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``batch/v1`` Job that benchmarks ``service`` once (no retries: a rerun would double the load
    on the server and measure something else) and copies the result JSON to ``result_uri``."""
    if not is_dns_label(name):
        raise InvalidWorkloadSpec([SpecProblem("job", name, "must be a DNS-1035 label (≤ 63 [a-z0-9-])")])
    container: dict[str, Any] = {
        "name": BENCHMARK_CONTAINER,
        "image": run.image,
        "imagePullPolicy": run.image_pull_policy,
        "command": ["bash", "-c"],
        "args": [benchmark_script(run, server=service, result_uri=result_uri)],
    }
    if run.env:
        container["env"] = [dict(e) for e in run.env]
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if run.service_account_name:
        pod_spec["serviceAccountName"] = run.service_account_name
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": object_metadata(name, namespace, labels, annotations),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": run.timeout_seconds,
            "template": {
                **({"metadata": {"labels": dict(labels)}} if labels else {}),
                "spec": pod_spec,
            },
        },
    }


# --- the result ----------------------------------------------------------------------------------


def benchmark_metrics(result: Any, *, source: str = "the result JSON") -> dict[str, Any]:
    """The metrics the operator returns, from ``benchmark_serving.py --save-result``'s JSON.

    ``{"metrics": {...}, "dimensions": {...}}``; a flat object of metrics is accepted too. Every
    key of :data:`METRIC_KEYS` must be present; the token totals are passed on when there.
    """
    metrics = result.get("metrics", result) if isinstance(result, Mapping) else None
    if not isinstance(metrics, Mapping):
        raise ValueError(f"{source}: expected a JSON object with 'metrics'; got {type(result).__name__}")
    found = {METRIC_ALIASES.get(k, k): v for k, v in metrics.items()}
    missing = [k for k in METRIC_KEYS if k not in found]
    if missing:
        raise ValueError(
            f"{source}: missing metrics {', '.join(missing)}; it has {', '.join(sorted(metrics)) or 'none'}"
        )
    bad = [k for k in (*METRIC_KEYS, *OPTIONAL_METRIC_KEYS) if k in found and not _is_number(found[k])]
    if bad:
        raise ValueError(f"{source}: metric {bad[0]}={found[bad[0]]!r} is not a number")
    return {k: found[k] for k in (*METRIC_KEYS, *OPTIONAL_METRIC_KEYS) if k in found}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def job_deadline(now: float, timeout_seconds: int, task_deadline: float | None, task_limit: str = TASK_LIMIT) -> tuple[float, str]:
    """When to stop waiting on the benchmark Job (epoch seconds), and which limit that is.

    The Job controller fails the Job at its ``activeDeadlineSeconds``; the wait gives it
    :data:`JOB_DEADLINE_GRACE` more to say so, unless the task's own deadline (``task_limit``,
    its ``execution_timeout``) comes first.
    """
    own = now + timeout_seconds + JOB_DEADLINE_GRACE
    if task_deadline is not None and task_deadline < own:
        return task_deadline, task_limit
    return own, f"{timeout_seconds + JOB_DEADLINE_GRACE}s"


__all__ = [
    "BENCHMARK_CONTAINER",
    "DATASETS",
    "METRIC_KEYS",
    "BenchmarkRun",
    "benchmark_metrics",
    "benchmark_script",
    "build_benchmark",
    "job_deadline",
    "render_benchmark_job",
    "result_object_uri",
    "results_uri_problem",
]

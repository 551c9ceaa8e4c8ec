"""The benchmark Job of an inference benchmark, and the metrics of its result. Pure.

Whatever the engine, the Job runs the engine's benchmark once against the server's Service,
saves its result JSON locally and uploads that file to ``results_uri``; the engine's module says
which benchmark, with which flags, and how its JSON reads (:mod:`pathways_airflow.spec.jetstream`:
``benchmark_serving.py`` and ``gsutil``; :mod:`pathways_airflow.spec.vllm`: ``vllm bench serve``).
The server it benchmarks is :mod:`pathways_airflow.spec.serving`.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pathways_airflow.checkpoints import join
from pathways_airflow.spec.arguments import TASK_LIMIT
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem, raise_if_any
from pathways_airflow.spec.names import is_dns_label
from pathways_airflow.spec.serving import (
    model_id_problem,
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
UPLOAD_WITH_PYTHON = (
    "import sys; from google.cloud import storage; "
    "bucket, _, name = sys.argv[2][len('gs://'):].partition('/'); "
    "storage.Client().bucket(bucket).blob(name).upload_from_filename(sys.argv[1])"
)
"""Copies ``argv[1]`` to the ``gs://`` URI ``argv[2]`` with google-cloud-storage, for images that
have Python and that library but no ``gsutil`` (vLLM's TPU image: tpu-inference's
``requirements.txt`` installs google-cloud-storage)."""


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
    """A valid benchmark run of one engine; built by :func:`build_benchmark`."""

    engine: Engine
    model_name: str
    """What the benchmark asks the server for (JetStream: the MaxText model; vLLM: the served model)."""
    dataset: str
    num_prompts: int
    request_rate: float
    max_output_length: int
    image: str
    script: str
    """The benchmark's entry point in ``image`` (a script path, or the ``vllm`` command)."""
    dataset_path: str | None = None
    tokenizer: str | None = None
    max_concurrency: int | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    image_pull_policy: str = "Always"
    timeout_seconds: int = 3600
    service_account_name: str | None = None

    @property
    def rate_word(self) -> str:
        """``--request-rate`` as the benchmarks read it: ``inf`` sends every request at once."""
        return "inf" if math.isinf(self.request_rate) else repr(self.request_rate)

    def arguments(self, server: str) -> list[str]:
        """The benchmark's argv (unquoted) against ``server``, saving its result locally."""
        return self.engine.benchmark_argv(self, server)


def build_benchmark(
    *,
    engine: Engine,
    model_name: Any,
    num_prompts: Any,
    request_rate: Any,
    max_output_length: Any,
    dataset: Any = None,
    dataset_path: Any = None,
    tokenizer: Any = None,
    max_concurrency: Any = None,
    extra_args: Any = None,
    image: Any = None,
    server_image: Any = None,
    script: Any = None,
    env: Any = None,
    image_pull_policy: Any = "Always",
    timeout_seconds: Any = 3600,
    service_account_name: Any = None,
) -> BenchmarkRun:
    """Check the benchmark's settings and return the run, or raise one error listing every problem.

    Without a ``dataset`` the engine's generated prompts are used (vLLM ``random``, JetStream
    ``test``); without an ``image`` the server's (``server_image``), else the engine's."""
    problems: list[SpecProblem] = []
    dataset_path, tokenizer = optional_text(dataset_path), optional_text(tokenizer)
    dataset = optional_text(dataset) or engine.datasets_without_path[0]
    image = optional_text(image) or optional_text(server_image) or engine.default_image
    script = optional_text(script) or engine.default_benchmark_entry_point
    model_id_problem(problems, engine.benchmark_model, model_name, "must be a model name such as 'llama2-70b' or 'org/model', one word")
    if dataset not in engine.datasets:
        problems.append(SpecProblem("dataset", dataset, f"not a dataset of the benchmark of engine={engine.name!r}", engine.datasets))
    elif dataset in engine.datasets_refusing_path and dataset_path:
        problems.append(
            SpecProblem("dataset_path", dataset_path, f"dataset={dataset!r} generates its prompts and takes no file")
        )
    elif dataset not in engine.datasets_without_path and not dataset_path:
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
    concurrency, max_concurrency = None, optional_text(max_concurrency)
    if max_concurrency is not None:
        if not engine.supports_max_concurrency:
            problems.append(
                SpecProblem("max_concurrency", max_concurrency, f"the benchmark of engine={engine.name!r} has no such limit")
            )
        else:
            concurrency = positive_int(problems, "max_concurrency", max_concurrency)
    extra = _extra_benchmark_args(problems, extra_args, engine.owned_benchmark_flags)
    if not isinstance(image, str) or not IMAGE_REFERENCE.match(image):
        problems.append(
            SpecProblem("benchmark_image", image, "must be a non-empty container image reference")
        )
    if not isinstance(script, str) or not script.strip() or has_control_characters(script):
        problems.append(
            SpecProblem(
                "benchmark_script",
                script,
                f"must be the benchmark's entry point in benchmark_image ({engine.default_benchmark_entry_point})",
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
        engine=engine,
        model_name=model_name,
        dataset=dataset,
        num_prompts=prompts,
        request_rate=rate,
        max_output_length=output_length,
        image=image,
        script=script,
        dataset_path=dataset_path,
        tokenizer=tokenizer,
        max_concurrency=concurrency,
        extra_args=extra,
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


def flag_name(word: str) -> str:
    """A flag by its name, as vLLM's parser reads it (``--max_num_seqs=4`` is ``--max-num-seqs``), so
    that no spelling slips a flag the operator sets past its check."""
    name = word.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def _extra_benchmark_args(problems: list[SpecProblem], value: Any, owned: frozenset[str]) -> tuple[str, ...]:
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
    clashes = [item for item in value if flag_name(item) in owned]
    if clashes:
        problems.append(
            SpecProblem(
                "benchmark_args", clashes[0], "is set by the operator's own parameters", sorted(owned)
            )
        )
    return tuple(value)


def upload_command(source: str, uri: str) -> list[str]:
    """Copy the local ``source`` to ``uri`` with Python's google-cloud-storage (argv, unquoted)."""
    return ["python3", "-c", UPLOAD_WITH_PYTHON, source, uri]


def benchmark_script(run: BenchmarkRun, *, server: str, result_uri: str) -> str:
    """The ``bash -c`` script: run the benchmark, then copy its result JSON to ``result_uri``.

    Every word that comes from a user is quoted with ``shlex.quote``; only the engine's own upload
    (JetStream's ``*.json`` glob) is left for the shell to expand.
    """
    problem = results_uri_problem(result_uri)
    if problem:
        raise InvalidWorkloadSpec([problem])
    return f"{quoted(run.arguments(server))} && {run.engine.upload_result(result_uri)}"


def quoted(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(word) for word in argv)


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


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def numeric_metrics(
    found: Mapping[str, Any], required: Sequence[str], optional: Sequence[str], source: str
) -> dict[str, Any]:
    """``required`` and the ``optional`` that are there, each a number; ``ValueError`` otherwise."""
    missing = [k for k in required if k not in found]
    if missing:
        raise ValueError(
            f"{source}: missing metrics {', '.join(missing)}; it has {', '.join(sorted(found)) or 'none'}"
        )
    bad = [k for k in (*required, *optional) if k in found and not is_number(found[k])]
    if bad:
        raise ValueError(f"{source}: metric {bad[0]}={found[bad[0]]!r} is not a number")
    return {k: found[k] for k in (*required, *optional) if k in found}


def benchmark_metrics(result: Any, engine: Engine, *, source: str = "the result JSON") -> dict[str, Any]:
    """The metrics the operator returns, read from ``engine``'s result JSON."""
    return engine.read_metrics(result, source)


def result_metrics(data: bytes | None, engine: Engine, source: str) -> dict[str, Any]:
    """The metrics of a finished benchmark from its uploaded result (``None``: no such object).

    ``ValueError`` says what is wrong: no result, an unreadable one, or requests that failed.
    """
    if data is None:
        raise ValueError(
            f"the benchmark finished but {source} does not exist: did it save its result "
            f"({engine.saved_result}) and upload it?"
        )
    try:
        result = json.loads(data)
        metrics = benchmark_metrics(result, engine, source=source)
    except ValueError as error:
        raise ValueError(f"cannot read the benchmark result: {error}") from None
    unclean = failed_requests(metrics, result)
    if unclean:
        raise ValueError(f"{unclean} (result kept at {source})")
    return metrics


def failed_requests(metrics: Mapping[str, Any], result: Any) -> str | None:
    """Why a benchmark whose requests failed is no measurement, or ``None`` when none failed.

    Latencies and throughput over the requests that happened to succeed describe a different
    load than the one asked for, so such a run must not become a baseline. vLLM saves the
    per-request ``errors`` only with ``--save-detailed``; its log always prints them.
    """
    failed = metrics.get("failed")
    if not is_number(failed) or failed <= 0:
        return None
    errors = result.get("errors") if isinstance(result, Mapping) else None
    first = next((e for e in errors if isinstance(e, str) and e.strip()), None) if isinstance(errors, list) else None
    total = failed + (metrics.get("completed") or 0)
    said = f"; the first error: {first.strip()[:500]}" if first else "; the benchmark's log lists the errors"
    return f"{failed:g} of {total:g} benchmark requests failed, so the run measured a different load{said}"


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
    "BenchmarkRun",
    "benchmark_metrics",
    "benchmark_script",
    "build_benchmark",
    "failed_requests",
    "result_metrics",
    "job_deadline",
    "render_benchmark_job",
    "result_object_uri",
    "results_uri_problem",
]

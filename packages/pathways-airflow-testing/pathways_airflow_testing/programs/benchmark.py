"""The JetStream ``benchmark_serving.py`` stand-in: load a server, measure it, save the result.

It sends real requests to the JetStream stand-in over loopback and measures them with real time,
then writes the result in the shape Google's nightly benchmark DAGs load into BigQuery:
``{"metrics": {...}, "dimensions": {...}}``.

Command line (argparse style, as ``benchmark_serving.py``):

* ``--server`` (``localhost``): a Service name or pod hostname, resolved through the cluster.
* ``--port`` (9000): if nothing answers on it, port 8000 (``jetstream-http``) is tried.
* ``--num-prompts`` (10), ``--request-rate`` (``inf``: all at once; else Poisson arrivals per
  second), ``--max-output-length`` (64), ``--model``, ``--tokenizer``, ``--dataset``.
* Where the result goes: the ``gs://`` destination of a ``gsutil cp FILE gs://...``,
  ``gcloud storage cp FILE gs://...`` or google-cloud-storage upload (``copy_destination``) in
  the same command, or ``--result-uri gs://...``; a destination ending in ``/`` gets the file's
  name (or a generated one for a glob).
  ``--save-result`` alone, without a destination, only logs the result.

Timing: TTFT is the time to the response headers (the server sends them after its first
token), TPOT = (total - TTFT) / (output tokens - 1), and TTST is reported equal to TPOT.
Exits 1 if the server cannot be resolved or any request fails.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import aiohttp

from pathways_airflow.checkpoints import is_gcs
from pathways_airflow_testing.programs.args import (
    SHELL_OPERATORS,
    BadArgument,
    command_tokens,
    parse_params,
)
from pathways_airflow_testing.programs.base import ProgramContext
from pathways_airflow_testing.programs.jetstream import HTTP_PORT

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
    "total_input_tokens",
    "total_output_tokens",
)

_WORDS = "the a model tensor slice chip pod shard token layer weight batch step serve train".split()
_GLOB = set("*?[")
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")


@dataclass(frozen=True)
class BenchmarkPlan:
    server: str
    port: int
    num_prompts: int
    request_rate: float
    max_output_length: int
    model: str
    tokenizer: str
    dataset: str
    result_uri: str | None
    """A ``gs://`` object or prefix (ending in ``/``) to write the result to."""
    result_file: str | None
    """The local file name the command copies, when it names one."""

    @classmethod
    def from_command(cls, argv: list[str], env: Mapping[str, str]) -> BenchmarkPlan:
        tokens = command_tokens(argv, env)
        params = parse_params(tokens, switches=["save-result", "save-request-outputs", "warmup-first"])
        plan = cls(
            server=params.text("server") or "localhost",
            port=params.integer("port", 9000),
            num_prompts=params.integer("num_prompts", 10),
            request_rate=params.number("request_rate", math.inf),
            max_output_length=params.integer("max_output_length", 64),
            model=params.text("model") or "unknown",
            tokenizer=params.text("tokenizer") or "unknown",
            dataset=params.text("dataset") or "synthetic",
            result_uri=params.text("result_uri") or copy_destination(tokens)[1],
            result_file=copy_destination(tokens)[0],
        )
        if plan.num_prompts < 1:
            raise BadArgument(f"--num-prompts={plan.num_prompts}: must be at least 1")
        if plan.request_rate <= 0:
            raise BadArgument(f"--request-rate={plan.request_rate}: must be > 0 (or inf)")
        if plan.max_output_length < 1:
            raise BadArgument(f"--max-output-length={plan.max_output_length}: must be at least 1")
        if plan.result_uri is not None and not is_gcs(plan.result_uri):
            raise BadArgument(f"result destination {plan.result_uri!r}: only gs:// is emulated")
        return plan

    def result_object(self, timestamp: str) -> str | None:
        """The ``gs://`` object the result is written to, if any."""
        if self.result_uri is None:
            return None
        if not self.result_uri.endswith("/"):
            return self.result_uri
        name = self.result_file.rsplit("/", 1)[-1] if self.result_file else ""
        if not name or _GLOB & set(name):
            name = f"jetstream-{self.request_rate}qps-{self.model.replace('/', '-')}-{timestamp}.json"
        return self.result_uri + name


def copy_destination(tokens: Sequence[str]) -> tuple[str | None, str | None]:
    """``(source file, gs:// destination)`` of the command's first upload: a ``gsutil cp`` /
    ``gcloud storage cp FILE gs://...``, or a ``python3 -c CODE FILE gs://...`` whose ``CODE``
    uploads with google-cloud-storage's ``upload_from_filename`` (images without gsutil, such as
    vLLM's TPU image, upload that way)."""
    for index, word in enumerate(tokens):
        if word == "cp" and _is_storage_cli(tokens[:index]):
            operands = _operands(tokens[index + 1 :])
        elif _is_python_upload(tokens, index):
            operands = _operands(tokens[index + 2 :])
        else:
            continue
        if len(operands) >= 2 and operands[-1].startswith("gs://"):
            return operands[-2], operands[-1]
    return None, None


def _operands(words: Sequence[str]) -> list[str]:
    """The non-option words of one shell command."""
    operands: list[str] = []
    for operand in words:
        if operand in SHELL_OPERATORS:
            break
        if not operand.startswith("-"):
            operands.append(operand)
    return operands


def _is_python_upload(tokens: Sequence[str], index: int) -> bool:
    """Is ``tokens[index]`` the ``-c`` of a Python one-liner that uploads with ``upload_from_filename``?"""
    if tokens[index] != "-c" or index + 1 >= len(tokens) or "upload_from_filename" not in tokens[index + 1]:
        return False
    for word in reversed(tokens[:index]):
        if word in SHELL_OPERATORS:
            return False
        if _PYTHON.match(word.rsplit("/", 1)[-1]):
            return True
    return False


def _is_storage_cli(before: Sequence[str]) -> bool:
    """Is the ``cp`` that follows ``before`` a subcommand of gsutil or gcloud storage?"""
    words: list[str] = []
    for word in reversed(before):
        if word in SHELL_OPERATORS:
            break
        words.append(word.rsplit("/", 1)[-1])
    return "gsutil" in words or ("gcloud" in words and "storage" in words)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), as benchmark_serving uses."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class RequestResult:
    input_tokens: int
    output_tokens: int
    ttft: float
    """Seconds to the response headers."""
    latency: float
    """Seconds to the end of the response."""

    @property
    def tpot(self) -> float:
        return (self.latency - self.ttft) / max(1, self.output_tokens - 1)


def summarize(results: Sequence[RequestResult], duration: float) -> dict[str, float | int]:
    """JetStream's metric set from measured requests."""
    ttfts = [r.ttft * 1000 for r in results]
    tpots = [r.tpot * 1000 for r in results]
    total_in = sum(r.input_tokens for r in results)
    total_out = sum(r.output_tokens for r in results)
    span = max(duration, 1e-9)
    metrics: dict[str, float | int] = {
        "request_throughput": len(results) / span,
        "input_throughput": total_in / span,
        "output_throughput": total_out / span,
    }
    for name, values in (("ttft", ttfts), ("ttst", tpots), ("tpot", tpots)):
        metrics[f"mean_{name}_ms"] = sum(values) / len(values) if values else 0.0
        metrics[f"median_{name}_ms"] = percentile(values, 50)
        metrics[f"p99_{name}_ms"] = percentile(values, 99)
    metrics.update(
        completed=len(results), duration=duration, total_input_tokens=total_in, total_output_tokens=total_out
    )
    return metrics


def synthetic_prompts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 32))) for _ in range(count)]


@dataclass
class _Outcome:
    results: list[RequestResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


async def _send(
    session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int, outcome: _Outcome
) -> None:
    started = time.perf_counter()
    try:
        async with session.post(url, json={"prompt": prompt, "max_tokens": max_tokens}) as response:
            ttft = time.perf_counter() - started
            body = await response.text()
            latency = time.perf_counter() - started
            if response.status != 200:
                outcome.failures.append(f"HTTP {response.status}: {body[:200]}")
                return
            text = json.loads(body)["response"]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError) as error:
        outcome.failures.append(f"{type(error).__name__}: {error}")
        return
    outcome.results.append(RequestResult(len(prompt.split()), len(str(text).split()), ttft, latency))


async def _resolve(ctx: ProgramContext, plan: BenchmarkPlan) -> tuple[str, int] | None:
    address = await ctx.resolve(plan.server, plan.port)
    if address is None and plan.port != HTTP_PORT:
        address = await ctx.resolve(plan.server, HTTP_PORT)
    return address


async def run(ctx: ProgramContext) -> int:
    try:
        plan = BenchmarkPlan.from_command(ctx.argv, ctx.env)
    except BadArgument as error:
        ctx.log(f"error: {error}")
        return 1

    address = await _resolve(ctx, plan)
    if address is None:
        ctx.log(f"error: cannot connect to {plan.server}:{plan.port}: no such service or port")
        return 1
    url = f"http://{address[0]}:{address[1]}/generate"
    ctx.log(
        f"benchmarking {plan.server}:{plan.port} with {plan.num_prompts} prompts at request rate "
        f"{plan.request_rate}, max output length {plan.max_output_length}"
    )

    outcome = _Outcome()
    rng = random.Random(1)
    started = time.perf_counter()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
        requests: list[asyncio.Task[None]] = []
        try:
            for index, prompt in enumerate(synthetic_prompts(plan.num_prompts)):
                if index and math.isfinite(plan.request_rate):
                    await asyncio.sleep(rng.expovariate(plan.request_rate))
                request = _send(session, url, prompt, plan.max_output_length, outcome)
                requests.append(asyncio.create_task(request))
            await asyncio.gather(*requests)
        finally:
            for request in requests:
                request.cancel()
    duration = time.perf_counter() - started

    if outcome.failures:
        failed = len(outcome.failures)
        ctx.log(f"error: {failed} of {plan.num_prompts} requests failed; first: {outcome.failures[0]}")
        return 1

    metrics = summarize(outcome.results, duration)
    for line in _summary_lines(metrics):
        ctx.log(line)
    timestamp = ctx.clock.utcnow().strftime("%Y%m%d-%H%M%S")
    result = {
        "metrics": metrics,
        "dimensions": {
            "date": timestamp,
            "model": plan.model,
            "tokenizer": plan.tokenizer,
            "dataset": plan.dataset,
            "num_prompts": str(plan.num_prompts),
            "request_rate": str(plan.request_rate),
            "max_output_length": str(plan.max_output_length),
            "server": f"{plan.server}:{plan.port}",
        },
    }
    target = plan.result_object(timestamp)
    if target is None:
        ctx.log("result not uploaded: no gs:// destination in the command")
        ctx.log(json.dumps(result))
    else:
        await ctx.gcs.write(target, json.dumps(result, indent=2).encode())
        ctx.log(f"result saved to {target}")
    return 0


def _summary_lines(metrics: Mapping[str, float | int]) -> list[str]:
    return [
        f"Successful requests: {metrics['completed']}",
        f"Benchmark duration: {metrics['duration']:.2f} s",
        f"Total input tokens: {metrics['total_input_tokens']}",
        f"Total generated tokens: {metrics['total_output_tokens']}",
        f"Request throughput: {metrics['request_throughput']:.2f} requests/s",
        f"Input token throughput: {metrics['input_throughput']:.2f} tokens/s",
        f"Output token throughput: {metrics['output_throughput']:.2f} tokens/s",
        f"Mean TTFT: {metrics['mean_ttft_ms']:.2f} ms",
        f"Median TTFT: {metrics['median_ttft_ms']:.2f} ms",
        f"P99 TTFT: {metrics['p99_ttft_ms']:.2f} ms",
        f"Mean TPOT: {metrics['mean_tpot_ms']:.2f} ms",
        f"Median TPOT: {metrics['median_tpot_ms']:.2f} ms",
        f"P99 TPOT: {metrics['p99_tpot_ms']:.2f} ms",
    ]

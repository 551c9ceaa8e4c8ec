"""The ``vllm bench serve`` stand-in: load a vLLM server, measure it, save vLLM's flat result JSON.

It streams real requests to the ``vllm serve`` stand-in over loopback, times them in real time as
``vllm/benchmarks/serve.py`` does and saves that script's result shape, so what reads a real run
reads this one. Only the words of the ``vllm bench serve`` shell command are read (argparse style):

* The server: ``--base-url http://HOST[:PORT]``, else ``--host`` (``127.0.0.1``) and ``--port``
  (8000), resolved through the cluster; ``--endpoint`` (``/v1/completions``); ``--backend``
  ``openai`` (default) or ``vllm``. ``--model``: without it, ``/v1/models`` gives the model id
  (``data[0].root``) and the name requests use (``data[0].id``). ``--served-model-name``,
  ``--tokenizer``, ``--label``, ``--seed`` (0) as vLLM.
* ``--dataset-name`` (``random``): ``random`` and ``prefix_repetition`` refuse ``--dataset-path``;
  ``sharegpt``, ``sonnet``, ``burstgpt``, ``hf``, ``custom`` need it. Prompts are synthetic anyway:
  ``--input-len`` / ``--random-input-len`` (1024) words, capped at 64 to stay cheap (``input_lens``
  still report the requested length, as vLLM's random dataset does). ``--output-len`` /
  ``--<dataset>-output-len`` (128) is every request's ``max_tokens``.
* ``--num-prompts`` (1000); ``--request-rate`` (``inf``: all at once; else Poisson arrivals, gamma
  with ``--burstiness``); ``--max-concurrency N``: at most N requests in flight.
* ``--percentile-metrics`` (``ttft,tpot,itl``; also ``e2el``), ``--metric-percentiles`` (``99``).
* ``--save-result`` saves to ``--result-dir``/``--result-filename`` (default
  ``{label or backend}-{rate}qps[-concurrencyN]-{model}-{date}.json``). Sharing no files with the
  rest of its shell command, the stand-in writes the JSON straight to where that command uploads
  the file (``benchmark.copy_destination``: ``gsutil cp``, ``gcloud storage cp``, or ``python3 -c
  CODE FILE gs://…`` with ``upload_from_filename`` in ``CODE``); uploading another file or a result
  never saved fails as the uploader would ("No such file or directory"). With no upload it is logged.

The result holds the run's settings (``date`` … ``request_rate``: ``"inf"`` or the number …
``max_concurrency``), ``completed``, ``failed``, token totals and throughputs, with
``--save-detailed`` only the per-request ``input_lens``, ``output_lens``, ``ttfts``, ``itls``,
``errors``, then ``max_concurrent_requests`` (the exact peak in flight) and
``{mean,median,std}_{m}_ms``, ``p{P}_{m}_ms`` per metric and percentile.
TTFT is the time to the first token chunk, ITL the gaps between them, E2EL the time to ``[DONE]``,
TPOT = (E2EL - TTFT) / (output tokens - 1). A request answered with an HTTP error or a broken stream
is *failed*, its error recorded, and the run still exits 0, as vLLM's does; it exits 1 for bad
arguments, an unresolvable server or a failing upload. No initial test request is sent (vLLM's
default, ``--ready-check-timeout-sec 0``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import fnmatch
import json
import math
import posixpath
import random
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

import aiohttp

from pathways_airflow_testing.programs.args import BadArgument, Params, command_tokens, parse_params
from pathways_airflow_testing.programs.base import ProgramContext
from pathways_airflow_testing.programs.benchmark import copy_destination
from pathways_airflow_testing.programs.vllm import HTTP_PORT, cli_segment
from pathways_airflow_testing.programs.vllm_result import METRICS, measure, summary_lines

BACKENDS = ("openai", "vllm")
DATASETS = ("random", "sharegpt", "sonnet", "burstgpt", "hf", "custom", "prefix_repetition")
GENERATED_DATASETS = ("random", "prefix_repetition")
"""Metrics ``--percentile-metrics`` may select, in the order vLLM reports them."""
PROMPT_WORD_CAP = 64
DETAILED_FIELDS = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors")
"""Saved only with ``--save-detailed`` (``vllm/benchmarks/serve.py`` drops them otherwise)."""
BENCH_SWITCHES = (
    "save-result", "save-detailed", "append-result", "ignore-eos", "disable-tqdm", "profile",
    "trust-remote-code", "insecure", "skip-tokenizer-init", "use-beam-search", "plot-timeline",
    "plot-dataset-stats",
)  # fmt: skip
_WORDS = "the a model tensor slice chip pod shard token layer weight batch step serve train".split()
_NO_TOKEN = "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"


def _server_address(params: Params) -> tuple[str, int, str]:
    """``(host, port, path prefix)`` of ``--base-url``, else of ``--host`` and ``--port``."""
    base_url = params.text("base-url")
    if not base_url:
        return params.text("host") or "127.0.0.1", params.integer("port", HTTP_PORT), ""
    parts = urlsplit(base_url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise BadArgument(f"--base-url={base_url!r}: bad port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadArgument(f"--base-url={base_url!r}: expected http://HOST[:PORT]")
    return parts.hostname, port, parts.path.rstrip("/")


def _output_len(params: Params, dataset: str) -> int:
    """``--output-len`` maps onto every dataset's own output length, as vLLM maps it."""
    for key in ("output-len", f"{dataset}-output-len"):
        if key in params:
            return params.integer(key, 0)
    return 128


def _percentiles(raw: str) -> tuple[float, ...]:
    try:
        values = tuple(float(p) for p in raw.split(","))
    except ValueError:
        raise BadArgument(f"--metric-percentiles={raw!r}: expected comma-separated numbers") from None
    if not all(0 <= p <= 100 for p in values):
        raise BadArgument(f"--metric-percentiles={raw!r}: percentiles must be in [0, 100]")
    return values


@dataclass(frozen=True)
class BenchPlan:
    """One ``vllm bench serve`` run, read from its command line."""

    backend: str
    host: str
    port: int
    path_prefix: str
    endpoint: str
    model: str | None
    served_model_name: str | None
    tokenizer: str | None
    dataset_name: str
    dataset_path: str | None
    num_prompts: int
    request_rate: float
    burstiness: float
    max_concurrency: int | None
    input_len: int
    output_len: int
    metrics_asked: tuple[str, ...]
    metric_percentiles: tuple[float, ...]
    save_result: bool
    save_detailed: bool
    result_dir: str | None
    result_filename: str | None
    seed: int
    ignore_eos: bool
    label: str | None

    @classmethod
    def from_command(cls, argv: list[str], env: Mapping[str, str]) -> BenchPlan:
        words = cli_segment(command_tokens(argv, env), ["bench", "serve"])
        if words is None:
            raise BadArgument("only `vllm bench serve` is emulated")
        params = parse_params(words, switches=BENCH_SWITCHES)
        host, port, prefix = _server_address(params)
        dataset = params.text("dataset-name") or "random"
        concurrency = params.text("max-concurrency")
        metrics = (params.text("percentile-metrics") or "ttft,tpot,itl").split(",")
        plan = cls(
            backend=params.text("backend") or "openai",
            host=host,
            port=port,
            path_prefix=prefix,
            endpoint=params.text("endpoint") or "/v1/completions",
            model=params.text("model"),
            served_model_name=params.text("served-model-name"),
            tokenizer=params.text("tokenizer"),
            dataset_name=dataset,
            dataset_path=params.text("dataset-path"),
            num_prompts=params.integer("num-prompts", 1000),
            request_rate=params.number("request-rate", math.inf),
            burstiness=params.number("burstiness", 1.0),
            max_concurrency=None if concurrency is None else params.integer("max-concurrency", 0),
            input_len=params.integer("input-len", params.integer("random-input-len", 1024)),
            output_len=_output_len(params, dataset),
            metrics_asked=tuple(m.strip() for m in metrics),
            metric_percentiles=_percentiles(params.text("metric-percentiles") or "99"),
            save_result=params.flag("save-result"),
            save_detailed=params.flag("save-detailed"),
            result_dir=params.text("result-dir"),
            result_filename=params.text("result-filename"),
            seed=params.integer("seed", 0),
            ignore_eos=params.flag("ignore-eos") or dataset == "random",
            label=params.text("label"),
        )
        plan.check()
        return plan

    def check(self) -> None:
        """What vLLM's argument parser and ``main`` refuse before sending anything."""
        dataset, path = self.dataset_name, self.dataset_path
        chosen = {"backend": (self.backend, BACKENDS), "dataset-name": (dataset, DATASETS)}
        for flag, (value, choices) in chosen.items():
            if value not in choices:
                raise BadArgument(f"argument --{flag}: invalid choice: {value!r} (choose from {choices})")
        if dataset in GENERATED_DATASETS and path is not None:
            raise BadArgument(f"Cannot use '{dataset}' dataset with --dataset-path {path}")
        if dataset not in GENERATED_DATASETS and not path:
            raise BadArgument(f"--dataset-name {dataset} needs --dataset-path (a file or a dataset id)")
        if self.max_concurrency is not None and self.max_concurrency <= 0:
            raise BadArgument("--max-concurrency must be greater than 0")
        lengths = {"num-prompts": self.num_prompts,
                   "input-len": self.input_len, "output-len": self.output_len}
        for flag, value in lengths.items():
            if value < 1:
                raise BadArgument(f"--{flag}={value}: must be at least 1")
        if self.request_rate <= 0 or self.burstiness <= 0:
            raise BadArgument(f"--request-rate {self.request_rate}, --burstiness {self.burstiness}: not > 0")
        if not self.endpoint.endswith("completions"):
            raise BadArgument(f"--endpoint={self.endpoint!r}: the completions API ends in 'completions'")

    @property
    def percentile_metrics(self) -> tuple[str, ...]:
        """The selected metrics vLLM knows, in its order; it ignores the others."""
        return tuple(m for m in METRICS if m in self.metrics_asked)

    def result_path(self, model_id: str, date: str) -> str:
        """Where vLLM saves the result: ``--result-dir``/``--result-filename`` or its generated name."""
        concurrency = f"-concurrency{self.max_concurrency}" if self.max_concurrency is not None else ""
        model = model_id.split("/")[-1]
        generated = f"{self.label or self.backend}-{self.request_rate}qps{concurrency}-{model}-{date}.json"
        name = self.result_filename or generated
        return posixpath.join(self.result_dir, name) if self.result_dir else name


def synthetic_prompts(plan: BenchPlan, rng: random.Random) -> list[str]:
    """``--num-prompts`` prompts of ``--input-len`` words, capped: the server only counts words."""
    words = min(plan.input_len, PROMPT_WORD_CAP)
    return [" ".join(rng.choice(_WORDS) for _ in range(words)) for _ in range(plan.num_prompts)]


def arrival_offsets(count: int, rate: float, burstiness: float, rng: random.Random) -> list[float]:
    """Seconds after the start each request is sent: all at once for an infinite rate, else gamma
    gaps (exponential for burstiness 1: Poisson arrivals) scaled so the last comes at count / rate,
    as vLLM spaces them."""
    if math.isinf(rate):
        return [0.0] * count
    offsets, total = [], 0.0
    for _ in range(count):
        total += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
        offsets.append(total)
    scale = (count / rate) / total if total > 0 else 1.0
    return [offset * scale for offset in offsets]


@dataclass
class RequestOutput:
    """What one request measured, in seconds, as vLLM's ``RequestFuncOutput``."""

    prompt_len: int
    start_time: float = 0.0
    success: bool = False
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    output_tokens: int = 0
    generated_text: str = ""
    error: str = ""


class _EventReader:
    """Reads a completions event stream into a ``RequestOutput``, timing each token chunk."""

    def __init__(self, output: RequestOutput):
        self.output = output
        self.tokens_seen = False
        self.last_token = output.start_time
        self.done_at: float | None = None
        self.buffer = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")()

    def feed(self, data: bytes, *, final: bool = False) -> None:
        self.buffer += self.decoder.decode(data, final=final)
        while "\n\n" in self.buffer:
            message, self.buffer = self.buffer.split("\n\n", 1)
            self.on_message(message.strip())
        if final and self.buffer.strip():
            self.on_message(self.buffer.strip())

    def on_message(self, message: str) -> None:
        if not message or message.startswith(":"):  # SSE comments are pings
            return
        now = time.perf_counter()
        data = message.removeprefix("data:").strip()
        if data == "[DONE]":
            self.done_at = now
            return
        chunk = json.loads(data)
        if chunk.get("choices"):
            if self.tokens_seen:
                self.output.itl.append(now - self.last_token)
            else:
                self.output.ttft = now - self.output.start_time
            self.tokens_seen, self.last_token = True, now
            self.output.generated_text += chunk["choices"][0].get("text") or ""
        elif chunk.get("usage"):
            self.output.output_tokens = int(chunk["usage"].get("completion_tokens") or 0)

    def finish(self) -> None:
        output = self.output
        output.success = self.tokens_seen
        output.error = "" if self.tokens_seen else _NO_TOKEN
        output.latency = (self.done_at or self.last_token) - output.start_time
        if output.success and not output.output_tokens:
            output.output_tokens = len(output.generated_text.split())


async def send_request(
    session: aiohttp.ClientSession, url: str, payload: Mapping[str, Any], prompt_len: int
) -> RequestOutput:
    """One streaming completion; any failure is recorded in the output, never raised."""
    output = RequestOutput(prompt_len, start_time=time.perf_counter())
    try:
        async with session.post(url, json=dict(payload)) as response:
            if response.status != 200:
                output.error = response.reason or f"HTTP {response.status}"
                return output
            reader = _EventReader(output)
            async for piece in response.content.iter_any():
                reader.feed(piece)
            reader.feed(b"", final=True)
            reader.finish()
    except Exception as error:  # noqa: BLE001 - vLLM records any failure as the request's error
        output.success = False
        output.error = "".join(traceback.format_exception_only(type(error), error)).strip()
    return output


def _payload(plan: BenchPlan, model: str, prompt: str) -> dict[str, Any]:
    """What vLLM's completions client sends: streamed, ending in a usage chunk that counts tokens."""
    payload: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "repetition_penalty": 1.0,
        "max_tokens": plan.output_len,
        "logprobs": None,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if plan.ignore_eos:
        payload["ignore_eos"] = True
    return payload


async def run_requests(
    plan: BenchPlan, url: str, model: str, prompts: Sequence[str], offsets: Sequence[float]
) -> tuple[list[RequestOutput], float]:
    """Send each prompt at its offset, at most ``max_concurrency`` in flight; outputs and duration."""
    limit: contextlib.AbstractAsyncContextManager[Any] = (
        asyncio.Semaphore(plan.max_concurrency) if plan.max_concurrency else contextlib.nullcontext()
    )
    connector = aiohttp.TCPConnector(limit=plan.max_concurrency or 0)
    timeout = aiohttp.ClientTimeout(total=6 * 3600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(prompt: str) -> RequestOutput:
            async with limit:
                return await send_request(session, url, _payload(plan, model, prompt), plan.input_len)

        started = time.perf_counter()
        tasks: list[asyncio.Task[RequestOutput]] = []
        try:
            for offset, prompt in zip(offsets, prompts):
                delay = started + offset - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(prompt)))
            outputs = await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        return list(outputs), time.perf_counter() - started


def same_file(written: str, uploaded: str) -> bool:
    """Does the upload's source (a path or a glob) name the file vLLM wrote? A relative path is
    relative to a working directory nobody knows, so it matches any absolute path it ends."""
    written, uploaded = posixpath.normpath(written), posixpath.normpath(uploaded)
    if fnmatch.fnmatchcase(written, uploaded):
        return True
    if posixpath.isabs(written) != posixpath.isabs(uploaded):
        absolute, relative = (written, uploaded) if posixpath.isabs(written) else (uploaded, written)
        return fnmatch.fnmatchcase(absolute, f"*/{relative}")
    return False


def upload_object(
    source: str | None, destination: str | None, written: str | None
) -> tuple[str | None, str | None]:
    """``(gs:// object, None)`` the command uploads the result to, ``(None, None)`` without an upload,
    or ``(None, why)`` when the upload would fail because there is no such file."""
    if destination is None:
        return None, None
    if written is None:
        return None, f"{source}: No such file or directory (vllm bench serve saves only with --save-result)"
    if source is not None and not same_file(written, source):
        return None, f"{source}: No such file or directory (vllm bench serve saved its result to {written})"
    return (destination + posixpath.basename(written) if destination.endswith("/") else destination), None


async def _model(ctx: ProgramContext, plan: BenchPlan, base: str) -> tuple[str, str] | None:
    """``(name requests use, model id)``: ``--served-model-name``/``--model``, else ``data[0].id``
    and ``data[0].root`` of ``/v1/models``; ``None`` (logged) if the server cannot tell."""
    if plan.model is not None:
        return plan.served_model_name or plan.model, plan.model
    ctx.log("Model not specified, fetching first model from server...")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            async with session.get(f"{base}/v1/models") as response:
                response.raise_for_status()
                card = (await response.json())["data"][0]
        name, model_id = card["id"], card.get("root") or card["id"]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, LookupError, TypeError) as error:
        ctx.log(f"error: Failed to fetch models from server at {base}/v1/models: {error!r}")
        return None
    ctx.log(f"First model name: {name}, first model id: {model_id}")
    return name, model_id


def _setup(plan: BenchPlan, model_id: str, date: str) -> dict[str, Any]:
    """The run's settings, first in vLLM's result."""
    return {
        "date": date,
        "endpoint_type": plan.backend,
        "backend": plan.backend,
        "label": plan.label,
        "model_id": model_id,
        "tokenizer_id": plan.tokenizer or model_id,
        "num_prompts": plan.num_prompts,
        "request_rate": plan.request_rate if math.isfinite(plan.request_rate) else "inf",
        "burstiness": plan.burstiness,
        "max_concurrency": plan.max_concurrency,
    }


def _log_failures(ctx: ProgramContext, outputs: Sequence[RequestOutput]) -> None:
    failed = [o for o in outputs if not o.success]
    if failed:
        ctx.log("Failed requests during benchmark run detected (capping to 10):")
        for index, output in enumerate(failed[:10]):
            ctx.log(f"Error {index}: {output.error}")
    if len(failed) == len(outputs):
        ctx.log("UserWarning: All requests failed. This is likely due to a misconfiguration on the benchmark "
                "arguments.")


async def _save(ctx: ProgramContext, plan: BenchPlan, result: Mapping[str, Any]) -> int:
    """Write the result where the command uploads it, or log it; 1 if the upload would fail."""
    source, destination = copy_destination(command_tokens(ctx.argv, ctx.env))
    written = plan.result_path(result["model_id"], result["date"]) if plan.save_result else None
    uri, problem = upload_object(source, destination, written)
    if problem is not None:
        ctx.log(f"error: {problem}")
        return 1
    if uri is not None:
        await ctx.gcs.write(uri, json.dumps(result).encode())
        ctx.log(f"result saved to {uri}")
    elif written is not None:
        ctx.log(f"result saved to {written} (not uploaded: no gs:// destination in the command)")
        ctx.log(json.dumps(result))
    return 0


async def run(ctx: ProgramContext) -> int:
    try:
        plan = BenchPlan.from_command(ctx.argv, ctx.env)
    except BadArgument as error:
        ctx.log(f"error: {error}")
        return 1
    address = await ctx.resolve(plan.host, plan.port)
    if address is None:
        ctx.log(f"error: cannot connect to {plan.host}:{plan.port}: no such service or port")
        return 1
    base = f"http://{address[0]}:{address[1]}{plan.path_prefix}"
    model = await _model(ctx, plan, base)
    if model is None:
        return 1
    rng = random.Random(plan.seed)
    prompts = synthetic_prompts(plan, rng)
    offsets = arrival_offsets(plan.num_prompts, plan.request_rate, plan.burstiness, rng)
    ctx.log(f"Traffic request rate: {plan.request_rate}")
    distribution = "Poisson process" if plan.burstiness == 1 else "Gamma distribution"
    ctx.log(f"Burstiness factor: {plan.burstiness} ({distribution})")
    ctx.log(f"Maximum request concurrency: {plan.max_concurrency}")
    ctx.log("Starting main benchmark run...")
    outputs, duration = await run_requests(plan, base + plan.endpoint, model[0], prompts, offsets)
    _log_failures(ctx, outputs)
    date = ctx.clock.utcnow().strftime("%Y%m%d-%H%M%S")
    result = {**_setup(plan, model[1], date), **measure(outputs, duration, plan)}
    for line in summary_lines(result, plan):
        ctx.log(line)
    ignored = [m for m in plan.metrics_asked if m not in METRICS]
    if ignored:
        ctx.log(f"warning: --percentile-metrics: {', '.join(ignored)} not measured")
    if not plan.save_detailed:  # as vLLM does: the per-request lists only with --save-detailed
        for name in DETAILED_FIELDS:
            result.pop(name, None)
    return await _save(ctx, plan, result)

"""vLLM's benchmark result, from the requests the ``vllm bench serve`` stand-in measured: the
metric set and summary of ``vllm/benchmarks/serve.py`` (``{mean,median,std}_{m}_ms`` and
``p{P}_{m}_ms`` per selected metric, throughputs, the peaks) and the summary it prints."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pathways_airflow_testing.programs.benchmark import percentile

if TYPE_CHECKING:
    from pathways_airflow_testing.programs.vllm_bench import BenchPlan, RequestOutput

METRICS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}


def peak_tokens_per_second(done: Sequence[RequestOutput]) -> float:
    """The most token chunks received in one second of the run (whole seconds from the first send)."""
    if not done:
        return 0.0
    origin = min(o.start_time for o in done)
    buckets: dict[int, int] = {}
    for output in done:
        moment = output.start_time + output.ttft
        for gap in [0.0, *output.itl]:
            moment += gap
            second = int(moment - origin)
            buckets[second] = buckets.get(second, 0) + 1
    return float(max(buckets.values()))


def peak_concurrency(done: Sequence[RequestOutput]) -> int:
    """The most requests in flight at once, over half-open ``[start, start + latency)`` intervals."""
    events = sorted([(o.start_time, 1) for o in done] + [(o.start_time + o.latency, -1) for o in done])
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def _percentile_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def metric_summary(metric: str, seconds: Sequence[float], percentiles: Sequence[float]) -> dict[str, float]:
    """``mean``, ``median``, ``std`` (population) and the percentiles of one metric, in ms."""
    values = [s * 1000 for s in seconds] or [0.0]
    summary = {
        f"mean_{metric}_ms": statistics.fmean(values),
        f"median_{metric}_ms": percentile(values, 50),
        f"std_{metric}_ms": statistics.pstdev(values),
    }
    for p in percentiles:
        summary[f"p{_percentile_word(p)}_{metric}_ms"] = percentile(values, p)
    return summary


def measure(outputs: Sequence[RequestOutput], duration: float, plan: BenchPlan) -> dict[str, Any]:
    """vLLM's benchmark result from the measured requests, failed ones counted but not timed."""
    done = [o for o in outputs if o.success]
    output_lens = [o.output_tokens if o.success else 0 for o in outputs]
    total_in, total_out = sum(o.prompt_len for o in done), sum(output_lens)
    span = max(duration, 1e-9)
    result: dict[str, Any] = {
        "duration": duration,
        "completed": len(done),
        "failed": len(outputs) - len(done),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / span,
        "request_goodput": None,
        "output_throughput": total_out / span,
        "total_token_throughput": (total_in + total_out) / span,
        "input_lens": [o.prompt_len for o in outputs],
        "output_lens": output_lens,
        "ttfts": [o.ttft for o in outputs],
        "itls": [o.itl for o in outputs],
        "errors": [o.error for o in outputs],
        "max_output_tokens_per_s": peak_tokens_per_second(done),
        "max_concurrent_requests": peak_concurrency(done),
    }
    samples = {
        "ttft": [o.ttft for o in done],
        "tpot": [(o.latency - o.ttft) / (o.output_tokens - 1) for o in done if o.output_tokens > 1],
        "itl": [gap for o in done for gap in o.itl],
        "e2el": [o.latency for o in done],
    }
    for metric in plan.percentile_metrics:
        result.update(metric_summary(metric, samples[metric], plan.metric_percentiles))
    return result


def _row(label: str, value: object) -> str:
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{label:<40} {text:<10}".rstrip()


def summary_lines(result: Mapping[str, Any], plan: BenchPlan) -> list[str]:
    """The summary vLLM prints, for the container's log."""
    lines = [f"{' Serving Benchmark Result ':=^50}", _row("Successful requests:", result["completed"]),
             _row("Failed requests:", result["failed"])]  # fmt: skip
    if plan.max_concurrency is not None:
        lines.append(_row("Maximum request concurrency:", plan.max_concurrency))
    if math.isfinite(plan.request_rate):
        lines.append(_row("Request rate configured (RPS):", float(plan.request_rate)))
    for label, key in (
        ("Benchmark duration (s):", "duration"), ("Total input tokens:", "total_input_tokens"),
        ("Total generated tokens:", "total_output_tokens"),
        ("Request throughput (req/s):", "request_throughput"),
        ("Output token throughput (tok/s):", "output_throughput"),
        ("Peak output token throughput (tok/s):", "max_output_tokens_per_s"),
        ("Peak concurrent requests:", "max_concurrent_requests"),
        ("Total token throughput (tok/s):", "total_token_throughput"),
    ):  # fmt: skip
        lines.append(_row(label, result[key]))
    for metric in plan.percentile_metrics:
        name = METRICS[metric]
        lines += [f"{f' {name} ':-^50}", _row(f"Mean {name} (ms):", result[f"mean_{metric}_ms"]),
                  _row(f"Median {name} (ms):", result[f"median_{metric}_ms"])]  # fmt: skip
        for p in plan.metric_percentiles:
            word = _percentile_word(p)
            lines.append(_row(f"P{word} {name} (ms):", result[f"p{word}_{metric}_ms"]))
    return [*lines, "=" * 50]

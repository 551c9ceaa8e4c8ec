"""The chaos suite's results: one record per scenario run, and the summary written at the end."""

from __future__ import annotations

import math

from tests.support.chaos.plan import SPEED

RESULTS: list[dict] = []
"""One entry per scenario run in this session (filled by test_chaos.py, read by the chaos conftest)."""


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _spread(values: list[float]) -> dict:
    return {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values) if values else None}


def _less_recomputed(results: list[dict]) -> dict[str, list[float]]:
    """Each disruption's loss without the steps done again (those the checkpoint period decides),
    by kind, with every disruption under ``all``."""
    by_kind: dict[str, list[float]] = {}
    for r in results:
        redone = r.get("recomputed") or []
        if len(redone) != len(r["losses"]):
            continue
        for kind, loss, again in zip(r["loss_kinds"], r["losses"], redone):
            if kind != "evict":
                for key in (kind, "all"):
                    by_kind.setdefault(key, []).append(round(max(0.0, loss - again), 1))
    return by_kind


def features_drawn(results: list[dict]) -> dict:
    """How many scenarios drew each feature added to the plans later: maintenance announced before
    the task (by ``maintenance_window``), elastic slices (with the slice losses ridden out) and
    JobSet's execution attempts counted."""
    windows: dict[str, int] = {}
    for r in results:
        if r.get("maintenance_window"):
            windows[r["maintenance_window"]] = windows.get(r["maintenance_window"], 0) + 1
    elastic = [r for r in results if r.get("elastic_slices")]
    return {
        "announced_maintenance": {"scenarios": sum(windows.values()), "by_maintenance_window": dict(sorted(windows.items()))},
        "elastic_slices": {"scenarios": len(elastic), "slice_losses_ridden_out": sum(r.get("ridden_out") or 0 for r in elastic)},
        "execution_attempts_counted": sum(1 for r in results if r.get("jobset_gates")),
    }


def summary(results: list[dict], speed: float = SPEED) -> dict:
    by_kind: dict[str, list[float]] = {}
    for r in results:
        for kind, loss in zip(r["loss_kinds"], r["losses"]):
            by_kind.setdefault(kind, []).append(loss)
    counts: dict[str, int] = {}
    for r in results:
        for kind in r["event_kinds"]:
            counts[kind] = counts.get(kind, 0) + 1
    truths: dict[str, int] = {}
    for r in results:
        truths[r["expected"]] = truths.get(r["expected"], 0) + 1
    disruption_losses = [loss for kind, values in by_kind.items() if kind != "evict" for loss in values]
    with_outages = [
        loss for r in results for kind, loss in zip(r["loss_kinds"], r.get("losses_with_outages") or r["losses"]) if kind != "evict"
    ]
    return {
        "scenarios_run": len(results),
        "scenarios_with_violations": sum(1 for r in results if r["violations"]),
        "violations_per_1000_scenarios": round(1000 * sum(1 for r in results if r["violations"]) / len(results), 1) if results else None,
        "violations": sum(len(v) for r in results for v in r["violations"].values()),
        "failing_seeds": [r["seed"] for r in results if r["violations"]],
        "by_invariant": {
            name: sum(1 for r in results if name in r["violations"])
            for name in sorted({n for r in results for n in r["violations"]})
        },
        "truths": truths,
        "event_counts": counts,
        "features_drawn": features_drawn(results),
        "disruptions_measured": len(disruption_losses),
        "extra_time_lost_per_disruption_simulated_seconds": {
            "p50": percentile(disruption_losses, 50),
            "p99": percentile(disruption_losses, 99),
            "max": max(disruption_losses) if disruption_losses else None,
        },
        "extra_time_lost_per_disruption_with_api_outages_simulated_seconds": {
            "p50": percentile(with_outages, 50),
            "p99": percentile(with_outages, 99),
            "max": max(with_outages) if with_outages else None,
        },
        "extra_time_lost_less_recomputed_steps_by_kind_simulated_seconds": {
            kind: _spread(values) for kind, values in sorted(_less_recomputed(results).items())
        },
        "extra_time_lost_per_disruption_with_a_late_collector_simulated_seconds": _spread(
            [loss for r in results if r.get("collector_delay") for kind, loss in zip(r["loss_kinds"], r["losses"]) if kind != "evict"]
        ),
        "extra_time_lost_per_disruption_real_seconds_p99": (
            round(percentile(disruption_losses, 99) / speed, 2) if disruption_losses else None
        ),
        "extra_time_lost_by_kind_simulated_seconds": {
            kind: {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values)}
            for kind, values in sorted(by_kind.items())
        },
        "operator_seconds_lost_p99": percentile([s for r in results for s in r["operator_seconds_lost"]], 99),
        "wall_seconds": {
            "total": round(sum(r["wall_seconds"] for r in results), 1),
            "p50": percentile([r["wall_seconds"] for r in results], 50),
            "max": max((r["wall_seconds"] for r in results), default=None),
        },
        "scenarios": results,
    }

"""The chaos suite: one test per seed; every invariant is checked in every scenario."""

from __future__ import annotations

import json

import pytest

from tests.support.chaos.harness import Scenario
from tests.support.chaos.invariants import violations
from tests.support.chaos.plan import plan
from tests.support.chaos.report import RESULTS




def test_scenario(chaos_cluster, chaos_seed):
    scenario = plan(chaos_seed)
    record = Scenario(chaos_cluster, scenario).run()
    found = violations(record.observations)
    RESULTS.append(
        {
            "seed": chaos_seed,
            "backend": scenario.backend,
            "mode": scenario.mode,
            "expected": scenario.expected,
            "outcome": record.observations.outcome,
            "violations": found,
            "losses": record.losses,
            "losses_with_outages": record.losses_with_outages,
            "recomputed": record.recomputed,
            "collector_delay": scenario.collector_delay,
            "maintenance_window": scenario.announced.policy if scenario.announced else None,
            "elastic_slices": scenario.elastic_slices,
            "jobset_gates": list(scenario.jobset_gates),
            "ridden_out": record.observations.ridden_out,
            "loss_kinds": record.loss_kinds,
            "operator_seconds_lost": record.operator_seconds_lost,
            "event_kinds": sorted({e.kind for e in scenario.events}
                                  | ({"crash_after_submit"} if scenario.crash_after_submit else set())
                                  | ({"crash_before_complete"} if scenario.crash_before_complete else set())
                                  | ({"user_failure"} if scenario.fail_at_step is not None else set())
                                  | ({"timeout"} if scenario.timeout_seconds else set())),
            "fired": record.fired,
            "tries": record.tries,
            "wall_seconds": record.wall_seconds,
            "error": record.error,
        }
    )
    if found:
        pytest.fail(
            f"chaos seed {chaos_seed} broke {len(found)} invariant(s):\n"
            + "\n".join(f"  {name}: {'; '.join(items)}" for name, items in found.items())
            + f"\nplan:\n{scenario.describe()}\nfired: {json.dumps(record.fired)}\ntask error: {record.error}\n"
            f"replay: .venv/bin/pytest tests/chaos/test_chaos.py -p no:cacheprovider --chaos-seed {chaos_seed}",
            pytrace=False,
        )

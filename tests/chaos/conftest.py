"""The chaos suite's options, its own local cluster, and the summary written at the end.

``--chaos-scenarios N`` (or ``$PATHWAYS_CHAOS_SCENARIOS``; default 50) scenarios run, seeds
``base, base+1, …`` from ``--chaos-base-seed`` (or ``$PATHWAYS_CHAOS_BASE_SEED``; fixed, so CI
runs are reproducible); ``--chaos-seed S`` replays one. The default run (no range given) also
runs :data:`REGRESSION_SEEDS`. The summary (scenarios run, invariant
violations, extra time lost per disruption) goes to ``$PATHWAYS_CHAOS_REPORT`` (default
``chaos-report.json`` under pytest's base temp directory) and is printed at the end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.chaos.plan import SLICE_LOSS_DETECTION, SPEED, TPU_POOLS
from tests.support.chaos.report import RESULTS, summary

DEFAULT_SCENARIOS = 50
DEFAULT_BASE_SEED = 8_000


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos")
    group.addoption("--chaos-scenarios", type=int, default=None, help=f"how many chaos scenarios (default {DEFAULT_SCENARIOS}, or $PATHWAYS_CHAOS_SCENARIOS)")
    group.addoption("--chaos-seed", type=int, action="append", default=None, help="replay this scenario seed (repeatable)")
    group.addoption("--chaos-base-seed", type=int, default=None, help=f"first seed (default {DEFAULT_BASE_SEED}, or $PATHWAYS_CHAOS_BASE_SEED)")


def chaos_seeds(config: pytest.Config) -> list[int]:
    replay = config.getoption("--chaos-seed")
    if replay:
        return list(replay)
    count = config.getoption("--chaos-scenarios") or int(os.environ.get("PATHWAYS_CHAOS_SCENARIOS") or DEFAULT_SCENARIOS)
    base = config.getoption("--chaos-base-seed") or int(os.environ.get("PATHWAYS_CHAOS_BASE_SEED") or DEFAULT_BASE_SEED)
    chosen = [base + i for i in range(count)]
    default_run = (count, base) == (DEFAULT_SCENARIOS, DEFAULT_BASE_SEED)
    return chosen + [seed for seed in REGRESSION_SEEDS if seed not in chosen] if default_run else chosen


REGRESSION_SEEDS: tuple[int, ...] = (91003, 91052, 91064, 91137, 78028, 91042, 320090, 960112, 960335, 960099, 970367, 970085, 990043, 1040074, 1040129, 1040388, 1060320, 1070330)
"""Seeds from ranges CI does not run that once broke an invariant, each fixed since: a user's bug
resubmitted after a re-created trigger found its head pod gone (91003, 91064), after it struck
while no trigger watched and only the JobSet's condition said so (91052, 91137), or after the
JobSet's policy failed it with no pod left and the worker crashed before acting (78028); a
PathwaysJob attempt nobody saw run read as a bug when its slice was lost (91042); a retry that
found its disrupted attempt failed submitted the next while a late collector left the old head
running (320090); slice losses the program rode out missing from the result: one a triggerer restart
hid before any note of it was written, the worker Jobs' count the only trace left (960112), and those
a crashed worker's retry found written on the workload it reused (960335); a retry making the
resubmission after a disruption its crashed try could not make waited out maintenance on one slice
while others were free (960099); a success whose first look came after the end, a loss ridden out
before it that no look saw (970367); with the provider's retries paced in cluster time, a call that
gave up after 80 s inside an API outage of 5 minutes: the resubmission after a disruption failed
the task and left its workload (970085), and a kill's delete left the workload running (990043);
where a resubmission resumed read from a later workload's program: one a later try submitted after
it failed (1040074), and the head of a Kueue re-admission after a triggerer restart (1040129); a restart held up by a late
collector whose Jobs' delete, tried again after an API fault, took the next attempt's Jobs of the same
names, and the head their loss failed was read as a bug (1040388); a slice lost as a retry re-attached,
its workers replaced on another slice before the new wait recorded where they ran, so only healthy
nodes were left to vouch when the head failed of the loss (1060320); with elastic slices, a second slice
loss the program rode out inside an API outage that outlasted the run, a triggerer restart between:
the nodes it had run on were still down (or back) when its own bug failed it later, and read as the
cause (1070330)."""


KNOWN_VIOLATIONS: dict[int, str] = {
    810013: (
        "elastic slices: the wait that saw a slice loss ridden out is replaced (a triggerer restart, the API slowed by a fault) "
        "before its note of the recovery is written, and the next wait's first look finds the workload ended with its worker "
        "Jobs gone: nothing left tells of the loss, which is missing from the result's disruptions"
    ),
}
"""Seeds whose violation is a known, open bug: reported as xfail (and as XPASS when it does not show)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "chaos_seed" in metafunc.fixturenames:
        seeds = [
            pytest.param(seed, marks=pytest.mark.xfail(reason=KNOWN_VIOLATIONS[seed], strict=False))
            if seed in KNOWN_VIOLATIONS
            else seed
            for seed in chaos_seeds(metafunc.config)
        ]
        metafunc.parametrize("chaos_seed", seeds, ids=lambda s: f"seed{s}")


@pytest.fixture(scope="session")
def chaos_cluster(request: pytest.FixtureRequest):
    """A speed-60 cluster with six v5e 2x4 slices, so several can be down at once."""
    from pathways_airflow.testing import LocalCluster, NodePool, tpu_pool

    crds = request.config.getoption("--pathways-crds", default=None) or os.environ.get("PATHWAYS_AIRFLOW_CRDS")
    pools = [NodePool("default-pool", "n2-standard-64", nodes=3), *(tpu_pool(name, "ct5lp-hightpu-4t", "2x4") for name in TPU_POOLS)]
    cluster = LocalCluster(node_pools=pools, crds=[crds] if crds else None, speed=SPEED, slice_loss_detection=SLICE_LOSS_DETECTION)
    with cluster, cluster.client_environment_set():
        yield cluster


@pytest.fixture(autouse=True)
def provider_pauses_in_cluster_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider's pauses that wait on the cluster, scaled to its speed, for each chaos test only
    (the cluster tests of the same session keep the real ones).

    - The margin given a late garbage collector (5 s): the plans make the collector late in
      cluster time (10, 30 or 120 s: a fraction of a real second at speed 60). Unscaled, the margin
      would be 300 s of this cluster's time, the collector would always come first, and the
      late-collector scenarios would measure its delay instead of the provider's answer to it.
    - The pauses before the provider asks the Kubernetes API again after a failure (a call's
      retries, a watch's reconnects, the looks for a deleted workload's pods): the plans' outages
      last 60, 120 or 300 s of cluster time (1 to 5 real seconds), their bursts of errors a few
      answers. On a real cluster the pauses double from a tenth of a second to a cap of seconds,
      so a burst costs a second or two and the first try after an outage comes at most a cap late.
      In real seconds against a cluster running 60 times faster, four errors in a row would cost a
      minute and a half of cluster time and an outage's overshoot minutes: the time lost would
      measure the test's clock, not the provider. Scaled, each costs what it would on a real
      cluster, and a call rides out an outage for the cluster time it would for real.
    """
    from pathways_airflow.hooks import api, reclaim as reclaim_looks
    from pathways_airflow.state import reclaim
    from pathways_airflow.triggers import watch

    pauses = (
        (reclaim, "COLLECTOR_MARGIN_SECONDS"),
        (api, "FIRST_RETRY_SECONDS"), (api, "MAX_RETRY_SECONDS"), (watch, "FIRST_BACKOFF_SECONDS"), (watch, "MAX_BACKOFF_SECONDS"),
        (reclaim_looks, "FIRST_POLL_SECONDS"), (reclaim_looks, "POLL_SECONDS"),
    )
    for module, name in pauses:
        monkeypatch.setattr(module, name, getattr(module, name) / SPEED)


def report_path(config: pytest.Config) -> Path:
    configured = os.environ.get("PATHWAYS_CHAOS_REPORT")
    if configured:
        return Path(configured)
    factory = getattr(config, "_tmp_path_factory", None)
    base = factory.getbasetemp() if factory is not None else Path.cwd()
    return Path(base) / "chaos-report.json"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not RESULTS:
        return
    data = summary(RESULTS)
    path = report_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str))
    short = {k: v for k, v in data.items() if k != "scenarios"}
    terminalreporter.write_sep("=", "chaos suite summary")
    terminalreporter.write_line(json.dumps(short, indent=1, default=str))
    terminalreporter.write_line(f"full report: {path}")
    if data["failing_seeds"]:
        terminalreporter.write_line(
            "replay: " + " ".join(f"--chaos-seed {s}" for s in data["failing_seeds"])
            + "  (.venv/bin/pytest tests/chaos/test_chaos.py -p no:cacheprovider ...)"
        )

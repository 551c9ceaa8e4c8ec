"""A verdict the watches could still change is final as soon as a change makes it final.

The PathwaysJob's watch can run ahead of the pods' watch: a program whose slice was shut down
looks like a user's bug until the workers' ``DisruptionTarget`` arrives. ``_settled_verdict``
looks again at each change the watches bring, for at most ``VERDICT_SETTLE_LIMIT_SECONDS``, and
returns at the change that makes the disruption known; a fixed pause before one second look
reported it a second late. Real watch caches filled with the recorded fixture; only the nodes and
the scheduler's events, which need an API, are given.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pathways_airflow import well_known
from pathways_airflow.hooks.pathways import ClusterTarget
from pathways_airflow.resources import JOB, JOBSET, PATHWAYSJOB, POD
from pathways_airflow.state.disruption import Classification, Verdict, worth_a_second_look
from pathways_airflow.triggers import workload
from pathways_airflow.triggers.pruning import pruned_job, pruned_jobset, pruned_pathwaysjob, pruned_pod
from pathways_airflow.triggers.watch import SharedWatch, by_label
from pathways_airflow.triggers.workload import PathwaysJobTrigger, observe

pytestmark = [pytest.mark.unit, pytest.mark.pure]

FIELDS: dict[str, Any] = json.loads((Path(__file__).parent / "fixtures/status/failed_disruption_last_seen.json").read_text())["observation"]
NAME, NAMESPACE, BACKEND = FIELDS["name"], FIELDS["namespace"], FIELDS["backend"]
DISRUPTED = [p for p in FIELDS["pods"] if any(c["type"] == "DisruptionTarget" for c in p["status"]["conditions"])]
SHUT_DOWN = {p["spec"]["nodeName"] for p in DISRUPTED}
NODES = [
    {"metadata": {"name": n}, "status": {"conditions": [{"type": "Ready", "status": "Unknown" if n in SHUT_DOWN else "True", "reason": "NodeStatusUnknown"}]}}
    for n in {p["spec"]["nodeName"] for p in FIELDS["pods"]}
]
"""The nodes now: those the disrupted workers ran on no longer report."""


def before_the_kubelet_said_why(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as a pods' watch running behind still shows it: no DisruptionTarget, no shutdown reason."""
    earlier = copy.deepcopy(pod)
    earlier["status"]["conditions"] = [c for c in earlier["status"]["conditions"] if c["type"] != "DisruptionTarget"]
    for key in ("reason", "message"):
        earlier["status"].pop(key, None)
    return earlier


@dataclass
class Settle:
    """One settle: the verdict before it and after it, when each change came and it returned, its looks."""

    first: Classification
    verdict: Classification
    began: float
    changes_at: list[float]
    returned_at: float
    looks: int
    events_listed: int


def settle(changes: list[tuple[float, list[dict[str, Any]]]]) -> Settle:
    """The settle of the fixture's workload while the pods' watch brings ``changes`` (seconds after it began, pods)."""

    async def scenario() -> Settle:
        target, by_jobset = ClusterTarget(), by_label(well_known.JOBSET_NAME)
        watches = {
            "jobsets": SharedWatch(target, JOBSET, NAMESPACE, None, prune=pruned_jobset),
            "pods": SharedWatch(target, POD, NAMESPACE, well_known.JOBSET_NAME, index=by_jobset, prune=pruned_pod),
            "jobs": SharedWatch(target, JOB, NAMESPACE, well_known.JOBSET_NAME, index=by_jobset, prune=pruned_job),
            "pathwaysjobs": SharedWatch(target, PATHWAYSJOB, NAMESPACE, None, prune=pruned_pathwaysjob),
        }
        watches["pathwaysjobs"].apply("ADDED", copy.deepcopy(FIELDS["pathwaysjob"]))
        watches["jobsets"].apply("ADDED", copy.deepcopy(FIELDS["jobset"]))
        for pod in FIELDS["pods"]:
            watches["pods"].apply("ADDED", before_the_kubelet_said_why(pod) if pod in DISRUPTED else copy.deepcopy(pod))
        changed = asyncio.Event()  # one event for all its watches, as the trigger subscribes
        subscriptions = {key: watch.subscribe([NAME], changed) for key, watch in watches.items()}
        for watch in watches.values():
            assert watch._task is not None
            watch._task.cancel()  # no API here: the caches are filled by hand

        trigger = PathwaysJobTrigger(name=NAME, namespace=NAMESPACE, backend=BACKEND, target=target.to_dict())
        looks: list[float] = []

        async def nodes_now(only_to_name_the_kind: bool) -> list[dict[str, Any]]:
            looks.append(time.monotonic())  # one read of the nodes per look
            return NODES

        listed: list[str] = []

        class SchedulerEvents:
            """The API as far as this verdict reads it: the namespace's ``Scheduled`` events (none recorded)."""

            async def list_page(self, resource: Any, namespace: str, **query: Any) -> dict[str, Any]:
                listed.append(resource.plural)
                return {"items": []}

        trigger._nodes = nodes_now  # type: ignore[method-assign]
        trigger.__dict__["hook"] = SchedulerEvents()
        observation = observe(BACKEND, NAME, NAMESPACE, watches)
        first = await trigger._classify(observation, {})
        looks.clear()
        began = time.monotonic()
        settling = asyncio.ensure_future(trigger._settled_verdict(observation, {}, subscriptions, watches))
        changes_at = []
        for after, pods in changes:
            await asyncio.sleep(max(0.0, began + after - time.monotonic()))
            for pod in pods:
                watches["pods"].apply("MODIFIED", copy.deepcopy(pod))
            changes_at.append(time.monotonic())
        verdict, _ = await settling
        return Settle(first, verdict, began, changes_at, time.monotonic(), len(looks), len(listed))

    return asyncio.run(scenario())


def test_the_disruption_arriving_after_the_failure_is_the_verdict_at_once():
    settled = settle([(0.2, DISRUPTED)])
    assert settled.first.verdict is Verdict.USER_ERROR and worth_a_second_look(settled.first)
    assert settled.verdict.verdict is Verdict.SLICE_FAILURE, settled.verdict
    assert any("DisruptionTarget" in e for e in settled.verdict.evidence)
    assert settled.returned_at - settled.changes_at[0] < 0.5, "a pause before the look reports the disruption late"
    assert settled.looks == 2, "the first look, and one at the change"


def test_each_change_is_looked_at_until_one_settles_the_verdict():
    replacement = copy.deepcopy(next(p for p in FIELDS["pods"] if p not in DISRUPTED and "worker" in p["metadata"]["name"]))
    replacement["metadata"]["resourceVersion"] = "130"
    replacement["status"]["podIP"] = "127.0.0.2"
    settled = settle([(0.2, [replacement]), (0.6, DISRUPTED)])
    assert settled.verdict.verdict is Verdict.SLICE_FAILURE, settled.verdict
    assert settled.changes_at[1] <= settled.returned_at < settled.changes_at[1] + 0.5
    assert settled.looks == 3, "the first look, and one at each change"
    assert settled.events_listed == 1, "the scheduler's events, a fleet's largest list, read once for all the looks"


def test_with_no_change_the_first_verdict_stands_at_the_limit(monkeypatch):
    monkeypatch.setattr(workload, "VERDICT_SETTLE_LIMIT_SECONDS", 0.5)
    settled = settle([])
    assert settled.verdict == settled.first and settled.verdict.verdict is Verdict.USER_ERROR
    assert 0.5 <= settled.returned_at - settled.began < 1.5
    assert settled.looks == 2, "the first look, and the one that ends the settle"

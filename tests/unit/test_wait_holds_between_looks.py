"""Between two looks a wait holds its memory, not what it read.

The shared caches hold every object packed (:mod:`~pathways_airflow.triggers.watch`); a look
unpacks its workload's objects to judge them. A wait that kept them while waiting for the next
change would hold a copy of every object of its workload, for days, thousands of times over in
one triggerer. Real watch caches filled with a recorded running workload; no API is needed for
a look at a running workload, and none is reached.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pathways_airflow.hooks.pathways import ClusterTarget
from pathways_airflow.triggers.watch import SharedWatch
from pathways_airflow.triggers.workload import PathwaysJobTrigger, nodes_watch, workload_watches

pytestmark = [pytest.mark.unit]

FIELDS: dict[str, Any] = json.loads((Path(__file__).parent / "fixtures/status/running_two_slices.json").read_text())["observation"]
POD_NAMES = {pod["metadata"]["name"] for pod in FIELDS["pods"]}


def pods_reachable_from(roots: list[Any]) -> list[str]:
    """The names of the recorded pods found as dicts in ``roots`` and what they hold: containers,
    dataclasses and plain objects' attributes, not the caches (they hold bytes), modules or code."""
    found, seen, pending = [], set(), list(roots)
    while pending:
        item = pending.pop()
        if id(item) in seen or isinstance(item, (SharedWatch, str, bytes, int, float, type)):
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            name = (item.get("metadata") or {}).get("name") if isinstance(item.get("metadata"), dict) else None
            if name in POD_NAMES and "status" in item:
                found.append(name)
            pending.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            pending.extend(item)
        elif dataclasses.is_dataclass(item):
            pending.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return sorted(found)


def test_a_wait_waiting_for_a_change_holds_none_of_the_objects_its_look_read() -> None:
    async def scenario() -> tuple[list[str], list[str], bool]:
        target = ClusterTarget()
        watches = workload_watches(target, FIELDS["namespace"], FIELDS["backend"])
        nodes = nodes_watch(target)
        watches["pathwaysjobs"].apply("ADDED", copy.deepcopy(FIELDS["pathwaysjob"]))
        watches["jobsets"].apply("ADDED", copy.deepcopy(FIELDS["jobset"]))
        for pod in FIELDS["pods"]:
            watches["pods"].apply("ADDED", copy.deepcopy(pod))
        trigger = PathwaysJobTrigger(name=FIELDS["name"], namespace=FIELDS["namespace"], backend=FIELDS["backend"], target=target.to_dict())
        waiting = trigger._wait()
        step = asyncio.ensure_future(waiting.__anext__())
        await asyncio.sleep(0)  # it subscribes: each watch starts its list, which is stopped here
        for watch in (*watches.values(), nodes):
            assert watch._task is not None
            watch._task.cancel()
            watch.synced.set()  # the caches are filled by hand: no API here
        for watch in watches.values():
            await watch._wake_everyone()
        for _ in range(50):
            await asyncio.sleep(0)
        frame = waiting.ag_frame
        assert frame is not None
        held = pods_reachable_from(list(frame.f_locals.values()))
        looked = frame.f_locals.get("memory")
        still_waiting = not step.done()
        read_now = [pod["metadata"]["name"] for pod in watches["pods"].related(FIELDS["name"])]
        step.cancel()
        await asyncio.gather(step, return_exceptions=True)
        await waiting.aclose()
        assert looked is not None and looked.state is not None, "the wait looked at its workload"
        return held, read_now, still_waiting

    held, read_now, still_waiting = asyncio.run(scenario())
    assert still_waiting, "a running workload: the wait goes on"
    assert sorted(read_now) == sorted(POD_NAMES), "a look reads every pod"
    assert held == [], f"the wait holds the pods its look read: {held}"

"""Waking every wait of a shared watch (a list, a relist, a failure) never blocks the loop for all of them."""

from __future__ import annotations

import asyncio

from pathways_airflow.hooks.pathways import ClusterTarget
from pathways_airflow.resources import POD
from pathways_airflow.triggers.watch import WAKE_BATCH, SharedWatch


def woken_counts_seen_by_another_task(waits: int) -> list[int]:
    """How many waits were woken at each turn of the loop another task got while all were woken."""

    async def scenario() -> list[int]:
        watch = SharedWatch(ClusterTarget(), POD, "default", None)
        subscriptions = [watch.subscribe([f"w{i}"]) for i in range(waits)]
        assert watch._task is not None
        watch._task.cancel()  # no API here: only the waking is under test
        seen: list[int] = []

        async def look_each_turn() -> None:
            while not seen or seen[-1] < waits:
                seen.append(sum(s.changed.is_set() for s in subscriptions))
                await asyncio.sleep(0)

        looking = asyncio.ensure_future(look_each_turn())
        await asyncio.sleep(0)
        await watch._wake_everyone()
        await asyncio.wait_for(looking, 5)
        return seen

    return asyncio.run(scenario())


def test_every_wait_is_woken_a_batch_per_turn_of_the_loop():
    seen = woken_counts_seen_by_another_task(2 * WAKE_BATCH + 1)
    assert seen[0] == 0 and seen[-1] == 2 * WAKE_BATCH + 1
    assert WAKE_BATCH in seen and 2 * WAKE_BATCH in seen, seen


def test_a_few_waits_are_woken_in_one_turn():
    seen = woken_counts_seen_by_another_task(3)
    assert seen == [0, 3]


def test_freezing_after_a_list_is_opt_in_and_freezes_what_is_held(monkeypatch):
    import gc

    from pathways_airflow.triggers.watch import freeze_what_is_held

    monkeypatch.delenv("AIRFLOW__PATHWAYS__FREEZE_GC_AFTER_SYNC", raising=False)
    before = gc.get_freeze_count()
    assert not freeze_what_is_held() and gc.get_freeze_count() == before

    monkeypatch.setenv("AIRFLOW__PATHWAYS__FREEZE_GC_AFTER_SYNC", "True")
    held = [{"metadata": {"name": f"w{i}"}, "items": [i]} for i in range(1000)]
    try:
        assert freeze_what_is_held()
        assert gc.get_freeze_count() >= before + len(held)
    finally:
        gc.unfreeze()


def test_a_watch_freezes_what_is_held_as_it_starts_before_its_list_answers(monkeypatch):
    """With the option on, Airflow's own objects are out of every later collection from the first
    watch on, not from the first list that answers (which may take seconds, or an outage long)."""
    import gc

    monkeypatch.setenv("AIRFLOW__PATHWAYS__FREEZE_GC_AFTER_SYNC", "True")

    async def scenario() -> tuple[int, int, bool]:
        watch = SharedWatch(ClusterTarget(), POD, "default", None)

        async def never_answers(*_args, **_kwargs):
            await asyncio.Event().wait()

        watch.hook.list_page = never_answers  # type: ignore[method-assign]
        gc.unfreeze()
        before = gc.get_freeze_count()
        subscription = watch.subscribe(["train"])
        for _ in range(3):
            await asyncio.sleep(0)
        frozen, synced = gc.get_freeze_count(), watch.synced.is_set()
        watch.unsubscribe(subscription)
        return before, frozen, synced

    try:
        before, frozen, synced = asyncio.run(scenario())
    finally:
        gc.unfreeze()
    assert not synced, "no list has answered"
    assert before == 0 and frozen > 10_000, (before, frozen)


def test_a_burst_of_watch_events_leaves_the_loop_turns_while_it_is_applied():
    from pathways_airflow.triggers.watch import EVENTS_PER_TURN

    burst = 2 * EVENTS_PER_TURN + 50

    async def scenario() -> list[int]:
        watch = SharedWatch(ClusterTarget(), POD, "default", None)

        async def one_chunk(*_args, **_kwargs):
            for index in range(burst):
                yield {"type": "MODIFIED", "object": {"metadata": {"name": f"p{index}", "namespace": "default", "resourceVersion": str(index)}}}
            await asyncio.Event().wait()  # then the stream stays open and quiet

        watch.hook.watch = one_chunk  # type: ignore[method-assign]
        cached: list[int] = []

        async def look_each_turn() -> None:
            while True:
                cached.append(len(watch.objects))
                await asyncio.sleep(0)

        looking = asyncio.ensure_future(look_each_turn())
        following = asyncio.ensure_future(watch._watch())
        for _ in range(10):
            await asyncio.sleep(0)
        following.cancel()
        looking.cancel()
        await asyncio.gather(following, looking, return_exceptions=True)
        return cached

    cached = asyncio.run(scenario())
    assert cached[-1] == burst
    assert EVENTS_PER_TURN in cached and 2 * EVENTS_PER_TURN in cached, cached


def test_the_echo_of_a_note_a_wait_wrote_is_cached_without_waking_anyone():
    """A wait's notes on its workload come back as a watch event that changes only the
    resourceVersion and this provider's annotations: on the watches of the workloads the notes are
    written on (``quiet``), cached for the next look, waking no one. A change to anything else (a
    status, a label, another's annotation) wakes the workload's waits; so does every change on a
    watch without that rule (a Job wait's, which keeps only names: ``pruned_to_name``)."""
    import copy

    def pathwaysjob(version: str, **annotations: str) -> dict:
        return {
            "apiVersion": "pathways-job.pathways.domain/v1", "kind": "PathwaysJob",
            "metadata": {"name": "train", "namespace": "default", "resourceVersion": version, "uid": "u-1",
                         "labels": {"app.kubernetes.io/managed-by": "pathways-airflow"}, "annotations": dict(annotations)},
            "spec": {"maxRestarts": 0}, "status": {"conditions": []},
        }

    first = pathwaysjob("1")
    noted = pathwaysjob("2", **{"pathways-airflow/phases": '[{"phase": "RUNNING"}]'})
    running = copy.deepcopy(noted)
    running["metadata"]["resourceVersion"] = "3"
    running["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    foreign = copy.deepcopy(running)
    foreign["metadata"]["resourceVersion"] = "4"
    foreign["metadata"]["annotations"]["kueue.x-k8s.io/queue-name"] = "q"
    events = [("ADDED", first), ("MODIFIED", noted), ("MODIFIED", running), ("MODIFIED", foreign)]

    async def scenario(quiet) -> list[tuple[str, bool]]:
        watch = SharedWatch(ClusterTarget(), POD, "default", None, quiet=quiet)
        subscription = watch.subscribe(["train"])
        assert watch._task is not None
        watch._task.cancel()
        gate = asyncio.Event()

        async def stream(*_args, **_kwargs):
            for kind, obj in events:
                yield {"type": kind, "object": copy.deepcopy(obj)}
                await gate.wait()
                gate.clear()
            await asyncio.Event().wait()

        watch.hook.watch = stream  # type: ignore[method-assign]
        following = asyncio.ensure_future(watch._watch())
        seen = []
        for _ in events:
            for _ in range(3):
                await asyncio.sleep(0)
            seen.append((watch.get("train")["metadata"]["resourceVersion"], subscription.changed.is_set()))
            subscription.changed.clear()
            gate.set()
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        return seen

    from pathways_airflow.triggers.pruning import changes_nothing_a_wait_acts_on

    assert asyncio.run(scenario(changes_nothing_a_wait_acts_on)) == [("1", True), ("2", False), ("3", True), ("4", True)]
    assert asyncio.run(scenario(None)) == [("1", True), ("2", True), ("3", True), ("4", True)], "a watch that says when to look wakes at every change"

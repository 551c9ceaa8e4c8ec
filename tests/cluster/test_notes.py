"""The loop's note writer against the local cluster: a burst of notes goes out at its rate, merged
per workload, and an ending's notes jump the queue with whatever of that workload still waits."""

from __future__ import annotations

import asyncio
import time

from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget, PathwaysHook
from pathways_airflow.resources import SERVICE
from pathways_airflow.triggers import notes
from pathways_airflow.triggers.notes import note_writer, notes_written


def _service(name: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}]},
    }


def test_a_burst_of_notes_goes_out_at_the_writers_rate_merged_per_workload(pathways_cluster, monkeypatch):
    monkeypatch.setattr(notes, "WRITES_PER_SECOND", 5.0)
    hook = PathwaysHook()
    names = [f"noted-{i}" for i in range(6)]
    for name in names:
        hook.create(_service(name))

    def annotations(name: str) -> dict[str, str]:
        return (hook.get(SERVICE, "default", name) or {})["metadata"].get("annotations") or {}

    async def burst() -> tuple[int, dict[str, str]]:
        writer = note_writer(ClusterTarget())
        try:
            for name in names:
                writer.later((SERVICE, "default", name), {"example.com/seen": "1"})
            writer.later((SERVICE, "default", names[0]), {"example.com/seen": "2", "example.com/where": "node-a"})

            async def landed() -> int:
                return sum("example.com/seen" in seen for seen in await asyncio.to_thread(lambda: [annotations(n) for n in names]))

            while not await landed():  # the first write's client is made on first use: under load it takes a while
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.15)
            early = await landed()
            await writer.now((SERVICE, "default", names[-1]), {"example.com/ended": "yes"})
            ended = await asyncio.to_thread(annotations, names[-1])
            await notes_written()
            return early, ended
        finally:
            await AsyncPathwaysHook.close_all()

    try:
        early, ended = asyncio.run(burst())
        assert 1 <= early <= 3, early  # 5 a second: 0.15 s after the first landed, the next may have, not the fourth
        assert ended == {"example.com/seen": "1", "example.com/ended": "yes"}  # its waiting note came along
        assert annotations(names[0]) == {"example.com/seen": "2", "example.com/where": "node-a"}  # merged, newer value
        assert all(annotations(name).get("example.com/seen") for name in names)
    finally:
        for name in names:
            hook.delete(SERVICE, "default", name)


def test_an_endings_notes_do_not_wait_for_a_held_write_and_still_land_last(pathways_cluster):
    """The API holds the background write for 3 s (a backoff through 500s); the ending's write is
    answered at once, and the older value the held write carries does not stay on top."""
    hook = PathwaysHook()
    hook.create(_service("noted-held"))
    workload = (SERVICE, "default", "noted-held")
    pathways_cluster.inject_fault(r"/services/noted-held$", status=None, latency=3.0, count=1, methods=["PATCH"], watch=False)

    async def ending() -> float:
        writer = note_writer(ClusterTarget())
        try:
            writer.later(workload, {"example.com/phase": "Running"})
            await asyncio.sleep(0.3)  # its write is in flight, held
            started = time.monotonic()
            await writer.now(workload, {"example.com/phase": "Failed"})
            took = time.monotonic() - started
            await notes_written()
            return took
        finally:
            await AsyncPathwaysHook.close_all()

    try:
        assert asyncio.run(ending()) < 2.0
        assert hook.get(SERVICE, "default", "noted-held")["metadata"]["annotations"] == {"example.com/phase": "Failed"}
    finally:
        pathways_cluster.clear_faults()
        hook.delete(SERVICE, "default", "noted-held")


def test_notes_that_may_wait_go_after_the_others_and_all_before_a_loop_ends(pathways_cluster):
    """The phases alone wait (a flapping slice rewrote them at every flap) while a note a verdict
    reads, noted after them, goes out at once; a worker's own loop writes what still waits before
    it ends."""
    hook = PathwaysHook()
    names = ("noted-phases", "noted-evidence")
    for name in names:
        hook.create(_service(name))

    def annotations(name: str) -> dict[str, str]:
        return (hook.get(SERVICE, "default", name) or {})["metadata"].get("annotations") or {}

    async def flapping() -> tuple[dict[str, str], dict[str, str], float]:
        writer = note_writer(ClusterTarget())
        try:
            writer.later((SERVICE, "default", names[0]), {"example.com/phases": "1"}, within=30.0)
            writer.later((SERVICE, "default", names[1]), {"example.com/ran-on": "node-a"})
            await asyncio.sleep(0.5)
            early = await asyncio.to_thread(lambda: {name: annotations(name) for name in names})
            started = time.monotonic()
            await notes_written()
            return early[names[0]], early[names[1]], time.monotonic() - started
        finally:
            await AsyncPathwaysHook.close_all()

    try:
        phases, evidence, flushed_in = asyncio.run(flapping())
        assert (phases, evidence) == ({}, {"example.com/ran-on": "node-a"})
        assert annotations(names[0]) == {"example.com/phases": "1"} and flushed_in < 5.0
    finally:
        for name in names:
            hook.delete(SERVICE, "default", name)

"""A log tail stays small however long a container's lines are (it goes into trigger events,
exception messages and the task log), and it always holds the end of the log: the exception
after a few dumped arrays is what a failure message must quote."""

from __future__ import annotations

import asyncio
import time

from pathways_airflow.hooks.api import LOG_LINE_CHARS
from pathways_airflow.hooks.pathways import LOG_TAIL_BYTES, AsyncPathwaysHook, PathwaysHook
from pathways_airflow.resources import POD

HUGE = 8 * 1024 * 1024


def a_pod_that_printed_three_huge_lines(cluster, name: str) -> None:
    hook = PathwaysHook()
    hook.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "python:3.11", "command": ["python3", "serve.py"],
                                 "env": [{"name": "PATHWAYS_TESTING_PROGRAM", "value": "idle"}]}]},
    })
    deadline = time.monotonic() + 30
    while (hook.get(POD, "default", name) or {}).get("status", {}).get("phase") != "Running":
        assert time.monotonic() < deadline, "the pod never ran"
        time.sleep(0.05)
    log = cluster.logs.log("default", name, "main")
    now = cluster.clock.now()
    cluster.call(lambda: log.lines.extend((now, f"tensor {i}: " + "9" * HUGE) for i in range(3)))
    traceback = ["Traceback (most recent call last):", '  File "train.py", line 12, in <module>', "ValueError: model_name 'llama9' is unknown"]
    cluster.call(lambda: log.lines.extend((now, line) for line in traceback))


def test_a_tail_of_megabyte_lines_is_bounded_in_bytes_and_per_line(pathways_cluster):
    a_pod_that_printed_three_huge_lines(pathways_cluster, "huge-lines")

    lines = PathwaysHook().read_log_tail("default", "huge-lines", "main", 30)

    async def read_async():
        try:
            return await AsyncPathwaysHook().read_log_tail("default", "huge-lines", "main", 30)
        finally:
            await AsyncPathwaysHook.close_all()

    for tail in (lines, asyncio.run(read_async())):
        assert tail and sum(len(line) for line in tail) <= LOG_TAIL_BYTES
        assert all(len(line) <= LOG_LINE_CHARS + 40 for line in tail)
        # limitBytes keeps the first 64 KiB of a window: the windows shrink until one comes back
        # whole, so the exception after the three 8 MB lines is in the tail, and they are not.
        assert tail[-1] == "ValueError: model_name 'llama9' is unknown" and tail[-3].startswith("Traceback"), tail[-3:]
        assert not any(line.startswith("tensor") for line in tail)
    PathwaysHook().delete(POD, "default", "huge-lines")


def test_a_last_line_longer_than_the_limit_is_quoted_from_its_beginning(pathways_cluster):
    a_pod_that_printed_three_huge_lines(pathways_cluster, "huge-last-line")
    log = pathways_cluster.logs.log("default", "huge-last-line", "main")
    pathways_cluster.call(lambda: log.lines.append((pathways_cluster.clock.now(), "RuntimeError: " + "x" * HUGE)))
    tail = PathwaysHook().read_log_tail("default", "huge-last-line", "main", 30)
    assert len(tail) == 1 and tail[0].startswith("RuntimeError: xxx") and "more characters)" in tail[0]
    PathwaysHook().delete(POD, "default", "huge-last-line")


def test_the_log_of_a_pod_that_is_gone_is_no_news_but_a_refusal_is(pathways_cluster, capfd):
    """A failed workload's pods are deleted while the task reads their logs: a 404 says nothing
    (the demo printed it twice as an error), any other failure says why."""
    assert PathwaysHook().read_log_tail("default", "never-was", "main", 30) == []
    assert "could not read the log" not in "".join(capfd.readouterr())
    pathways_cluster.inject_fault(r"/pods/never-was/log", status=403, count=1)
    assert PathwaysHook().read_log_tail("default", "never-was", "main", 30) == []
    assert "could not read the log of never-was/main (default)" in "".join(capfd.readouterr())

"""A wait rides out a Kubernetes API that is down, even when it is down as the wait starts.

The outage is the local API server answering 503 to every request for a while (a control-plane
upgrade, a regional blip). A trigger started during it must not end the task (and leave the
workload running unwatched) after a fixed number of failures; it waits until the API answers,
and gives up only after ``api_outage_seconds`` of failures or at the task's deadline.
"""

from __future__ import annotations

import threading
import time

from pathways_airflow.hooks.pathways import ClusterTarget
from pathways_airflow.resources import JOBSET
from pathways_airflow.triggers.workload import PathwaysJobTrigger
from tests.support.triggers import first_event
from tests.support.workloads import submit_training


def outage(cluster, seconds: float) -> threading.Thread:
    """Every request answers 503 from now for ``seconds`` real seconds (then the API is back)."""
    cluster.inject_fault(".*", status=503, count=1_000_000)

    def end() -> None:
        time.sleep(seconds)
        cluster.clear_faults()

    thread = threading.Thread(target=end, daemon=True)
    thread.start()
    return thread


def test_a_wait_started_during_an_outage_waits_for_the_api_and_sees_the_workload_finish(pathways_cluster):
    """Longer than the old limit of five rechecks before the first listing: the task still gets its result."""
    hook = submit_training("outage-start", steps=3)
    trigger = PathwaysJobTrigger(
        name="outage-start", namespace="default", backend="jobset", target=ClusterTarget().to_dict(), recheck_seconds=0.5
    )
    outage(pathways_cluster, 6.0)
    event = first_event(trigger, timeout=90)
    assert event["status"] == "finished" and event["state"]["phase"] == "SUCCEEDED", event
    hook.delete(JOBSET, "default", "outage-start")

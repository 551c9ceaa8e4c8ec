"""The janitor's rule, on workloads as the API lists them and answers as Airflow gives them."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import pytest

from pathways_airflow.spec import TaskIdentity, build_workload, render
from pathways_airflow.spec.names import TASK_KEY_LABEL
from pathways_airflow.state.janitor import (
    GRACE_PERIOD,
    judge,
    judge_all,
    owned_task,
    report_line,
    summary,
    tasks_to_ask,
    workload_chips,
)

FIXTURES = Path(__file__).parent / "fixtures" / "status"
CREATED = dt.datetime(2026, 11, 22, 7, 40, 45, tzinfo=dt.timezone.utc)
LATER = CREATED + GRACE_PERIOD + dt.timedelta(seconds=1)
TASK = TaskIdentity("weekly_training", "train", "scheduled__2026-11-22T00:00:00+00:00")
MAPPED = TaskIdentity("sweep", "train", "manual__1", map_index=3)


def observed(name: str = "running_two_slices.json") -> dict:
    return json.loads((FIXTURES / name).read_text())["observation"]


def ours(workload: dict, identity: TaskIdentity = TASK) -> dict:
    """The workload as the operator submits it: our labels and annotations on it."""
    labelled = copy.deepcopy(workload)
    labelled["metadata"].setdefault("labels", {}).update(identity.labels())
    labelled["metadata"].setdefault("annotations", {}).update(identity.annotations())
    return labelled


def rendered(backend: str, identity: TaskIdentity = TASK, **shape) -> dict:
    workload = build_workload(pathways_dir="gs://pathways-demo/tmp", image="maxtext", command=["train"], **{"tpu": "v5e", "topology": "2x4", **shape})
    manifest = render(workload, backend=backend, name=identity.workload_name(), namespace="default", labels=identity.labels(), annotations=identity.annotations())
    manifest["metadata"].update(creationTimestamp="2026-11-22T07:40:45Z", uid="0d6f1c3e")
    return manifest


@pytest.mark.parametrize("state", ["success", "failed", "skipped", "upstream_failed", "removed"])
def test_a_finished_task_instance_deletes_its_workload(state):
    verdict = judge(ours(observed()["pathwaysjob"]), (True, state), LATER)
    assert verdict.delete and verdict.state == state
    assert verdict.reason == f"task instance weekly_training/{TASK.run_id}/train is {state}"


@pytest.mark.parametrize("state", ["running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting", None])
def test_a_live_task_instance_or_one_a_retry_follows_keeps_its_workload(state):
    verdict = judge(ours(observed()["pathwaysjob"]), (True, state), LATER)
    assert not verdict.delete and verdict.reason == f"task instance is {state or 'none'}"


def test_a_task_instance_airflow_no_longer_has_deletes_its_workload():
    verdict = judge(ours(observed()["pathwaysjob"]), (False, None), LATER)
    assert verdict.delete and verdict.state == "not found"
    assert "no longer exists (its DAG run or task was deleted)" in verdict.reason


def test_nothing_younger_than_the_grace_period_is_deleted_whatever_airflow_says():
    workload = ours(observed()["pathwaysjob"])
    young = judge(workload, (False, None), CREATED + GRACE_PERIOD - dt.timedelta(seconds=1))
    assert not young.delete and young.reason == "younger than the grace period (10 min)"
    assert judge(workload, (True, "failed"), CREATED + dt.timedelta(seconds=31), dt.timedelta(seconds=30)).delete
    undated = copy.deepcopy(workload)
    del undated["metadata"]["creationTimestamp"]
    assert not judge(undated, (True, "failed"), LATER).delete


def test_only_a_workload_provably_ours_is_ever_deleted():
    foreign = observed()["pathwaysjob"]  # no labels at all
    assert owned_task(foreign) is None and not judge(foreign, (True, "failed"), LATER).delete
    relabelled = ours(foreign)
    relabelled["metadata"]["labels"][TASK_KEY_LABEL] = TaskIdentity("other", "t", "r").key
    verdict = judge(relabelled, (True, "failed"), LATER)
    assert not verdict.delete and verdict.reason.startswith("not provably ours")
    unmanaged = ours(foreign)
    del unmanaged["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    assert not judge(unmanaged, (True, "failed"), LATER).delete


def test_an_unknown_state_or_an_unanswered_question_keeps_the_workload():
    workload = ours(observed()["pathwaysjob"])
    assert not judge(workload, None, LATER).delete
    assert judge(workload, None, LATER).state == "unknown"
    assert "does not know (shutdown)" in judge(workload, (True, "shutdown"), LATER).reason


def test_a_workload_already_being_deleted_is_left_alone():
    workload = ours(observed()["pathwaysjob"])
    workload["metadata"]["deletionTimestamp"] = "2026-11-22T08:00:00Z"
    assert judge(workload, (True, "failed"), LATER).reason == "already being deleted"


def test_a_pathwaysjobs_own_jobset_goes_with_it_and_is_judged_once():
    observation = observed()
    workloads = [ours(observation["pathwaysjob"]), ours(observation["jobset"])]
    assert tasks_to_ask(workloads) == [TASK]
    verdicts = judge_all(workloads, {TASK: (True, "failed")}, LATER)
    assert [(v.kind, v.name, v.delete) for v in verdicts] == [("PathwaysJob", "steady", True)]
    assert verdicts[0].chips == 16  # 2 slices of v5e 2x4
    child = judge(ours(observation["jobset"]), (True, "failed"), LATER)
    assert not child.delete and child.reason == "part of PathwaysJob steady: it goes with that PathwaysJob"


def test_a_mapped_task_instance_is_named_with_its_map_index():
    workload = rendered("jobset", MAPPED)
    assert owned_task(workload) == MAPPED and tasks_to_ask([workload]) == [MAPPED]
    verdict = judge_all([workload], {MAPPED: (True, "success")}, LATER)[0]
    assert verdict.task_instance == "sweep/manual__1/train[3]" and verdict.delete
    assert judge_all([workload], {}, LATER)[0].state == "unknown"


@pytest.mark.parametrize(
    ("shape", "chips"),
    [({}, 8), ({"num_slices": 3}, 24), ({"tpu": "v6e", "topology": "1x1"}, 4), ({"tpu": "v5p", "topology": "2x2x2", "num_slices": 2}, 16)],
)
def test_the_chips_a_workload_holds_are_what_its_worker_pods_request(shape, chips):
    assert workload_chips(rendered("pathwaysjob", **shape)) == chips
    assert workload_chips(rendered("jobset", **shape)) == chips


def test_the_chips_of_a_workload_whose_manifest_does_not_say_are_unknown():
    broken = rendered("pathwaysjob")
    broken["spec"]["workers"][0]["topology"] = "9x9"
    assert workload_chips(broken) is None
    assert workload_chips({"kind": "Pod", "spec": {}}) is None


def test_the_report_says_what_was_decided_and_the_summary_what_was_freed():
    workloads = [rendered("jobset"), rendered("pathwaysjob", MAPPED)]
    verdicts = judge_all(workloads, {TASK: (True, "failed"), MAPPED: (True, "running")}, LATER)
    line = report_line(verdicts[0], acting=False)
    assert line == (
        f"JobSet default/{TASK.workload_name()} task=weekly_training/{TASK.run_id}/train state=failed "
        f"decision=would delete chips=8 reason: task instance weekly_training/{TASK.run_id}/train is failed"
    )
    assert "decision=delete " in report_line(verdicts[0], acting=True)
    assert "decision=keep " in report_line(verdicts[1], acting=True)
    assert summary(verdicts, []) == {"orphans": [f"JobSet/default/{TASK.workload_name()}"], "deleted": [], "chips_freed": 0, "kept": 1}
    assert summary(verdicts, verdicts[:1])["chips_freed"] == 8


def test_the_janitor_arguments_read_what_templates_render_and_refuse_the_rest():
    from pathways_airflow.spec.arguments import janitor_arguments
    from pathways_airflow.spec.errors import InvalidWorkloadSpec

    assert janitor_arguments("default", "600", "False") == ("default", 600.0, False)
    assert janitor_arguments("*", 0, True) == (None, 0.0, True)
    assert janitor_arguments(None, 60.5, "true") == (None, 60.5, True)
    with pytest.raises(InvalidWorkloadSpec) as refused:
        janitor_arguments("Bad_NS", "-1", "maybe")
    assert refused.value.fields == ("namespace", "grace_period_seconds", "dry_run")
    with pytest.raises(InvalidWorkloadSpec):
        janitor_arguments("default", "nan", None)

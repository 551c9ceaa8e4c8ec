"""What a workload keeps of why it stopped, and the verdict on a failure nobody watched.

The workloads are the local cluster's recordings (``fixtures/status``): a PathwaysJob whose head
failed first, as google/pathways-job mirrors its JobSet's ``Failed`` condition ("pathwaysJob
failed: ... (first failed job: <name>-pathways-head-0)"), with its pods gone. The nodes are the
local cluster's v5e 2x4 slice nodes, whose ``Ready`` condition moves its ``lastTransitionTime``
when a slice goes down and comes back.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from pathways_airflow.state.disruption import Classification, Verdict, classify
from pathways_airflow.run.submission import needs_nodes, plan_submission
from pathways_airflow.run.annotations import (
    DISRUPTION_SEEN_ANNOTATION,
    disruption_seen,
    disruption_seen_annotation,
    ended_by_annotation,
    verdict_after_the_fact,
)
from pathways_airflow_testing.nodes import node_manifests, tpu_pool

FIXTURES = Path(__file__).parent / "fixtures" / "status"
OBSERVATION = json.loads((FIXTURES / "failed_user_code_pathwaysjob.json").read_text())["observation"]
PATHWAYSJOB = OBSERVATION["pathwaysjob"]
CREATED = PATHWAYSJOB["metadata"]["creationTimestamp"]
SLICE = node_manifests(tpu_pool("tpu-v5e-2x4-0", "ct5lp-hightpu-4t", "2x4"))
OTHER_SHAPE = node_manifests(tpu_pool("tpu-v6e-4x4-0", "ct6e-standard-4t", "4x4"))
SLICE_FAILURE = Classification(Verdict.SLICE_FAILURE, ("node tpu-v5e-2x4-0-0: Ready=Unknown (NodeStatusUnknown)",))


def annotated(obj: dict, annotations: dict[str, str]) -> dict:
    changed = copy.deepcopy(obj)
    changed["metadata"].setdefault("annotations", {}).update(annotations)
    return changed


def came_back(nodes: list[dict], at: str) -> list[dict]:
    """The nodes after going down and coming back Ready at ``at``."""
    changed = copy.deepcopy(nodes)
    for node in changed:
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        ready["lastTransitionTime"] = at
    return changed


def later(timestamp: str, seconds: int) -> str:
    from datetime import datetime, timedelta

    moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ") + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_recording_is_a_pathwaysjob_whose_head_failed_first():
    message = next(c for c in PATHWAYSJOB["status"]["conditions"] if c["type"] == "Failed")["message"]
    assert message.startswith("pathwaysJob failed: ") and "(first failed job: bug-pj-pathways-head-0)" in message


def test_a_head_that_failed_first_on_healthy_unchanged_nodes_is_the_users_bug():
    verdict = verdict_after_the_fact(PATHWAYSJOB, [*SLICE, *OTHER_SHAPE])
    assert verdict.verdict is Verdict.USER_ERROR
    assert "bug-pj-pathways-head-0" in verdict.evidence[0]


def test_a_slice_still_down_is_no_bug_but_one_that_came_back_vouches_for_it():
    """A node that went down and came back cannot tell a slice the workload ran on from one it never
    used (another attempt's, down when it started): only a disruption now counts, and what a
    trigger saw while the workload ran (the disruption-seen record)."""
    down = copy.deepcopy(SLICE)
    for node in down:
        next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] = "Unknown"
    assert verdict_after_the_fact(PATHWAYSJOB, down).verdict is Verdict.UNKNOWN_INFRA
    assert verdict_after_the_fact(PATHWAYSJOB, came_back(SLICE, later(CREATED, 30))).verdict is Verdict.USER_ERROR
    assert verdict_after_the_fact(PATHWAYSJOB, [*SLICE, *OTHER_SHAPE]).verdict is Verdict.USER_ERROR


def test_without_the_nodes_nothing_vouches_for_a_bug():
    assert verdict_after_the_fact(PATHWAYSJOB, None).verdict is Verdict.UNKNOWN_INFRA


def test_a_disruption_seen_while_it_ran_outranks_the_head_failing_first():
    seen = annotated(PATHWAYSJOB, disruption_seen_annotation(0, SLICE_FAILURE))
    verdict = verdict_after_the_fact(seen, SLICE)
    assert verdict.verdict is Verdict.SLICE_FAILURE
    assert verdict.evidence[0].startswith("seen while it ran: node tpu-v5e-2x4-0-0")


def test_a_recorded_verdict_is_taken_as_recorded():
    ended = annotated(PATHWAYSJOB, ended_by_annotation("MAINTENANCE", ["node x: active maintenance"]))
    assert verdict_after_the_fact(ended, SLICE) == Classification(Verdict.MAINTENANCE, ("node x: active maintenance",))


def test_a_disruption_of_an_earlier_jobset_restart_says_nothing_of_this_one():
    jobset = annotated(OBSERVATION["jobset"], disruption_seen_annotation(0, SLICE_FAILURE))
    assert disruption_seen(jobset, 0) is not None
    assert disruption_seen(jobset, 1) is None
    assert disruption_seen(jobset, None) is not None, "a PathwaysJob does not say its attempt"


def test_a_malformed_or_non_disruption_record_is_no_record():
    for text in ("{not json", '["SLICE_FAILURE"]', '{"restart": 0, "verdict": "NOT_A_VERDICT"}', '{"restart": 0, "verdict": "USER_ERROR"}'):
        assert disruption_seen(annotated(PATHWAYSJOB, {DISRUPTION_SEEN_ANNOTATION: text}), 0) is None


def test_the_record_keeps_a_few_short_lines():
    record = disruption_seen_annotation(2, Classification(Verdict.MAINTENANCE, ("x" * 1000, "b", "c", "d")))
    data = json.loads(record[DISRUPTION_SEEN_ANNOTATION])
    assert data["restart"] == 2 and len(data["evidence"]) == 3 and len(data["evidence"][0]) == 300


def test_a_recorded_disruption_outranks_the_exit_code_a_trigger_still_sees():
    """The head exited 1 because its slice went away; the pods that showed it are gone."""
    seen = json.loads((FIXTURES / "failed_user_code_pathwaysjob_last_seen.json").read_text())["observation"]
    head = next(p for p in seen["pods"] if "pathways-head" in p["metadata"]["name"])
    jobset = seen["jobset"]
    assert classify(pods=[head], nodes=SLICE, jobset=jobset).verdict is Verdict.USER_ERROR
    verdict = classify(pods=[head], nodes=SLICE, jobset=jobset, recorded=SLICE_FAILURE)
    assert verdict.verdict is Verdict.SLICE_FAILURE


def test_a_retry_does_not_resubmit_a_bug_nobody_watched():
    failed = copy.deepcopy(PATHWAYSJOB)
    failed["metadata"]["labels"] = {"pathways-airflow/attempt": "0"}
    assert needs_nodes([failed])
    plan = plan_submission([failed], nodes=SLICE)
    assert plan.user_error is not None and plan.attempt == 0
    seen = annotated(failed, disruption_seen_annotation(0, SLICE_FAILURE))
    lost = plan_submission([seen], nodes=SLICE)
    assert lost.user_error is None and lost.attempt == 1
    recorded = annotated(failed, ended_by_annotation("USER_ERROR", ["pod p: container main exited 1"]))
    assert not needs_nodes([recorded]) and plan_submission([recorded]).user_error is not None


def test_a_jobset_with_the_user_error_rule_is_judged_by_the_rule_not_by_what_failed_first():
    """The ``jobset`` backend's failure policy fails it at once on the user's exit codes: a head
    that failed first while the JobSet ran out of restarts exited with a system code (xpk's 42)."""
    jobset = copy.deepcopy(OBSERVATION["jobset"])
    jobset["kind"] = "JobSet"
    jobset["status"]["conditions"] = [
        {"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts", "lastTransitionTime": later(CREATED, 9),
         "message": f"jobset failed due to reaching max number of restarts (first failed job: {jobset['metadata']['name']}-pathways-head-0)"}
    ]
    assert verdict_after_the_fact(jobset, SLICE).verdict is Verdict.USER_ERROR
    jobset["spec"]["failurePolicy"] = {"maxRestarts": 1, "rules": [{"name": "userErrorFailsJobSet", "action": "FailJobSet"}]}
    assert verdict_after_the_fact(jobset, SLICE).verdict is Verdict.UNKNOWN_INFRA

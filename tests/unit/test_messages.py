"""A failed workload's message: what happened, the evidence, and where to look, in that order."""

from pathways_airflow.run.messages import failing_container, workload_failure_message
from pathways_airflow.state.model import FailureCause, Observation, Phase, WorkloadState

FAILED = WorkloadState(Phase.FAILED, "JobSet failed", cause=FailureCause.USER_CODE, exit_code=3, pod="head-0", container="main")
HINT = "Look further with: kubectl -n ml describe jobset train-0"


def test_the_captured_failure_wins_over_what_the_cluster_still_shows():
    captured = {"pod": "head-1", "container": "main", "exit_code": 7, "log_tail": ["boom"]}
    assert failing_container(Observation("jobset", "train-0", "ml"), FAILED, captured) == ("head-1", "main", 7)
    assert failing_container(Observation("jobset", "train-0", "ml"), FAILED, None) == ("head-0", "main", 3)
    assert failing_container(Observation("jobset", "train-0", "ml"), WorkloadState(Phase.FAILED), None) is None


def test_the_message_quotes_the_log_and_ends_with_where_to_look():
    message = workload_failure_message(
        "jobset ml/train-0", FAILED, ("head-0", "main", 3), ["Traceback (most recent call last):", "ValueError: bad"],
        cloud_logging=False, hint=HINT,
    )
    assert message.splitlines() == [
        "jobset ml/train-0 failed: FAILED (USER_CODE, exit 3): JobSet failed.",
        "Container main of pod head-0 exited with code 3.",
        "Its last 2 log lines:",
        "  | Traceback (most recent call last):",
        "  | ValueError: bad",
        HINT,
    ]


def test_a_log_that_is_gone_is_said_so_and_points_to_cloud_logging_on_gke():
    gke = workload_failure_message("jobset ml/train-0", FAILED, ("head-0", "main", 3), [], cloud_logging=True, hint=HINT)
    assert "could not be read" in gke and "Cloud Logging link" in gke
    local = workload_failure_message("jobset ml/train-0", FAILED, ("head-0", "main", 3), [], cloud_logging=False, hint=HINT)
    assert "Cloud Logging" not in local
    assert workload_failure_message("jobset ml/train-0", FAILED, None, [], cloud_logging=True, hint=HINT).count("\n") == 1

"""The one reader of status.conditions, on the shapes the API server and controllers write."""

from pathways_airflow.state.conditions import condition, conditions, is_true, true_condition

READY_NODE = {
    "kind": "Node",
    "status": {
        "conditions": [
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
        ]
    },
}
SUSPENDED_JOBSET = {
    "kind": "JobSet",
    "status": {"conditions": [{"type": "Suspended", "status": "False", "reason": "ResumeJobs"}, "garbage", None]},
}


def test_condition_is_found_whatever_its_status():
    assert condition(SUSPENDED_JOBSET, "Suspended")["reason"] == "ResumeJobs"
    assert condition(READY_NODE, "Ready")["reason"] == "KubeletReady"
    assert condition(READY_NODE, "DiskPressure") is None


def test_only_a_true_condition_counts_as_true():
    assert is_true(READY_NODE, "Ready")
    assert not is_true(READY_NODE, "MemoryPressure")
    assert true_condition(SUSPENDED_JOBSET, "Suspended") is None


def test_missing_or_malformed_status_reads_as_no_conditions():
    for obj in (None, {}, {"status": None}, {"status": "Running"}, {"status": {"conditions": None}}):
        assert conditions(obj) == []
        assert not is_true(obj, "Ready")
    assert [c["type"] for c in conditions(SUSPENDED_JOBSET)] == ["Suspended"]

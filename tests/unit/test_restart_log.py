"""A JobSet's in-place restarts outlive the trigger that saw them. Pure."""

from __future__ import annotations

from pathways_airflow.run.records import JOBSET_RESTART, Disruption
from pathways_airflow.run.annotations import MAX_KEPT, RESTARTS_ANNOTATION, restarts_annotation, restarts_written

SEEN = Disruption(1_795_000_000.0, "MAINTENANCE", ("node gke-tpu-0: cloud.google.com/active-node-maintenance=ONGOING",), 27, JOBSET_RESTART)


def on_workload(annotations: dict[str, str]) -> dict:
    return {"kind": "JobSet", "metadata": {"name": "train", "annotations": annotations}}


def test_what_one_trigger_wrote_the_next_reads_back():
    assert restarts_written(on_workload(restarts_annotation([SEEN]))) == [SEEN]
    assert restarts_written(on_workload({})) == [] and restarts_written(None) == []
    assert restarts_written(on_workload({RESTARTS_ANNOTATION: "not json"})) == []
    assert restarts_written(on_workload({RESTARTS_ANNOTATION: '{"a": 1}'})) == []


def test_the_newest_are_kept_with_short_evidence():
    many = [Disruption(float(i), "SLICE_FAILURE", ("x" * 5000, "b", "c"), i, JOBSET_RESTART) for i in range(MAX_KEPT + 5)]
    kept = restarts_written(on_workload(restarts_annotation(many)))
    assert [d.reached_step for d in kept] == list(range(5, MAX_KEPT + 5))
    assert all(len(d.evidence) == 2 and len(d.evidence[0]) == 200 for d in kept)

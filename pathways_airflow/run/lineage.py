"""What each task read and wrote, and the facts of its run, for OpenLineage. Pure.

Every rule here turns a task's result (its XCom) into plain data: dataset URIs in, dataset URIs
out, and run facets as dicts. :mod:`pathways_airflow.lineage` turns that into the OpenLineage
provider's objects, so nothing here imports it, and a deployment without it pays nothing.

Datasets follow OpenLineage's naming spec (``spec/Naming.md``): a GCS object or prefix is
namespace ``gs://<bucket>``, name ``<object path>``; a local path is namespace ``file``, name
the absolute path. A checkpoint is named by its step directory (``<checkpoint_dir>/<step>``), the
same URI whichever task reports it, so the training task's output is the conversion's input,
and the conversion's output the benchmark's input: one graph. Only committed steps are ever
reported: the training result's checkpoint is the newest *committed* step, and a conversion's
output is reported once its commit marker is verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pathways_airflow.checkpoints import ITEMS_DIR, is_gcs, split_gcs_uri, step_uri

WORKLOAD_FACET = "pathways_workload"
TPU_FACET = "pathways_tpu"
DISRUPTIONS_FACET = "pathways_disruptions"
GOODPUT_FACET = "pathways_goodput"
BENCHMARK_FACET = "pathways_benchmark"


@dataclass(frozen=True)
class Lineage:
    """A task's datasets (URIs) and run facets (plain dicts, by facet name)."""

    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    run_facets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def dataset_name(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` → ``("gs://bucket", "a/b")``; ``/data/x`` → ``("file", "/data/x")``."""
    if is_gcs(uri):
        bucket, name = split_gcs_uri(uri)
        return f"gs://{bucket}", name.rstrip("/") or "/"
    return "file", uri.rstrip("/") or "/"


def _distinct(*uris: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(u for u in uris if u))


def _workload_facet(result: Mapping[str, Any], cluster: str) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "namespace": result.get("namespace"),
        "name": result.get("name"),
        "uid": result.get("uid"),
        "backend": result.get("backend"),
    }


def training_lineage(result: Mapping[str, Any], *, checkpoint_dir: str | None, cluster: str) -> Lineage:
    """Out: the committed step the task ended with. In: the committed steps its resubmissions resumed from.

    A resumed-from step is what the next workload read, whoever wrote it (this task before the
    disruption, or an earlier run of the DAG); the step the task ended with is only its output.
    """
    checkpoint = result.get("checkpoint") or {}
    output = checkpoint.get("uri") if isinstance(checkpoint, Mapping) else None
    resumed = [d.get("resumed_from_step") for d in result.get("disruptions") or () if d.get("resumed_from_step") is not None]
    inputs = [step_uri(checkpoint_dir, step) for step in resumed] if checkpoint_dir else []
    facets: dict[str, Mapping[str, Any]] = {WORKLOAD_FACET: _workload_facet(result, cluster)}
    if result.get("tpu"):
        facets[TPU_FACET] = dict(result["tpu"])
    facets[DISRUPTIONS_FACET] = {
        "summary": result.get("disruption_summary"),
        "count": len(result.get("disruptions") or ()),
        "kinds": [d.get("kind") for d in result.get("disruptions") or ()],
        "restarts_in_place": result.get("restarts", 0),
    }
    if result.get("goodput"):
        facets[GOODPUT_FACET] = dict(result["goodput"])
    return Lineage(inputs=_distinct(*(u for u in inputs if u != output)), outputs=_distinct(output), run_facets=facets)


def conversion_lineage(result: Mapping[str, Any], *, cluster: str) -> Lineage:
    """In: the training step converted. Out: the serving checkpoint (its step directory, commit verified)."""
    source = result.get("source") or {}
    facets: dict[str, Mapping[str, Any]] = {}
    if result.get("job"):
        namespace, _, name = str(result["job"]).partition("/")
        facets[WORKLOAD_FACET] = {"cluster": cluster, "namespace": namespace, "name": name, "uid": result.get("uid"), "backend": "job"}
    return Lineage(inputs=_distinct(source.get("uri")), outputs=_distinct(result.get("uri")), run_facets=facets)


def serving_checkpoint_uri(checkpoint: Any) -> str | None:
    """The step directory of the checkpoint a server loads: ``{"uri"}``, or the items directory's parent."""
    if isinstance(checkpoint, Mapping) and isinstance(checkpoint.get("uri"), str):
        return checkpoint["uri"].rstrip("/")
    if isinstance(checkpoint, Mapping) and isinstance(checkpoint.get("items_uri"), str):
        checkpoint = checkpoint["items_uri"]
    if isinstance(checkpoint, str) and checkpoint.strip():
        uri = checkpoint.strip().rstrip("/")
        return uri[: -len(ITEMS_DIR) - 1] if uri.endswith("/" + ITEMS_DIR) else uri
    return None


def benchmark_lineage(result: Mapping[str, Any], *, checkpoint: Any, hf_model: str | None, cluster: str) -> Lineage:
    """In: the serving checkpoint. Out: the results JSON. The engine and headline metrics as a facet."""
    facet = {"engine": result.get("engine"), "hf_model": hf_model}
    facet.update({k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return Lineage(
        inputs=_distinct(serving_checkpoint_uri(checkpoint)),
        outputs=_distinct(result.get("result_uri")),
        run_facets={BENCHMARK_FACET: {**facet, "cluster": cluster}},
    )


def regression_lineage(result: Mapping[str, Any], *, results_uri: str | None = None) -> Lineage:
    """In: the history as read (and the run's results, when named). Out: the history and the report."""
    history = result.get("history_uri")
    return Lineage(
        inputs=_distinct(results_uri, history),
        outputs=_distinct(history, result.get("report_uri"), result.get("plot_uri")),
        run_facets={"pathways_regression": {"regressed": bool(result.get("regressed")), "regressions": list(result.get("regressions") or ())}},
    )


__all__ = [
    "Lineage",
    "benchmark_lineage",
    "conversion_lineage",
    "dataset_name",
    "regression_lineage",
    "serving_checkpoint_uri",
    "training_lineage",
]

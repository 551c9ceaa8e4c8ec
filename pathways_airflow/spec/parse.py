"""PathwaysJob manifest → workload model: the inverse of ``render_pathwaysjob``. Pure.

Used wherever a PathwaysJob that already exists must be understood: the local cluster's
PathwaysJob controller renders its child JobSet from it, exactly as the real controller does.
The user's pod template is returned as it is, since the controller copies it whole.
"""

from __future__ import annotations

from typing import Any, Mapping

from pathways_airflow.spec.workload import Workload, build_workload

_PLACEHOLDER_IMAGE = "user-template"


def workload_from_pathwaysjob(manifest: Mapping[str, Any]) -> tuple[Workload, dict[str, Any] | None]:
    """``(workload, user pod spec or None)``; raises ``InvalidWorkloadSpec`` as the controller would fail."""
    spec = manifest.get("spec") or {}
    worker = (spec.get("workers") or [{}])[0]
    controller = spec.get("controller") or {}
    template = controller.get("template")
    user_pod_spec = dict(template.get("spec") or {}) if isinstance(template, Mapping) else None
    metadata = manifest.get("metadata") or {}
    workload = build_workload(
        machine_type=worker.get("type"),
        topology=worker.get("topology", ""),
        num_slices=worker.get("numSlices", 1),
        max_slice_restarts=worker.get("maxSliceRestarts"),
        node_selector=worker.get("nodeSelector"),
        pod_priority_class_name=worker.get("priorityClassName"),
        termination_grace_period_seconds=worker.get("terminationGracePeriodSeconds"),
        pathways_dir=spec.get("pathwaysDir", ""),
        pathways_version=spec.get("pathwaysVersion") or None,
        max_restarts=spec.get("maxRestarts", 0),
        deployment_mode=controller.get("deploymentMode", "default"),
        elastic_slices=controller.get("elasticSlices"),
        enable_metrics_collection=controller.get("enableMetricsCollection"),
        custom_components=[
            {
                "component_type": c.get("componentType"),
                "image": c.get("image") or None,
                "flags": c.get("customFlags") or (),
                "env": c.get("customEnv") or (),
            }
            for c in spec.get("customComponents") or ()
        ],
        image=_PLACEHOLDER_IMAGE if user_pod_spec is not None else None,
        container_name=controller.get("mainContainerName") or "main",
        labels=metadata.get("labels") or {},
        annotations=metadata.get("annotations") or {},
    )
    return workload, user_pod_spec

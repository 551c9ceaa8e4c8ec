"""PathwaysJob manifest → workload model: the inverse of ``render_pathwaysjob``. Pure.

Used wherever a PathwaysJob that already exists must be understood: the local cluster's
PathwaysJob controller renders its child JobSet from it, exactly as the real controller does.
The controller checks only the machine type and the topology; every other field passes through
as written, so those are taken as they are rather than validated. The user's pod template is
returned whole, since the controller copies it whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pathways_airflow.spec.workload import CustomComponent, Workload, build_workload

_PLACEHOLDER_IMAGE = "user-template"
_PLACEHOLDER_DIR = "gs://placeholder-bucket"


def workload_from_pathwaysjob(manifest: Mapping[str, Any]) -> tuple[Workload, dict[str, Any] | None]:
    """``(workload, user pod spec or None)``; raises ``InvalidWorkloadSpec`` where the controller fails."""
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
        termination_grace_period_seconds=worker.get("terminationGracePeriodSeconds"),
        pathways_dir=_PLACEHOLDER_DIR,
        max_restarts=spec.get("maxRestarts", 0),
        deployment_mode=controller.get("deploymentMode", "default"),
        elastic_slices=controller.get("elasticSlices"),
        enable_metrics_collection=controller.get("enableMetricsCollection"),
        image=_PLACEHOLDER_IMAGE if user_pod_spec is not None else None,
        container_name=controller.get("mainContainerName") or "main",
    )
    components = tuple(
        CustomComponent(
            component_type=str(c.get("componentType")),
            image=c.get("image") or None,
            flags=tuple(c.get("customFlags") or ()),
            env=tuple(dict(e) for e in c.get("customEnv") or ()),
        )
        for c in spec.get("customComponents") or ()
    )
    workload = dataclasses.replace(
        workload,
        pathways_dir=str(spec.get("pathwaysDir", "")),
        pathways_version=spec.get("pathwaysVersion") or None,
        custom_components=components,
        node_selector=dict(worker.get("nodeSelector") or {}),
        pod_priority_class_name=worker.get("priorityClassName") or None,
        labels=dict(metadata.get("labels") or {}),
        annotations=dict(metadata.get("annotations") or {}),
    )
    return workload, user_pod_spec

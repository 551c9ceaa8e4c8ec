"""Workload → Kubernetes manifests, as plain dicts ready for the API.

Two backends:

* ``pathwaysjob``: a ``pathways-job.pathways.domain/v1`` PathwaysJob; the PathwaysJob controller
  turns it into a JobSet.
* ``jobset``: the JobSet the PathwaysJob controller would have created (same replicated jobs,
  containers, flags, env, ports and sidecars; google/pathways-job v0.1.4), for clusters without
  that controller, as xpk does. On top of that layout it adds the failure policy a PathwaysJob
  cannot express (see :class:`JobSetFailurePolicy`): host maintenance restarts the JobSet without
  spending ``maxRestarts``, and a user-code exit code fails it at once instead of burning restarts.

Only what the workload sets is rendered, so a PathwaysJob reproduces the upstream samples field
for field and ``kubectl diff`` shows nothing a user did not ask for.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping

from pathways_airflow import well_known
from pathways_airflow.spec.tpu import TPU_RESOURCE
from pathways_airflow.spec.workload import CustomComponent, MainContainer, Workload

PATHWAYSJOB_API_VERSION = "pathways-job.pathways.domain/v1"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
BACKENDS = ("pathwaysjob", "jobset")

HEAD_JOB = "pathways-head"
WORKER_JOB = "worker"
PROXY_PORT = 29000
RESOURCE_MANAGER_PORT = 29001
WORKER_PORT = 29005
IMAGE_REPOSITORY = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"


XPK_SYSTEM_EXIT_CODES: tuple[int, ...] = (42, *range(127, 256))
"""Exit codes that mean "the system failed", as xpk classifies them; the rest are user errors."""


def replicated_pod_spec(replicated: Mapping[str, Any] | None) -> dict[str, Any]:
    """The pod spec of a JobSet replicated job (its ``template.spec.template.spec``, the object
    itself, so a caller may edit it in place); ``{}`` when absent."""
    return ((((replicated or {}).get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}


@dataclass(frozen=True)
class JobSetFailurePolicy:
    """The ``jobset`` backend's answer to failures, beyond PathwaysJob's bare ``maxRestarts``.

    ``ignore_disruptions``: a pod that gets the ``DisruptionTarget`` condition (host maintenance,
    preemption, eviction) fails its Job with reason ``PodFailurePolicy``; a JobSet rule then
    restarts the whole JobSet with ``RestartJobSetAndIgnoreMaxRestarts`` — JobSet's documented
    host-maintenance model — so maintenance never uses up ``maxRestarts``.

    ``system_exit_codes``: when set, the main container exiting with any *other* non-zero code is
    a user error: it fails the head Job through its pod failure policy and a ``FailJobSet`` rule
    ends the JobSet at once, so a deterministic bug is never restarted on the slices.
    ``None`` leaves every exit code to ``maxRestarts``.
    """

    ignore_disruptions: bool = True
    system_exit_codes: tuple[int, ...] | None = XPK_SYSTEM_EXIT_CODES


PATHWAYSJOB_FAILURE_POLICY = JobSetFailurePolicy(ignore_disruptions=False, system_exit_codes=None)
"""What the PathwaysJob controller renders: ``maxRestarts`` and nothing else."""

DISRUPTION_RULE_NAME = "disruptionRestartsFree"
USER_ERROR_RULE_NAME = "userErrorFailsJobSet"


def render(
    workload: Workload,
    *,
    backend: str,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    failure_policy: JobSetFailurePolicy | None = None,
    ttl_seconds_after_finished: int | None = None,
) -> dict[str, Any]:
    """The manifest of ``workload`` for ``backend`` (``"pathwaysjob"`` or ``"jobset"``).

    ``failure_policy`` and ``ttl_seconds_after_finished`` apply to the ``jobset`` backend (the
    PathwaysJob CRD has neither field).
    """
    if backend == "pathwaysjob":
        return render_pathwaysjob(workload, name=name, namespace=namespace, labels=labels, annotations=annotations)
    if backend == "jobset":
        return render_jobset(
            workload,
            name=name,
            namespace=namespace,
            labels=labels,
            annotations=annotations,
            failure_policy=failure_policy or JobSetFailurePolicy(),
            ttl_seconds_after_finished=ttl_seconds_after_finished,
        )
    raise ValueError(f"backend={backend!r}: unknown backend; valid: {', '.join(BACKENDS)}")


def _metadata(
    workload: Workload,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    all_labels = {**workload.labels, **(labels or {})}
    all_annotations = {**workload.annotations, **(annotations or {})}
    if all_labels:
        metadata["labels"] = all_labels
    if all_annotations:
        metadata["annotations"] = all_annotations
    return metadata


def container_manifest(main: MainContainer) -> dict[str, Any]:
    container: dict[str, Any] = {"name": main.name, "image": main.image}
    if main.image_pull_policy:
        container["imagePullPolicy"] = main.image_pull_policy
    if main.command:
        container["command"] = list(main.command)
    if main.args:
        container["args"] = list(main.args)
    if main.env:
        container["env"] = [dict(e) for e in main.env]
    if main.resources:
        container["resources"] = {k: dict(v) for k, v in main.resources.items()}
    return container


def _custom_component(component: CustomComponent) -> dict[str, Any]:
    rendered: dict[str, Any] = {"componentType": component.component_type}
    if component.image:
        rendered["image"] = component.image
    if component.flags:
        rendered["customFlags"] = list(component.flags)
    if component.env:
        rendered["customEnv"] = [dict(e) for e in component.env]
    return rendered


def _head_pod_spec(workload: Workload) -> dict[str, Any] | None:
    """The user's pod spec as it goes into ``controller.template.spec``; ``None`` when headless."""
    if workload.main is None:
        return None
    spec: dict[str, Any] = {"containers": [container_manifest(workload.main)]}
    if workload.service_account_name:
        spec["serviceAccountName"] = workload.service_account_name
    return spec


def render_pathwaysjob(
    workload: Workload,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``PathwaysJob``; labels and annotations reach the child JobSet (Kueue's queue label too)."""
    worker: dict[str, Any] = {
        "type": workload.machine_type.name,
        "topology": workload.shape.topology,
        "numSlices": workload.num_slices,
    }
    if workload.max_slice_restarts is not None:
        worker["maxSliceRestarts"] = workload.max_slice_restarts
    if workload.node_selector:
        worker["nodeSelector"] = dict(workload.node_selector)
    if workload.pod_priority_class_name:
        worker["priorityClassName"] = workload.pod_priority_class_name
    if workload.termination_grace_period_seconds is not None:
        worker["terminationGracePeriodSeconds"] = workload.termination_grace_period_seconds

    controller: dict[str, Any] = {"deploymentMode": workload.deployment_mode}
    if workload.elastic_slices is not None:
        controller["elasticSlices"] = workload.elastic_slices
    if workload.enable_metrics_collection is not None:
        controller["enableMetricsCollection"] = workload.enable_metrics_collection
    head_spec = _head_pod_spec(workload)
    if head_spec is not None:
        assert workload.main is not None
        controller["mainContainerName"] = workload.main.name
        controller["template"] = {"spec": head_spec}

    spec: dict[str, Any] = {"maxRestarts": workload.max_restarts}
    if workload.pathways_version:
        spec["pathwaysVersion"] = workload.pathways_version
    spec["workers"] = [worker]
    if workload.custom_components:
        spec["customComponents"] = [_custom_component(c) for c in workload.custom_components]
    spec["pathwaysDir"] = workload.pathways_dir
    spec["controller"] = controller
    return {
        "apiVersion": PATHWAYSJOB_API_VERSION,
        "kind": "PathwaysJob",
        "metadata": _metadata(workload, name, namespace, labels, annotations),
        "spec": spec,
    }


# --- the JobSet layout of the PathwaysJob controller ------------------------------------------


def _image(workload: Workload, component_type: str, default_image: str) -> str:
    component = workload.component(component_type)
    if component and component.image:
        return component.image
    return f"{IMAGE_REPOSITORY}/{default_image}:{workload.pathways_version or 'latest'}"


def _extra_flags(workload: Workload, component_type: str) -> list[str]:
    component = workload.component(component_type)
    return list(component.flags) if component else []


def _extra_env(workload: Workload, component_type: str) -> list[dict[str, Any]]:
    component = workload.component(component_type)
    return [dict(e) for e in component.env] if component else []


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _coordinator_env(name: str) -> dict[str, Any]:
    return _field_env(name, f"metadata.labels['{well_known.COORDINATOR}']")


def _metrics_flags(workload: Workload) -> list[str]:
    return ["--enable_metrics_collection=true"] if workload.enable_metrics_collection else []


def _resource_manager(workload: Workload) -> dict[str, Any]:
    shape = workload.shape
    return {
        "name": "pathways-rm",
        "image": _image(workload, "pathways_server", "server"),
        "imagePullPolicy": "Always",
        "restartPolicy": "Always",
        "args": [
            f"--server_port={RESOURCE_MANAGER_PORT}",
            f"--gcs_scratch_location={workload.pathways_dir}",
            "--node_type=resource_manager",
            f"--instance_count={workload.num_slices}",
            f"--instance_type={shape.machine_type.pathways_instance_type}:{shape.topology}",
            *_metrics_flags(workload),
            *_extra_flags(workload, "pathways_server"),
        ],
        "env": [
            _field_env("REPLICATED_JOB_NAME", f"metadata.annotations['{well_known.REPLICATED_JOB}']"),
            _field_env("JOBSET_NAME", f"metadata.annotations['{well_known.JOBSET_NAME}']"),
            _coordinator_env("HOST_ADDRESS"),
            {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
            *_extra_env(workload, "pathways_server"),
        ],
        "ports": [{"containerPort": RESOURCE_MANAGER_PORT}, {"containerPort": RESOURCE_MANAGER_PORT + 1}],
        "resources": {"limits": {"cpu": "8", "memory": "32G"}},
    }


def _proxy(workload: Workload) -> dict[str, Any]:
    elastic = (
        [f"--num_elastic_slices={workload.elastic_slices}"] if workload.elastic_slices else []
    )
    return {
        "name": "pathways-proxy",
        "image": _image(workload, "proxy_server", "proxy_server"),
        "imagePullPolicy": "Always",
        "restartPolicy": "Always",
        "args": [
            f"--server_port={PROXY_PORT}",
            f"--resource_manager_address=$(PATHWAYS_HEAD):{RESOURCE_MANAGER_PORT}",
            f"--gcs_scratch_location={workload.pathways_dir}",
            *_metrics_flags(workload),
            *_extra_flags(workload, "proxy_server"),
            *elastic,
        ],
        "env": [_coordinator_env("PATHWAYS_HEAD"), *_extra_env(workload, "proxy_server")],
        "ports": [{"containerPort": PROXY_PORT}],
        "resources": {"limits": {"cpu": "16", "memory": "100G"}},
    }


def _pathways_client_env() -> list[dict[str, Any]]:
    """What the controller appends to the main container's env so JAX finds the proxy."""
    return [
        _coordinator_env("PATHWAYS_HEAD"),
        {"name": "JAX_PLATFORMS", "value": "proxy"},
        {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
        {"name": "JAX_BACKEND_TARGET", "value": f"grpc://$(PATHWAYS_HEAD):{PROXY_PORT}"},
    ]


def tpu_node_selector(workload: Workload) -> dict[str, str]:
    """The labels of the nodes a workload's TPU workers run on (also how a failure's slice is found)."""
    return {
        **workload.node_selector,
        well_known.ACCELERATOR: workload.machine_type.accelerator,
        well_known.TOPOLOGY: workload.shape.topology,
    }


def _head_job(
    workload: Workload, policy: JobSetFailurePolicy, user_pod_spec: Mapping[str, Any] | None
) -> dict[str, Any]:
    sidecars = [_resource_manager(workload), _proxy(workload)]
    main_name = workload.main.name if workload.main else None
    if user_pod_spec is None and workload.main is not None:
        user_pod_spec = _head_pod_spec(workload)
    if user_pod_spec is not None:
        # The user's pod spec, as the controller copies it, with the Pathways servers as native
        # sidecars and the proxy's address in the main container's environment.
        pod = copy.deepcopy(dict(user_pod_spec))
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
        pod["initContainers"] = [*(pod.get("initContainers") or []), *sidecars]
        for container in pod.get("containers") or []:
            if container.get("name") == (main_name or "main"):
                container["env"] = [*(container.get("env") or []), *_pathways_client_env()]
    else:
        # Headless: the Pathways servers are the pod's only containers.
        pod = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}
        pod["containers"] = [{k: v for k, v in c.items() if k != "restartPolicy"} for c in sidecars]
    if workload.deployment_mode == "colocate_head_with_workers":
        pod["nodeSelector"] = tpu_node_selector(workload)
        annotations: dict[str, str] = dict(workload.annotations)
    else:
        annotations = {**workload.annotations, well_known.EXCLUSIVE_TOPOLOGY: "kubernetes.io/hostname"}

    job: dict[str, Any] = {"backoffLimit": 0, "completions": 1, "parallelism": 1}
    rules = _disruption_rules(policy)
    if policy.system_exit_codes is not None and main_name is not None:
        rules.append(
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": main_name,
                    "operator": "NotIn",
                    # Exit code 0 is success and never checked; the API wants the list sorted.
                    "values": sorted(set(policy.system_exit_codes) - {0}),
                },
            }
        )
    if rules:
        job["podFailurePolicy"] = {"rules": rules}
        pod["restartPolicy"] = "Never"  # required by a Job pod failure policy
    # The controller puts the same annotations on the Job template and on the pod template.
    job["template"] = _template(annotations, pod)
    return {"name": HEAD_JOB, "replicas": 1, "template": _template(annotations, job)}


def _template(annotations: Mapping[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    if not annotations:
        return {"spec": spec}
    return {"metadata": {"annotations": dict(annotations)}, "spec": spec}


def _disruption_rules(policy: JobSetFailurePolicy) -> list[dict[str, Any]]:
    if not policy.ignore_disruptions:
        return []
    return [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]


def _worker_job(workload: Workload, name: str, policy: JobSetFailurePolicy) -> dict[str, Any]:
    shape = workload.shape
    backoff = shape.vms * 4
    if workload.elastic_slices and (workload.max_slice_restarts or 1) > 0:
        backoff = shape.vms * (workload.max_slice_restarts or 1)
    worker_container = {
        "name": "pathways-worker",
        "image": _image(workload, "worker", "server"),
        "imagePullPolicy": "Always",
        "args": [
            f"--server_port={WORKER_PORT}",
            f"--resource_manager_address=$(PATHWAYS_HEAD):{RESOURCE_MANAGER_PORT}",
            f"--gcs_scratch_location={workload.pathways_dir}",
            *_metrics_flags(workload),
            *_extra_flags(workload, "worker"),
        ],
        "env": [
            {"name": "TPU_MIN_LOG_LEVEL", "value": "0"},
            {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "0"},
            {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
            {"name": "MEGASCALE_GRPC_ENABLE_XOR_TRACER", "value": "false"},
            _field_env("MEGASCALE_NUM_SLICES", "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"),
            _field_env("JOBSET_NAME", f"metadata.annotations['{well_known.JOBSET_NAME}']"),
            _field_env("REPLICATED_JOB_NAME", f"metadata.annotations['{well_known.REPLICATED_JOB}']"),
            _field_env("MEGASCALE_SLICE_ID", "metadata.labels['jobset.sigs.k8s.io/job-index']"),
            _coordinator_env("PATHWAYS_HEAD"),
            _coordinator_env("MEGASCALE_COORDINATOR_ADDRESS"),
            *_extra_env(workload, "worker"),
        ],
        "ports": [{"containerPort": p} for p in (WORKER_PORT, WORKER_PORT + 1, 8471, 8080)],
        "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}],
        "resources": {"limits": {TPU_RESOURCE: str(shape.chips_per_vm)}},
    }
    pod: dict[str, Any] = {
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "nodeSelector": tpu_node_selector(workload),
        "containers": [worker_container],
        "volumes": [{"name": "shared-tmp", "hostPath": {"path": "/tmp", "type": "DirectoryOrCreate"}}],
    }
    sidecar = workload.component("colocated_python_sidecar")
    if sidecar and sidecar.image:
        pod["initContainers"] = [
            {
                "name": "colocated-python-sidecar",
                "image": sidecar.image,
                "imagePullPolicy": "Always",
                "restartPolicy": "Always",
                "env": [{"name": "GRPC_SERVER_ADDRESS", "value": "0.0.0.0:50051"}],
                "ports": [{"containerPort": 50051}],
                "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}],
            }
        ]
    if workload.termination_grace_period_seconds is not None:
        pod["terminationGracePeriodSeconds"] = workload.termination_grace_period_seconds
    if workload.pod_priority_class_name:
        pod["priorityClassName"] = workload.pod_priority_class_name
    if workload.deployment_mode == "colocate_head_with_workers":
        pod["affinity"] = _colocated_worker_affinity(name)
    job: dict[str, Any] = {"backoffLimit": backoff, "completions": shape.vms, "parallelism": shape.vms}
    rules = _disruption_rules(policy)
    if rules:
        job["podFailurePolicy"] = {"rules": rules}
        pod["restartPolicy"] = "Never"
    job["template"] = {"metadata": {"annotations": {well_known.EXCLUSIVE_TOPOLOGY: well_known.NODEPOOL}}, "spec": pod}
    return {"name": WORKER_JOB, "replicas": workload.num_slices, "template": {"spec": job}}


def _colocated_worker_affinity(name: str) -> dict[str, Any]:
    """Keep a colocated workload's workers together on its node pools and other JobSets off them."""
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": well_known.JOBSET_NAME, "operator": "In", "values": [name]}]
                    },
                    "topologyKey": well_known.NODEPOOL,
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": well_known.JOBSET_NAME, "operator": "NotIn", "values": [name]},
                            {"key": "job-name", "operator": "Exists"},
                        ]
                    },
                    "topologyKey": well_known.NODEPOOL,
                }
            ]
        },
    }


def _jobset_failure_policy(workload: Workload, policy: JobSetFailurePolicy) -> dict[str, Any]:
    failure: dict[str, Any] = {"maxRestarts": workload.max_restarts}
    rules: list[dict[str, Any]] = []
    if policy.ignore_disruptions:
        failure["restartStrategy"] = "Recreate"
        rules.append(
            {
                "name": DISRUPTION_RULE_NAME,
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": ["DisruptionTarget"],
            }
        )
    if policy.system_exit_codes is not None and workload.main is not None:
        rules.append(
            {
                "name": USER_ERROR_RULE_NAME,
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "targetReplicatedJobs": [HEAD_JOB],
            }
        )
    if rules:
        failure["rules"] = rules
    return failure


def render_jobset(
    workload: Workload,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    failure_policy: JobSetFailurePolicy = JobSetFailurePolicy(),
    user_pod_spec: Mapping[str, Any] | None = None,
    ttl_seconds_after_finished: int | None = None,
) -> dict[str, Any]:
    """The PathwaysJob controller's JobSet layout, with ``failure_policy`` on top.

    ``user_pod_spec`` replaces the head pod spec built from ``workload.main`` (the PathwaysJob
    controller copies ``controller.template.spec`` whole, whatever it holds).
    """
    spec: dict[str, Any] = {
        "failurePolicy": _jobset_failure_policy(workload, failure_policy),
        "startupPolicy": {"startupPolicyOrder": "InOrder"},
        "coordinator": {"replicatedJob": HEAD_JOB, "jobIndex": 0, "podIndex": 0},
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": [
            _head_job(workload, failure_policy, user_pod_spec),
            _worker_job(workload, name, failure_policy),
        ],
    }
    if workload.main is not None or user_pod_spec is not None:
        spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": [HEAD_JOB]}
    if ttl_seconds_after_finished is not None:
        # JobSet deletes itself that long after it finished (api/jobset/v1alpha2 jobset_types.go):
        # the backstop that needs no Airflow, for a task that never came back to delete it.
        spec["ttlSecondsAfterFinished"] = ttl_seconds_after_finished
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": _metadata(workload, name, namespace, labels, annotations),
        "spec": spec,
    }

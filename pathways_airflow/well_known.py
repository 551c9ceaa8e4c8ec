"""The well-known label, annotation and taint keys the provider reads and writes, each once.

Every key here is another project's format, so each names the upstream file that defines it:
a typo in a selector matches nothing and fails silently, which is why no module spells one out.
Our own keys (``pathways-airflow/...``) live in :mod:`pathways_airflow.spec.names`.
"""

from __future__ import annotations

# kubernetes/api batch/v1/types.go (JobNameLabel, JobCompletionIndexAnnotation).
JOB_NAME = "batch.kubernetes.io/job-name"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

# kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go (JobSetNameKey, ReplicatedJobNameKey,
# JobIndexKey, RestartsKey, CoordinatorKey) and pkg/constants (the exclusive-placement annotation).
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOB_RESTART_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"  # JobSet ≥ 0.12: pkg/constants/constants.go JobRestartAttemptKey
COORDINATOR = "jobset.sigs.k8s.io/coordinator"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
# kubernetes-sigs/jobset keps/1282-execution-attempts/README.md (ExecutionAttemptsKey; JobSet 0.13,
# alpha feature gate ExecutionAttemptsTracking): an annotation on child Jobs and their pod
# templates, so on pods, with the JobSet's ``status.executionAttempts`` when they were made or
# resumed. Unlike ``restart-attempt`` it moves when Kueue suspends the JobSet and admits it again.
EXECUTION_ATTEMPT = "jobset.sigs.k8s.io/execution-attempt"


def jobset_selector(jobset: str) -> str:
    """The label selector of everything a JobSet made, Jobs and pods (a PathwaysJob's JobSet has its name)."""
    return f"{JOBSET_NAME}={jobset}"

# kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go (SetNameLabelKey,
# WorkerIndexLabelKey, ExclusiveKeyAnnotationKey).
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"

# kubernetes-sigs/kueue pkg/controller/constants/constants.go (QueueLabel,
# WorkloadPriorityClassLabel, JobUIDLabel, MaxExecTimeSecondsLabel). Kueue copies the last into
# the Workload's spec.maximumExecutionTimeSeconds (pkg/controller/jobframework/utils.go) and
# deactivates the Workload once it has been admitted that long (pkg/controller/core/workload_controller.go).
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"

# kubernetes-sigs/kueue apis/kueue/v1beta2/workload_types.go (WorkloadMaximumExecutionTimeExceeded,
# WorkloadDeactivated) and pkg/workload/patching/patching.go (ReasonWithCause): the reasons of a
# Workload Kueue deactivated at its maximum execution time — ``DeactivationTarget`` first, then
# ``Evicted`` with the deactivation and its cause joined by ``DueTo``.
MAX_EXEC_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
DEACTIVATED_FOR_MAX_EXEC_TIME = f"DeactivatedDueTo{MAX_EXEC_TIME_EXCEEDED}"

# GKE node labels and taints (cloud.google.com/kubernetes-engine/docs: TPUs in GKE, node pool
# labels, and "Manage GKE node disruption for GPUs and TPUs").
ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY = "cloud.google.com/gke-tpu-topology"
NODEPOOL = "cloud.google.com/gke-nodepool"
SPOT = "cloud.google.com/gke-spot"
ACTIVE_MAINTENANCE = "cloud.google.com/active-node-maintenance"
SCHEDULED_MAINTENANCE = "cloud.google.com/scheduled-maintenance-time"
IMPENDING_TERMINATION = "cloud.google.com/impending-node-termination"
# "Manually start host maintenance" (same GKE page): label a node whose maintenance is announced
# ``cloud.google.com/perform-maintenance=true`` and GKE starts that maintenance at once, instead of
# at ``scheduled-maintenance-time``. (The same label names are the constants of GKE's node
# maintenance controller: customerTriggeredMaintenanceLabel, upcomingMaintenanceLabel,
# activeMaintenanceLabel.) A host event takes the whole slice, so the whole node pool is labelled.
PERFORM_MAINTENANCE = "cloud.google.com/perform-maintenance"
# A pod a DaemonSet runs on every node (device plugins, log agents) does not make a node busy, nor
# does a static pod's mirror (kubernetes/api core/v1 annotation_key_constants.go, MirrorPodAnnotationKey).
MIRROR_POD = "kubernetes.io/config.mirror"

# kubernetes/api core/v1/well_known_labels.go (LabelInstanceTypeStable).
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

# kubernetes/api core/v1/well_known_taints.go (TaintNodeOutOfService): put on a node that shut down
# without notice, so that its pods are deleted (pod GC, DisruptionTarget reason DeletionByPodGC)
# and their volumes detached: the node is not coming back as it was.
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"

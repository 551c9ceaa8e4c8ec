"""Mutating admission, as the JobSet and Kueue webhooks apply it on create. Pure.

* JobSet's defaulting webhook: ``completionMode: Indexed`` and pod ``restartPolicy: OnFailure``
  for every replicated job, ``successPolicy`` All, ``startupPolicy`` AnyOrder, DNS hostnames and
  not-ready address publishing on, failure policy rule names (``failurePolicyRuleN``).
* Kueue's webhook: a JobSet or a Job (not owned by a JobSet) labelled
  ``kueue.x-k8s.io/queue-name`` is created suspended, to be resumed when its Workload is
  admitted. (LeaderWorkerSets are not queued by the local cluster's Kueue.)
* The API server's own defaulting for the built-in kinds clients leave to it: a Secret without
  a ``type`` is ``Opaque`` (kubernetes ``pkg/apis/core/v1/defaults.go``, ``SetDefaults_Secret``).
"""

from __future__ import annotations

from typing import Any, Callable

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


def default_jobset(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    failure = spec.get("failurePolicy")
    if failure is not None:
        failure.setdefault("restartStrategy", "Recreate")
        for index, rule in enumerate(failure.get("rules") or ()):
            rule.setdefault("name", f"failurePolicyRule{index}")
    for replicated in spec.get("replicatedJobs") or ():
        job = replicated.setdefault("template", {}).setdefault("spec", {})
        job.setdefault("completionMode", "Indexed")
        pod = job.setdefault("template", {}).setdefault("spec", {})
        pod.setdefault("restartPolicy", "OnFailure")
    if (obj.get("metadata", {}).get("labels") or {}).get(QUEUE_NAME_LABEL):
        spec["suspend"] = True
    return obj


def default_job(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.setdefault("spec", {})
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("backoffLimit", 6)
    owned_by_jobset = any(r.get("kind") == "JobSet" for r in obj.get("metadata", {}).get("ownerReferences") or ())
    if (obj.get("metadata", {}).get("labels") or {}).get(QUEUE_NAME_LABEL) and not owned_by_jobset:
        spec["suspend"] = True
    return obj


def default_secret(obj: dict[str, Any]) -> dict[str, Any]:
    if not obj.get("type"):
        obj["type"] = "Opaque"
    return obj


def default_leaderworkerset(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("leaderWorkerTemplate", {}).setdefault("size", 1)
    spec.setdefault("startupPolicy", "LeaderCreated")
    return obj


MUTATORS: dict[tuple[str, str], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("jobset.x-k8s.io", "jobsets"): default_jobset,
    ("batch", "jobs"): default_job,
    ("leaderworkerset.x-k8s.io", "leaderworkersets"): default_leaderworkerset,
    ("", "secrets"): default_secret,
}


def admit(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the mutating webhooks would store it (changed in place and returned)."""
    mutate = MUTATORS.get((group, plural))
    return mutate(obj) if mutate else obj

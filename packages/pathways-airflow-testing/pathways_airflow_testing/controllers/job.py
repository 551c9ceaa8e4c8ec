"""batch/v1 Job → Pods: completions, parallelism, Indexed mode, backoffLimit, podFailurePolicy.

The pod failure policy is evaluated as Kubernetes does, including the messages JobSet rules
match on ("Pod ns/name has condition DisruptionTarget matching FailJob rule at index 0").
A pod deleted by someone else before it succeeded (the taint manager on a lost node, an
eviction) still counts as failed, in its last state, as Kubernetes' pod tracking finalizers make
it: its Job's ``status.failed`` keeps the loss after the pod is gone.
"""

from __future__ import annotations

import random
import string
from typing import Any, Iterable

from pathways_airflow_testing.controllers.base import Controller, Key, is_true, owner_keys, owner_reference, set_condition
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.store import StoreEvent, copy_of

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def pod_failure_policy_match(job: dict[str, Any], pod: dict[str, Any]) -> tuple[str, str] | None:
    """``(action, message)`` of the first pod failure policy rule the failed pod matches."""
    rules = ((job["spec"].get("podFailurePolicy") or {}).get("rules")) or ()
    meta = pod["metadata"]
    pod_ref = f"{meta['namespace']}/{meta['name']}"
    conditions = {c["type"]: c.get("status") for c in (pod.get("status") or {}).get("conditions") or ()}
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    for index, rule in enumerate(rules):
        for wanted in rule.get("onPodConditions") or ():
            if conditions.get(wanted["type"]) == wanted.get("status", "True"):
                return rule["action"], f"Pod {pod_ref} has condition {wanted['type']} matching {rule['action']} rule at index {index}"
        codes = rule.get("onExitCodes")
        if codes:
            for status in statuses:
                if codes.get("containerName") not in (None, status["name"]):
                    continue
                code = (status.get("state") or {}).get("terminated", {}).get("exitCode")
                if code is None or code == 0:
                    continue
                hit = code in codes["values"] if codes["operator"] == "In" else code not in codes["values"]
                if hit:
                    return rule["action"], (
                        f"Container {status['name']} for pod {pod_ref} failed with exit code {code} matching "
                        f"{rule['action']} rule at index {index}"
                    )
    return None


def compress_indexes(indexes: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"``, the form of ``status.completedIndexes``."""
    ordered = sorted(set(indexes))
    ranges: list[str] = []
    start = prev = None
    for value in ordered:
        if start is None:
            start = prev = value
        elif value == prev + 1:
            prev = value
        else:
            ranges.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = value
    if start is not None:
        ranges.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(ranges)


class JobController(Controller):
    name = "job-controller"

    def __init__(self, cluster: Any):
        super().__init__(cluster)
        self.jobs = self.kind("batch", "v1", "jobs")
        self.pods = self.kind("", "v1", "pods")
        self._lost: dict[str, dict[str, dict[str, Any]]] = {}
        """Job uid → pod uid → the last state of a pod deleted by someone else before it ended."""
        self._removing: set[str] = set()
        """Uids of pods this controller deletes itself (suspend, completion, failure): not failures."""

    def watched_kinds(self) -> Iterable[Kind]:
        return (self.jobs, self.pods)

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        if event.kind.plural == "jobs":
            if event.type == "DELETED":
                self._lost.pop(event.obj["metadata"].get("uid", ""), None)
            return ((event.namespace, event.name),)
        if event.type == "DELETED":
            self._note_lost(event.obj)
        return owner_keys(event, "Job")

    def _note_lost(self, pod: dict[str, Any]) -> None:
        """Remember a pod deleted before it succeeded, unless this controller deleted it or its
        Job is itself going away (then nothing counts any more)."""
        meta = pod["metadata"]
        if meta.get("uid") in self._removing:
            self._removing.discard(meta["uid"])
            return
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            return
        for ref in meta.get("ownerReferences") or ():
            if ref.get("kind") != "Job":
                continue
            job = self.store.find(self.jobs, meta.get("namespace", ""), ref.get("name", ""))
            if job is None or job["metadata"].get("uid") != ref.get("uid") or job["metadata"].get("deletionTimestamp"):
                continue
            last = copy_of(pod)
            last.setdefault("status", {})["phase"] = "Failed"
            self._lost.setdefault(ref["uid"], {})[meta["uid"]] = last

    def _pods_of(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        uid = job["metadata"]["uid"]
        return [
            p
            for p in self.store.list(self.pods, job["metadata"]["namespace"])
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or ())
        ]

    async def reconcile(self, namespace: str, name: str) -> None:
        job = self.store.find(self.jobs, namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        status = copy_of(job.get("status") or {})
        now = self.clock.timestamp()
        pods = self._pods_of(job)
        if is_true(job, "Complete") or is_true(job, "Failed"):
            self._delete_active(pods)
            return
        spec = job["spec"]
        if spec.get("suspend"):
            self._delete_active(pods)
            status["conditions"] = set_condition(status.get("conditions") or [], "Suspended", "True", "JobSuspended", "Job suspended", now)
            status["active"] = 0
            self.set_status(self.jobs, job, status)
            return
        if is_true(job, "Suspended"):
            status["conditions"] = set_condition(status["conditions"], "Suspended", "False", "JobResumed", "Job resumed", now)
        status.setdefault("startTime", now)
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions") or 1
        parallelism = spec.get("parallelism", 1)
        backoff_limit = spec.get("backoffLimit", 6)

        active = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        present = {p["metadata"].get("uid") for p in pods}
        failed += [p for uid, p in self._lost.get(job["metadata"]["uid"], {}).items() if uid not in present]
        counted_failures = 0
        for pod in failed:
            match = pod_failure_policy_match(job, pod)
            if match and match[0] == "FailJob":
                self._fail(job, status, pods, "PodFailurePolicy", match[1])
                return
            if match and match[0] == "Ignore":
                continue
            counted_failures += 1
        # With restartPolicy OnFailure the kubelet restarts containers in place; each restart
        # counts against backoffLimit as a failed pod would.
        counted_failures += sum(
            c.get("restartCount", 0)
            for p in active
            if p["spec"].get("restartPolicy") == "OnFailure"
            for c in (p.get("status") or {}).get("containerStatuses") or ()
        )
        status["failed"] = len(failed)
        if counted_failures > backoff_limit:
            self._fail(job, status, pods, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            return

        if indexed:
            done = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in succeeded}
            running = {int(p["metadata"]["annotations"][COMPLETION_INDEX]) for p in active}
            missing = [i for i in range(completions) if i not in done and i not in running]
            for index in missing[: max(0, parallelism - len(active))]:
                self._create_pod(job, index)
            status["completedIndexes"] = compress_indexes(done)
            complete = len(done) >= completions
        else:
            want = min(parallelism, completions - len(succeeded)) - len(active)
            for _ in range(max(0, want)):
                self._create_pod(job, None)
            complete = len(succeeded) >= completions
        active = [p for p in self._pods_of(job) if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        status["active"] = len(active)
        status["succeeded"] = len(succeeded)
        status["ready"] = sum(1 for p in active if is_true(p, "Ready"))
        status["terminating"] = 0
        if complete:
            status["completionTime"] = now
            conditions = set_condition(status.get("conditions") or [], "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods", now)
            status["conditions"] = set_condition(conditions, "Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods", now)
            self.event(job, "Completed", "Job completed")
            self._delete_active(active)
            status["active"] = 0
        self.set_status(self.jobs, job, status)

    def _fail(self, job: dict[str, Any], status: dict[str, Any], pods: list[dict[str, Any]], reason: str, message: str) -> None:
        now = self.clock.timestamp()
        conditions = set_condition(status.get("conditions") or [], "FailureTarget", "True", reason, message, now)
        status["conditions"] = set_condition(conditions, "Failed", "True", reason, message, now)
        status["active"] = 0
        self._delete_active(pods)
        self.set_status(self.jobs, job, status)
        self.event(job, reason, message, type_="Warning")

    def _delete_active(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
                meta = pod["metadata"]
                if self.store.find(self.pods, meta["namespace"], meta["name"]) is not None:
                    self._removing.add(meta.get("uid", ""))
                    self.store.delete(self.pods, meta["namespace"], meta["name"])

    def _create_pod(self, job: dict[str, Any], index: int | None) -> None:
        template = copy_of(job["spec"]["template"])
        meta = template.setdefault("metadata", {})
        job_meta = job["metadata"]
        labels = meta.setdefault("labels", {})
        labels.update(
            {
                CONTROLLER_UID_LABEL: job_meta["uid"],
                "controller-uid": job_meta["uid"],
                JOB_NAME_LABEL: job_meta["name"],
                "job-name": job_meta["name"],
            }
        )
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        spec = template.setdefault("spec", {})
        if index is not None:
            labels[COMPLETION_INDEX] = str(index)
            meta.setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
            meta["name"] = f"{job_meta['name']}-{index}-{suffix}"
            if spec.get("subdomain"):
                spec.setdefault("hostname", f"{job_meta['name']}-{index}")
        else:
            meta["name"] = f"{job_meta['name']}-{suffix}"
        meta["namespace"] = job_meta["namespace"]
        meta["ownerReferences"] = [owner_reference(job)]
        spec.setdefault("restartPolicy", "Never")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        created = self.store.create(self.pods, pod)
        self.event(job, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")

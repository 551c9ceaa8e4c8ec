"""JobSet → Jobs (+ a headless Service): restarts, failure policy rules, success and startup policy.

Follows kubernetes-sigs/jobset: child Jobs ``<jobset>-<replicatedJob>-<index>`` labelled with the
JobSet labels (``restart-attempt`` among them); a failed child Job is matched against the
failure policy rules in order (reason, message pattern, target replicated job), and the first
match decides: fail the JobSet, restart it counting towards ``maxRestarts``, or restart it
without counting. A restart recreates every child Job under the next ``restart-attempt``.

JobSet 0.12's ``RestartJob`` and ``RestartJobAndIgnoreMaxRestarts`` recreate only the failed Job
(``pkg/controllers/failure_policy.go``, ``failurePolicyRecreateJob``): they bump its entry of
``status.replicatedJobsStatus[].jobRestarts`` (and of ``jobRestartsCountTowardsMax`` for
``RestartJob``), a Job whose ``jobset.sigs.k8s.io/job-restart-attempt`` label is below its entry is
deleted and created again with the new value (``jobset_controller.go``), and ``maxRestarts`` is
compared with the global and the per-Job counted restarts together (``totalRestartsCountTowardsMax``).

Behind the alpha feature gate ``ExecutionAttemptsTracking`` (JobSet 0.13, off unless the cluster is
given it: ``LocalCluster(jobset_feature_gates=("ExecutionAttemptsTracking",))``), the controller
also counts executions as KEP-1282 designs it (``keps/1282-execution-attempts/README.md``):
``status.executionAttempts`` goes up once per suspend → resume (Kueue evicted the JobSet and
admitted it again, which leaves ``restart-attempt`` alone) and once per restart of every Job, never
for a per-Job ``RestartJob``; each Job it creates or resumes, and its pod template, carries the
count as the annotation ``jobset.sigs.k8s.io/execution-attempt``. The stand-in's API server checks
no ``status`` against the CRD (status is left out of its schema checks), so the published JobSet
CRD, which does not have the field yet, needs no change for it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import json
import re
from typing import Any, Iterable

from pathways_airflow_testing.controllers.base import (
    Controller,
    Key,
    condition,
    is_true,
    owner_keys,
    owner_reference,
    set_condition,
)
from pathways_airflow_testing.errors import ApiError
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.store import StoreEvent, copy_of

log = logging.getLogger(__name__)

PREFIX = "jobset.sigs.k8s.io"
JOBSET_NAME = f"{PREFIX}/jobset-name"
REPLICATED_JOB_NAME = f"{PREFIX}/replicatedjob-name"
REPLICATED_JOB_REPLICAS = f"{PREFIX}/replicatedjob-replicas"
JOB_INDEX = f"{PREFIX}/job-index"
JOB_GLOBAL_INDEX = f"{PREFIX}/job-global-index"
RESTART_ATTEMPT = f"{PREFIX}/restart-attempt"
JOB_RESTART_ATTEMPT = f"{PREFIX}/job-restart-attempt"  # pkg/constants/constants.go JobRestartAttemptKey
JOB_KEY = f"{PREFIX}/job-key"
COORDINATOR = f"{PREFIX}/coordinator"
JOBSET_UID = f"{PREFIX}/jobset-uid"
# keps/1282-execution-attempts/README.md (API Changes: ExecutionAttemptsKey; Feature Gate Disabled Behavior).
EXECUTION_ATTEMPT = f"{PREFIX}/execution-attempt"
EXECUTION_ATTEMPTS_TRACKING = "ExecutionAttemptsTracking"
FEATURE_GATES = frozenset({EXECUTION_ATTEMPTS_TRACKING})
"""The JobSet controller's feature gates the stand-in implements (all alpha, so all off by default)."""


def job_failure(job: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(reason, message, time)`` of a failed Job."""
    failed = condition(job, "Failed")
    if failed and failed.get("status") == "True":
        return failed.get("reason", ""), failed.get("message", ""), failed.get("lastTransitionTime", "")
    return None


def matching_rule(policy: dict[str, Any] | None, replicated_job: str, reason: str, message: str) -> dict[str, Any] | None:
    """The first failure policy rule that matches a failed child Job, as JobSet evaluates them."""
    for rule in (policy or {}).get("rules") or ():
        reasons = rule.get("onJobFailureReasons") or []
        patterns = rule.get("onJobFailureMessagePatterns") or []
        targets = rule.get("targetReplicatedJobs") or []
        if reasons and reason not in reasons:
            continue
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        if targets and replicated_job not in targets:
            continue
        return rule
    return None


def checked_feature_gates(gates: Iterable[str]) -> frozenset[str]:
    """The gates, refused when one is not a gate the stand-in knows (as the controller refuses its flag)."""
    unknown = set(gates) - FEATURE_GATES
    if unknown:
        raise ValueError(f"unknown JobSet feature gates {sorted(unknown)}; known: {sorted(FEATURE_GATES)}")
    return frozenset(gates)


class JobSetController(Controller):
    name = "jobset-controller"
    create_retry_seconds = 5.0  # simulated seconds before a refused child Job is tried again

    def __init__(self, cluster: Any, *, feature_gates: Iterable[str] = ()):
        super().__init__(cluster)
        self.feature_gates = checked_feature_gates(feature_gates)
        self.jobsets = self.kind("jobset.x-k8s.io", "v1alpha2", "jobsets")
        self.jobs = self.kind("batch", "v1", "jobs")
        self.services = self.kind("", "v1", "services")

    def watched_kinds(self) -> Iterable[Kind]:
        return (self.jobsets, self.jobs)

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        if event.kind.plural == "jobsets":
            return ((event.namespace, event.name),)
        return owner_keys(event, "JobSet")

    def _children(self, jobset: dict[str, Any]) -> list[dict[str, Any]]:
        uid = jobset["metadata"]["uid"]
        return [
            j
            for j in self.store.list(self.jobs, jobset["metadata"]["namespace"])
            if any(r.get("uid") == uid for r in j["metadata"].get("ownerReferences") or ())
        ]

    async def reconcile(self, namespace: str, name: str) -> None:
        jobset = self.store.find(self.jobsets, namespace, name)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return
        spec = jobset["spec"]
        status = copy_of(jobset.get("status") or {})
        status.setdefault("restarts", 0)
        now = self.clock.timestamp()
        children = self._children(jobset)
        attempt = status["restarts"]

        if is_true(jobset, "Completed") or is_true(jobset, "Failed"):
            self._delete_jobs([j for j in children if not is_true(j, "Complete") and not is_true(j, "Failed")])
            self._delete_when_expired(jobset)
            return
        self._ensure_service(jobset)
        suspended = bool(spec.get("suspend"))
        resuming = self._count_execution_attempts(jobset, status, children, suspended, now)

        current = [j for j in children if self._is_current(status, j)]
        stale = [j for j in children if not self._is_current(status, j)]
        self._delete_jobs(stale)

        failed = sorted(
            ((job_failure(j), j) for j in current if job_failure(j)),
            key=lambda item: item[0][2],  # type: ignore[index]
        )
        if failed:
            (reason, message, _), first = failed[0]
            self._on_child_failure(jobset, status, first, reason, message, now)
            return

        if self._succeeded(spec, current):
            self._finish(jobset, status, "Completed", "AllJobsCompleted", "jobset completed successfully", now)
            return

        execution = self._execution_annotation(status)
        created_all = self._create_jobs(jobset, spec, attempt, current, {j["metadata"]["name"] for j in stale}, suspended, execution)
        current = [j for j in self._children(jobset) if self._is_current(status, j)]
        if resuming:  # KEP-1282 §4: the count is persisted before any Job is unsuspended
            jobset = self.set_status(self.jobsets, jobset, status)
        for job in current:
            if bool(job["spec"].get("suspend")) != suspended:
                updated = copy_of(job)
                updated["spec"]["suspend"] = suspended
                if not suspended:
                    self._sync_pod_template(jobset, updated)
                    self._annotate_execution(updated["metadata"], execution)
                    self._annotate_execution(updated["spec"].setdefault("template", {}).setdefault("metadata", {}), execution)
                updated["metadata"].pop("resourceVersion", None)
                self.store.replace(self.jobs, updated)
        conditions = status.get("conditions") or []
        if suspended:
            conditions = set_condition(conditions, "Suspended", "True", "SuspendedJobs", "jobset is suspended", now)
        elif condition(jobset, "Suspended") is not None:
            conditions = set_condition(conditions, "Suspended", "False", "ResumeJobs", "jobset is resumed", now)
        if spec.get("startupPolicy", {}).get("startupPolicyOrder") == "InOrder" and not suspended:
            if created_all and self._all_ready(current, spec):
                conditions = set_condition(conditions, "StartupPolicyInProgress", "False", "InOrderStartupPolicyCompleted", "in order startup policy has completed", now)
                conditions = set_condition(conditions, "StartupPolicyCompleted", "True", "InOrderStartupPolicyCompleted", "in order startup policy has completed", now)
            elif not is_true(jobset, "StartupPolicyCompleted"):
                conditions = set_condition(conditions, "StartupPolicyInProgress", "True", "InOrderStartupPolicyInProgress", "in order startup policy is in progress", now)
        status["conditions"] = conditions
        status["replicatedJobsStatus"] = self._replicated_status(spec, current, status)
        self.set_status(self.jobsets, jobset, status)

    # --- decisions ---------------------------------------------------------------------------

    def _succeeded(self, spec: dict[str, Any], jobs: list[dict[str, Any]]) -> bool:
        policy = spec.get("successPolicy") or {"operator": "All"}
        targets = policy.get("targetReplicatedJobs") or [r["name"] for r in spec["replicatedJobs"]]
        expected = sum(r.get("replicas", 1) for r in spec["replicatedJobs"] if r["name"] in targets)
        complete = [j for j in jobs if j["metadata"]["labels"].get(REPLICATED_JOB_NAME) in targets and is_true(j, "Complete")]
        if policy.get("operator") == "Any":
            return bool(complete)
        return expected > 0 and len(complete) >= expected

    def _on_child_failure(
        self, jobset: dict[str, Any], status: dict[str, Any], job: dict[str, Any], reason: str, message: str, now: str
    ) -> None:
        spec = jobset["spec"]
        policy = spec.get("failurePolicy")
        job_name = job["metadata"]["name"]
        first = f"(first failed job: {job_name})"
        if policy is None:
            self._finish(jobset, status, "Failed", "FailedJobs", f"jobset failed due to one or more job failures {first}", now)
            return
        rule = matching_rule(policy, job["metadata"]["labels"].get(REPLICATED_JOB_NAME, ""), reason, message)
        action = rule["action"] if rule else "RestartJobSet"
        if action == "FailJobSet":
            self._finish(
                jobset, status, "Failed", "FailJobSetFailurePolicyAction",
                f"jobset failed due to FailJobSet failure policy rule {rule['name'] if rule else ''} {first}".replace("  ", " "), now,
            )
            return
        counts = action in ("RestartJobSet", "RestartJob")
        if counts and self._restarts_towards_max(status) >= policy.get("maxRestarts", 0):
            self._finish(jobset, status, "Failed", "ReachedMaxRestarts", f"jobset failed due to reaching max number of restarts {first}", now)
            return
        if action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
            self._restart_job(jobset, status, job, action, counts, first)
            return
        status["restarts"] = status.get("restarts", 0) + 1
        if counts:
            status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
        if self.tracks_execution_attempts and status.get("executionAttempts") is not None:
            status["executionAttempts"] += 1  # KEP-1282 §3: every Job recreated is a new execution
        self.event(
            jobset,
            "Restarting",
            f"restarting jobset ({action}, attempt {status['restarts']}) after job {job_name} failed: {reason}: {message}",
            type_="Warning",
        )
        self._delete_jobs(self._children(jobset))
        self.set_status(self.jobsets, jobset, status)

    def _restart_job(self, jobset: dict[str, Any], status: dict[str, Any], job: dict[str, Any], action: str, counts: bool, first: str) -> None:
        """Recreate only ``job``: its entry of ``jobRestarts`` (and ``jobRestartsCountTowardsMax``) goes up by one."""
        labels = job["metadata"]["labels"]
        replicated, index = labels.get(REPLICATED_JOB_NAME, ""), int(labels.get(JOB_INDEX, "0"))
        entry = self._replicated_entry(jobset, status, replicated)
        fields = ("jobRestarts", "jobRestartsCountTowardsMax") if counts else ("jobRestarts",)
        for field in fields:
            entry[field][index] += 1
        reason = f"{action}FailurePolicyAction"  # constants.go RestartJobActionReason, RestartJobAndIgnoreMaxRestartsActionReason
        self.event(jobset, reason, f"applying {action} failure policy action {first}", type_="Warning")
        self._delete_jobs([job])
        self.set_status(self.jobsets, jobset, status)

    def _replicated_entry(self, jobset: dict[str, Any], status: dict[str, Any], replicated: str) -> dict[str, Any]:
        """``status.replicatedJobsStatus`` of ``replicated``, its per-Job counters filled with zeros
        (``getJobRestarts``: one entry per replica, 0 until a Job is restarted)."""
        replicas = next((r.get("replicas", 1) for r in jobset["spec"]["replicatedJobs"] if r["name"] == replicated), 1)
        entries = status.setdefault("replicatedJobsStatus", [])
        entry = next((e for e in entries if e.get("name") == replicated), None)
        if entry is None:
            entry = {"name": replicated, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
            entries.append(entry)
        for field in ("jobRestarts", "jobRestartsCountTowardsMax"):
            entry[field] = list(entry.get(field) or [0] * replicas)
        return entry

    @staticmethod
    def _restarts_towards_max(status: dict[str, Any]) -> int:
        """``totalRestartsCountTowardsMax``: the global restarts that count, and every counted per-Job one."""
        per_job = sum(sum(e.get("jobRestartsCountTowardsMax") or ()) for e in status.get("replicatedJobsStatus") or ())
        return status.get("restartsCountTowardsMax", 0) + per_job

    @staticmethod
    def _job_restarts(status: dict[str, Any], replicated: str, index: int) -> int:
        entry = next((e for e in status.get("replicatedJobsStatus") or () if e.get("name") == replicated), {})
        restarts = entry.get("jobRestarts") or ()
        return restarts[index] if index < len(restarts) else 0

    def _is_current(self, status: dict[str, Any], job: dict[str, Any]) -> bool:
        """Of the current run: the JobSet's ``restart-attempt``, and a ``job-restart-attempt`` not below
        the Job's entry of ``jobRestarts`` (a Job without the label is kept, as upstream keeps it)."""
        labels = job["metadata"]["labels"]
        if labels.get(RESTART_ATTEMPT) != str(status.get("restarts", 0)):
            return False
        own = labels.get(JOB_RESTART_ATTEMPT)
        return own is None or int(own) >= self._job_restarts(status, labels.get(REPLICATED_JOB_NAME, ""), int(labels.get(JOB_INDEX, "0")))

    # --- execution attempts (KEP-1282, feature gate ExecutionAttemptsTracking) ---------------

    @property
    def tracks_execution_attempts(self) -> bool:
        return EXECUTION_ATTEMPTS_TRACKING in self.feature_gates

    def _count_execution_attempts(
        self, jobset: dict[str, Any], status: dict[str, Any], children: list[dict[str, Any]], suspended: bool, now: str
    ) -> bool:
        """Keep ``status.executionAttempts`` as KEP-1282 §1–2 says; whether this reconcile resumes the JobSet.

        ``nil`` on a JobSet that already ran (restarts, or child Jobs running: a controller upgraded
        under it) becomes ``status.restarts``; on one that never ran, 0 once it runs (its first
        resume, or at once when it was never suspended). Each later suspend → resume adds one, and
        sets ``Suspended`` to False in the same status write, which makes the step happen once per
        resume however often the reconcile runs. With the gate off the field is left as it is.
        """
        if not self.tracks_execution_attempts:
            return False
        resuming = not suspended and is_true(jobset, "Suspended")
        executions = status.get("executionAttempts")
        started = status.get("restarts", 0) > 0 or any(
            not j["spec"].get("suspend") and not is_true(j, "Complete") and not is_true(j, "Failed") for j in children
        )
        if executions is None and started:
            status["executionAttempts"] = status.get("restarts", 0)
        elif executions is None and not suspended:
            status["executionAttempts"] = 0
        elif executions is not None and resuming:
            status["executionAttempts"] = executions + 1
        if resuming:
            status["conditions"] = set_condition(status.get("conditions") or [], "Suspended", "False", "ResumeJobs", "jobset is resumed", now)
        return resuming

    def _execution_annotation(self, status: dict[str, Any]) -> str | None:
        """The ``execution-attempt`` annotation value for this JobSet's Jobs (KEP-1282 §4: 0 while
        the status has none); ``None`` with the gate off, which writes no annotation."""
        if not self.tracks_execution_attempts:
            return None
        return str(status.get("executionAttempts") or 0)

    @staticmethod
    def _annotate_execution(metadata: dict[str, Any], execution: str | None) -> None:
        if execution is not None:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), EXECUTION_ATTEMPT: execution}

    def _finish(self, jobset: dict[str, Any], status: dict[str, Any], kind: str, reason: str, message: str, now: str) -> None:
        conditions = status.get("conditions") or []
        for other in ("StartupPolicyInProgress",):
            if any(c["type"] == other and c["status"] == "True" for c in conditions):
                conditions = set_condition(conditions, other, "False", reason, message, now)
        status["conditions"] = set_condition(conditions, kind, "True", reason, message, now)
        status["terminalState"] = kind
        status["replicatedJobsStatus"] = self._replicated_status(jobset["spec"], self._children(jobset), status)
        self.set_status(self.jobsets, jobset, status)
        self.event(jobset, reason, message, type_="Normal" if kind == "Completed" else "Warning")
        self._delete_jobs([j for j in self._children(jobset) if not is_true(j, "Complete") and not is_true(j, "Failed")])

    # --- children ----------------------------------------------------------------------------

    def _delete_when_expired(self, jobset: dict[str, Any]) -> None:
        """``spec.ttlSecondsAfterFinished``: delete a finished JobSet that long after it finished, as
        JobSet's controller does (pkg/controllers/jobset_controller.go, TTL after finished)."""
        ttl = jobset["spec"].get("ttlSecondsAfterFinished")
        finished = condition(jobset, "Completed") if is_true(jobset, "Completed") else condition(jobset, "Failed")
        if ttl is None or not finished or not finished.get("lastTransitionTime"):
            return
        at = dt.datetime.strptime(finished["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
        left = at.timestamp() + int(ttl) - self.clock.now()
        meta = jobset["metadata"]
        if left > 0:
            self.enqueue_after((meta["namespace"], meta["name"]), left)
            return
        log.info("deleting JobSet %s/%s: %ss after it finished (ttlSecondsAfterFinished)", meta["namespace"], meta["name"], ttl)
        self.store.delete(self.jobsets, meta["namespace"], meta["name"], propagation="Foreground")

    def _all_ready(self, jobs: list[dict[str, Any]], spec: dict[str, Any]) -> bool:
        expected = sum(r.get("replicas", 1) for r in spec["replicatedJobs"])
        return len(jobs) >= expected and all(self._job_ready(j) for j in jobs)

    @staticmethod
    def _job_ready(job: dict[str, Any]) -> bool:
        status = job.get("status") or {}
        parallelism = job["spec"].get("parallelism", 1)
        return status.get("ready", 0) + status.get("succeeded", 0) >= parallelism or is_true(job, "Complete")

    def _create_jobs(
        self,
        jobset: dict[str, Any],
        spec: dict[str, Any],
        attempt: int,
        current: list[dict[str, Any]],
        going: set[str],
        suspended: bool,
        execution: str | None = None,
    ) -> bool:
        """Create the missing Jobs of this attempt; InOrder waits for the previous ones to be ready.
        ``execution``: their ``execution-attempt`` annotation (none with the gate off)."""
        existing = {j["metadata"]["name"]: j for j in current}
        in_order = spec.get("startupPolicy", {}).get("startupPolicyOrder") == "InOrder"
        global_index = 0
        for replicated in spec["replicatedJobs"]:
            names = [f"{jobset['metadata']['name']}-{replicated['name']}-{i}" for i in range(replicated.get("replicas", 1))]
            for index, job_name in enumerate(names):
                if job_name not in existing and job_name not in going:
                    try:
                        job_attempt = self._job_restarts(jobset.get("status") or {}, replicated["name"], index)
                        self._create_job(jobset, replicated, index, global_index + index, attempt, suspended, job_attempt, execution)
                    except ApiError as error:
                        # JobSet's createJobs and reconcileReplicatedJobs (pkg/controllers/jobset_controller.go):
                        # a Warning event on the JobSet, and the reconcile retried with backoff.
                        message = f'job "{job_name}" creation failed with error: {error.message}'
                        self.event(jobset, "JobCreationFailed", message, type_="Warning")
                        self.enqueue_after((jobset["metadata"]["namespace"], jobset["metadata"]["name"]), self.create_retry_seconds)
                        return False
                elif job_name in going:
                    return False
            global_index += len(names)
            if in_order and not suspended:
                jobs = [existing.get(n) for n in names]
                if not all(j is not None and self._job_ready(j) for j in jobs):
                    return False
        return True

    def _labels(self, jobset: dict[str, Any], replicated: dict[str, Any], index: int, global_index: int, attempt: int, job_name: str, job_attempt: int) -> dict[str, str]:
        meta = jobset["metadata"]
        return {
            JOBSET_NAME: meta["name"],
            REPLICATED_JOB_NAME: replicated["name"],
            REPLICATED_JOB_REPLICAS: str(replicated.get("replicas", 1)),
            JOB_INDEX: str(index),
            JOB_GLOBAL_INDEX: str(global_index),
            RESTART_ATTEMPT: str(attempt),
            JOB_RESTART_ATTEMPT: str(job_attempt),
            JOB_KEY: hashlib.sha1(f"{meta['namespace']}/{job_name}".encode()).hexdigest(),
            JOBSET_UID: meta["uid"],
        }

    def _coordinator(self, jobset: dict[str, Any]) -> str | None:
        coordinator = jobset["spec"].get("coordinator")
        if not coordinator:
            return None
        subdomain = (jobset["spec"].get("network") or {}).get("subdomain") or jobset["metadata"]["name"]
        return (
            f"{jobset['metadata']['name']}-{coordinator['replicatedJob']}-{coordinator.get('jobIndex', 0)}-"
            f"{coordinator.get('podIndex', 0)}.{subdomain}"
        )

    def _create_job(
        self,
        jobset: dict[str, Any],
        replicated: dict[str, Any],
        index: int,
        global_index: int,
        attempt: int,
        suspended: bool,
        job_attempt: int,
        execution: str | None = None,
    ) -> None:
        meta = jobset["metadata"]
        job_name = f"{meta['name']}-{replicated['name']}-{index}"
        template = copy_of(replicated["template"])
        labels = self._labels(jobset, replicated, index, global_index, attempt, job_name, job_attempt)
        annotations = dict(labels)
        if execution is not None:  # KEP-1282 §4 (constructJob): on the Job and on its pod template
            annotations[EXECUTION_ATTEMPT] = execution
        coordinator = self._coordinator(jobset)
        if coordinator:
            labels[COORDINATOR] = annotations[COORDINATOR] = coordinator
        job_meta = template.setdefault("metadata", {})
        job_meta["name"] = job_name
        job_meta["namespace"] = meta["namespace"]
        job_meta["labels"] = {**(job_meta.get("labels") or {}), **labels}
        job_meta["annotations"] = {**(job_meta.get("annotations") or {}), **annotations}
        job_meta["ownerReferences"] = [owner_reference(jobset)]
        job_spec = template.setdefault("spec", {})
        job_spec["suspend"] = suspended
        pod = job_spec.setdefault("template", {})
        pod_meta = pod.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
        exclusive = (job_meta.get("annotations") or {}).get("alpha.jobset.sigs.k8s.io/exclusive-topology")
        pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **annotations}
        if exclusive and "alpha.jobset.sigs.k8s.io/exclusive-topology" not in pod_meta["annotations"]:
            pod_meta["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] = exclusive
        network = jobset["spec"].get("network") or {}
        if network.get("enableDNSHostnames", True):
            pod.setdefault("spec", {})["subdomain"] = network.get("subdomain") or meta["name"]
        self._sync_pod_template(jobset, {"spec": job_spec})
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": job_spec}
        self.store.create(self.jobs, job)
        self.event(jobset, "SuccessfulCreate", f"Created job: {job_name}")

    def _sync_pod_template(self, jobset: dict[str, Any], job: dict[str, Any]) -> None:
        """Carry node selectors Kueue injected into the JobSet's templates on admission.

        On resume JobSet copies its replicated job's pod template ``nodeSelector`` into the child
        Job, so each replicated job gets the flavor of its own pod set (a CPU head gets none).
        """
        name = (job.get("metadata", {}).get("labels") or {}).get(REPLICATED_JOB_NAME)
        replicated = next((r for r in jobset["spec"].get("replicatedJobs") or () if r["name"] == name), None)
        if replicated is not None:
            source = ((replicated.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            target = job["spec"].setdefault("template", {}).setdefault("spec", {})
            if source.get("nodeSelector"):
                target["nodeSelector"] = {**(target.get("nodeSelector") or {}), **source["nodeSelector"]}
        injected = (jobset["metadata"].get("annotations") or {}).get("kueue.x-k8s.io/injected-node-selector")
        if injected:
            pod_spec = job["spec"].setdefault("template", {}).setdefault("spec", {})
            pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **json.loads(injected)}

    def _delete_jobs(self, jobs: list[dict[str, Any]]) -> None:
        for job in jobs:
            meta = job["metadata"]
            if meta.get("deletionTimestamp") or self.store.find(self.jobs, meta["namespace"], meta["name"]) is None:
                continue
            self.store.delete(self.jobs, meta["namespace"], meta["name"], propagation="Foreground")

    def _ensure_service(self, jobset: dict[str, Any]) -> None:
        meta = jobset["metadata"]
        network = jobset["spec"].get("network") or {}
        name = network.get("subdomain") or meta["name"]
        if self.store.find(self.services, meta["namespace"], name) is not None:
            return
        self.store.create(
            self.services,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner_reference(jobset)]},
                "spec": {
                    "clusterIP": "None",
                    "selector": {JOBSET_NAME: meta["name"]},
                    "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True),
                },
            },
        )

    def _replicated_status(self, spec: dict[str, Any], jobs: list[dict[str, Any]], status: dict[str, Any]) -> list[dict[str, Any]]:
        """Each replicated job's counts, its per-Job restart counters kept (``jobset_controller.go``)."""
        result = []
        before = {e.get("name"): e for e in status.get("replicatedJobsStatus") or ()}
        for replicated in spec["replicatedJobs"]:
            mine = [j for j in jobs if j["metadata"]["labels"].get(REPLICATED_JOB_NAME) == replicated["name"]]
            kept = {k: v for k, v in before.get(replicated["name"], {}).items() if k in ("jobRestarts", "jobRestartsCountTowardsMax")}
            result.append(
                {
                    **kept,
                    "name": replicated["name"],
                    "ready": sum(1 for j in mine if self._job_ready(j) and not is_true(j, "Complete")),
                    "succeeded": sum(1 for j in mine if is_true(j, "Complete")),
                    "failed": sum(1 for j in mine if is_true(j, "Failed")),
                    "active": sum(1 for j in mine if (j.get("status") or {}).get("active", 0) > 0),
                    "suspended": sum(1 for j in mine if j["spec"].get("suspend")),
                }
            )
        return result

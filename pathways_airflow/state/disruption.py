"""Why a workload stopped: maintenance, preemption, slice loss, queue eviction, or the user's code.

A pure verdict from the objects the cluster shows at that moment — nodes (maintenance labels,
the impending-termination taint, Spot), pods (``DisruptionTarget`` and its reason, ``status.reason``
Terminated / NodeShutdown / Evicted, exit codes), Jobs (``PodFailurePolicy`` failures, worker
pods lost with their hosts), the JobSet and the Kueue Workload — with the evidence as short
strings a human can check. Conditions decide before exit codes: a program that traps SIGTERM to
save a checkpoint may exit 0 or 143 either way.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pathways_airflow.state.conditions import condition, true_condition
from pathways_airflow import well_known
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.parse import workload_from_pathwaysjob
from pathways_airflow.spec.render import USER_ERROR_RULE_NAME, XPK_SYSTEM_EXIT_CODES, replicated_pod_spec, tpu_node_selector
from pathways_airflow.state.model import Observation
from pathways_airflow.state.workload_parts import (
    Nodes, NodesByName, as_int, elastic_slices, head_job_name, is_being_deleted, metadata_of, name_of, newest_pod_per_host, nodes_by_name,
    of_current_restart_attempt, pods_of_current_attempt, pods_per_slice, status_of, worker_job_name, worker_replicated_job,
)

SHUTDOWN_REASONS = ("Terminated", "NodeShutdown")
NO_EVIDENCE = "no pod shows why it stopped"
FIRST_FAILED_JOB = re.compile(r"\(first failed job: ([^)\s]+)\)")


class Verdict(str, enum.Enum):
    MAINTENANCE = "MAINTENANCE"
    PREEMPTION = "PREEMPTION"
    SLICE_FAILURE = "SLICE_FAILURE"
    QUEUE_EVICTION = "QUEUE_EVICTION"
    USER_ERROR = "USER_ERROR"
    UNKNOWN_INFRA = "UNKNOWN_INFRA"

    @property
    def is_disruption(self) -> bool:
        """Infrastructure took the workload away: resubmitting (and resuming) is the answer."""
        return self in (Verdict.MAINTENANCE, Verdict.PREEMPTION, Verdict.SLICE_FAILURE, Verdict.UNKNOWN_INFRA)


@dataclass(frozen=True)
class Classification:
    verdict: Verdict
    evidence: tuple[str, ...] = ()
    exit_code: int | None = None
    container: str | None = None
    pod: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "evidence": list(self.evidence),
            "exit_code": self.exit_code,
            "container": self.container,
            "pod": self.pod,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Classification":
        return cls(Verdict(data["verdict"]), tuple(data.get("evidence") or ()), data.get("exit_code"), data.get("container"), data.get("pod"))


@dataclass(frozen=True)
class ExitCodePolicy:
    """Which non-zero exit codes mean "the system failed" (default: xpk's 42 and 127–255)."""

    system_exit_codes: frozenset[int] = field(default_factory=lambda: frozenset(XPK_SYSTEM_EXIT_CODES))

    def is_system(self, code: int) -> bool:
        return code in self.system_exit_codes


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def node_disruption(node: Mapping[str, Any] | None) -> tuple[Verdict, str] | None:
    """What a node says happened to it, if anything."""
    if node is None:
        return Verdict.SLICE_FAILURE, "node is gone"
    name = (node.get("metadata") or {}).get("name", "?")
    labels = _labels(node)
    taints = [t.get("key") for t in (node.get("spec") or {}).get("taints") or ()]
    ready = condition(node, "Ready")
    if well_known.ACTIVE_MAINTENANCE in labels:
        return Verdict.MAINTENANCE, f"node {name}: {well_known.ACTIVE_MAINTENANCE}={labels[well_known.ACTIVE_MAINTENANCE]}"
    if labels.get(well_known.SPOT) == "true" and (well_known.IMPENDING_TERMINATION in taints or (ready and ready.get("status") != "True")):
        return Verdict.PREEMPTION, f"node {name}: Spot, being reclaimed"
    if well_known.OUT_OF_SERVICE in taints:
        return Verdict.SLICE_FAILURE, f"node {name}: {well_known.OUT_OF_SERVICE} taint"
    if well_known.IMPENDING_TERMINATION in taints:
        if well_known.SCHEDULED_MAINTENANCE in labels:
            return Verdict.MAINTENANCE, f"node {name}: {well_known.IMPENDING_TERMINATION} taint, maintenance scheduled"
        return Verdict.SLICE_FAILURE, f"node {name}: {well_known.IMPENDING_TERMINATION} taint"
    if ready is not None and ready.get("status") != "True":
        return Verdict.SLICE_FAILURE, f"node {name}: Ready={ready.get('status')} ({ready.get('reason', '')})"
    return None


def pod_disruption(pod: Mapping[str, Any]) -> str | None:
    """The pod's own sign of having been disrupted, if any."""
    name = (pod.get("metadata") or {}).get("name", "?")
    target = true_condition(pod, "DisruptionTarget")
    if target is not None:
        return f"pod {name}: DisruptionTarget ({target.get('reason', '')})"
    reason = (pod.get("status") or {}).get("reason")
    if reason in SHUTDOWN_REASONS or reason == "Evicted":
        return f"pod {name}: {reason}"
    return None


def main_exit(pod: Mapping[str, Any]) -> tuple[str, int] | None:
    """(container, exit code) of the pod's first container that ended non-zero (this run or the last)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            code = (state.get("terminated") or {}).get("exitCode")
            if code not in (None, 0):
                return status.get("name", ""), int(code)
    return None


def lost_workers(jobs: Iterable[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], worker_job: str) -> list[str]:
    """Evidence that Pathways workers were lost: a worker Job counts failed pods that no failed
    container accounts for.

    Kubernetes counts a pod deleted before it finished (its host lost, the taint manager) as
    failed in its Job's ``status.failed``, and the count outlives the pod. A worker Job that
    counts more failures than the worker pods still seen failing by an exit code of their own
    lost those workers to the infrastructure: the head's exit that follows is no bug. ``pods``
    are the attempt's pods as seen (deleted ones too); a Job state read while the Job was being
    deleted is not used, as the pods it loses then are its own teardown.
    """
    found: list[str] = []
    for job in jobs:
        meta = job.get("metadata") or {}
        if _labels(job).get(well_known.REPLICATED_JOB) != worker_job or meta.get("deletionTimestamp"):
            continue
        counted = int((job.get("status") or {}).get("failed") or 0)
        crashed = sum(
            1
            for pod in pods
            if _labels(pod).get(well_known.JOB_NAME) == meta.get("name")
            and (pod.get("status") or {}).get("phase") == "Failed"
            and pod_disruption(pod) is None
            and main_exit(pod) is not None
        )
        if counted > crashed:
            found.append(
                f"job {meta.get('name')}: {counted - crashed} worker pod(s) gone before they finished "
                f"(status.failed={counted}, {crashed} failed by an exit code of their own)"
            )
    return found


def failures_since(jobs: Iterable[Mapping[str, Any]], ridden_out: Mapping[str, int]) -> list[Mapping[str, Any]]:
    """``jobs`` with the failures ``ridden_out`` counts (by Job uid, else name) taken off their
    ``status.failed``: with elastic slices a worker Job counts the pods of every slice loss the
    program rode out, and only failures since then say anything of a later stop (:func:`lost_workers`)."""
    found: list[Mapping[str, Any]] = []
    for job in jobs:
        before, status = ridden_out.get(failures_key(job), 0), status_of(job)
        found.append({**job, "status": {**status, "failed": max(0, as_int(status.get("failed")) - before)}} if before else job)
    return found


def slice_losses_counted(jobs: Iterable[Mapping[str, Any]], jobset: Mapping[str, Any] | None, *, with_deleted: bool = False) -> int:
    """The slice losses the worker Jobs of the current restart attempt count: a loss fails the
    pods of one slice (one per host), so each Job's ``status.failed`` over the pods of a slice,
    rounded up. The Jobs keep the count when the lost pods are gone, however the loss went unseen.
    ``with_deleted``: Jobs being deleted count too (their last state: a finished workload's)."""
    per_slice = pods_per_slice(jobset)
    return sum(-(-as_int(status_of(j).get("failed")) // per_slice) for j in worker_jobs_now(jobs, jobset, with_deleted=with_deleted))


def worker_jobs_now(jobs: Iterable[Mapping[str, Any]], jobset: Mapping[str, Any] | None, *, with_deleted: bool = False) -> list[Mapping[str, Any]]:
    """The slices' Jobs of the current restart attempt, not being deleted (``with_deleted``: those too)."""
    return [j for j in of_current_restart_attempt(jobs, jobset) if is_of_the_slices(j, jobset) and (with_deleted or not is_being_deleted(j))]


def failures_key(job: Mapping[str, Any]) -> str:
    """How a Job's ridden-out failures are kept: by uid (a restart's Jobs keep the names), else name."""
    return str(metadata_of(job).get("uid") or name_of(job))


def classify(
    *,
    pods: Sequence[Mapping[str, Any]],
    nodes: Nodes | None,
    jobs: Sequence[Mapping[str, Any]] = (),
    jobset: Mapping[str, Any] | None = None,
    kueue_workload: Mapping[str, Any] | None = None,
    exit_codes: ExitCodePolicy = ExitCodePolicy(),
    recorded: "Classification | None" = None,
    ran_on: Sequence[str] = (),
    outlived: Collection[str] = (),
) -> Classification:
    """The verdict on why the workload's current attempt stopped (``nodes``: the nodes now;
    ``None`` when they could not be read, which says nothing of them; ``ran_on``: the nodes the
    attempt's workers are known to have run on, when known: then only they can vouch against the
    head-first rule below, not a node of the same shape the attempt never used, and not one whose
    going down the program outlived, ``outlived``).

    ``recorded`` is a disruption a watcher saw during this attempt and wrote on the workload
    (:mod:`pathways_airflow.run.annotations`): its pods may be gone since, and it outranks the
    head's exit code as any other disruption evidence does.
    """
    if kueue_workload is not None:
        for type_ in ("Evicted", "Preempted"):
            found = true_condition(kueue_workload, type_)
            if found:
                return Classification(Verdict.QUEUE_EVICTION, (f"Kueue Workload {type_} ({found.get('reason', '')}): {found.get('message', '')}",))
    current = _current_pods(pods, jobset)
    by_name = nodes_by_name(nodes or ())

    evidence: list[str] = []
    verdicts: list[Verdict] = []
    for pod in current:
        sign = pod_disruption(pod)
        if sign is None:
            continue
        evidence.append(sign)
        node_name = (pod.get("spec") or {}).get("nodeName")
        said = node_disruption(by_name.get(node_name)) if node_name and nodes is not None else None  # unread nodes are not lost ones
        target = true_condition(pod, "DisruptionTarget") or {}
        if said:
            verdicts.append(said[0])
            evidence.append(said[1])
        elif target.get("reason") == "PreemptionByScheduler":
            verdicts.append(Verdict.PREEMPTION)
        elif target.get("reason") == "DeletionByTaintManager":
            verdicts.append(Verdict.SLICE_FAILURE)
        else:
            verdicts.append(Verdict.UNKNOWN_INFRA)
    for job in jobs:
        if _failed_on_a_disruption(job):
            evidence.append(f"job {(job.get('metadata') or {}).get('name')}: {(true_condition(job, 'Failed') or {}).get('message')}")
            verdicts.append(Verdict.UNKNOWN_INFRA)
    current_jobs = of_current_restart_attempt(jobs, jobset)
    for sign in lost_workers(current_jobs, current, worker_job_name(jobset)):
        evidence.append(sign)
        verdicts.append(Verdict.SLICE_FAILURE)
    if recorded is not None and recorded.verdict.is_disruption:  # what is still seen is not said twice
        seen_now = set(evidence)
        evidence.extend(e for e in recorded.evidence if e.split(": ", 1)[-1] not in seen_now)
        verdicts.append(recorded.verdict)
    if verdicts:
        for preferred in (Verdict.MAINTENANCE, Verdict.PREEMPTION, Verdict.SLICE_FAILURE, Verdict.UNKNOWN_INFRA):
            if preferred in verdicts:
                return Classification(preferred, tuple(dict.fromkeys(evidence)))

    head = head_job_name(jobset)
    heads = [p for p in current if _labels(p).get(well_known.REPLICATED_JOB) == head] or current
    for pod in heads:
        ended = main_exit(pod)
        if ended is None:
            continue
        container, code = ended
        name = (pod.get("metadata") or {}).get("name")
        if exit_codes.is_system(code):
            return Classification(
                Verdict.UNKNOWN_INFRA,
                (f"pod {name}: container {container} exited {code}, a system exit code, with no disruption evidence",),
                code, container, name,
            )
        return Classification(Verdict.USER_ERROR, (f"pod {name}: container {container} exited {code}",), code, container, name)
    head_job = head_failed_first(jobset)
    if head_job is not None and nodes is not None and not workers_nodes_disrupted(jobset, by_name, ran_on, outlived):
        return Classification(
            Verdict.USER_ERROR,
            (f"the JobSet's first failed job is the head's ({head_job}); no pod, Job or node of its slice shape shows a disruption",),
        )
    return Classification(Verdict.UNKNOWN_INFRA, (NO_EVIDENCE,))


def _current_pods(pods: Sequence[Mapping[str, Any]], jobset: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The pods of the JobSet's current restart attempt
    (:func:`~pathways_airflow.state.workload_parts.of_current_restart_attempt`); all of them when none is."""
    return of_current_restart_attempt(pods, jobset) or list(pods)


def _failed_on_a_disruption(job: Mapping[str, Any]) -> bool:
    failed = true_condition(job, "Failed")
    return bool(failed and failed.get("reason") == "PodFailurePolicy" and "DisruptionTarget" in failed.get("message", ""))


def _current_workers(observation: Observation) -> list[Mapping[str, Any]]:
    return [p for p in pods_of_current_attempt(observation) if is_of_the_slices(p, observation.jobset)]


def rode_out_slice_losses(observation: Observation) -> bool:
    """With elastic slices, whether the program got through the slice losses of its current
    attempt: some worker host runs on a replacement pod, and every host's newest pod has started
    and shows no disruption. The lost pods, what a trigger saw of their loss, and the nodes the
    workers ran on before it then explain no later failure: a later exit of the program is its
    own, judged on the pods and nodes it runs on now (:func:`without_replaced_pods`,
    :func:`nodes_workers_run_on`). Needs no record: the notes of a recovery may never have been
    written (an API outage, a triggerer lost meanwhile)."""
    workers = _current_workers(observation)
    newest = newest_pod_per_host(workers)
    if not elastic_slices(observation) or len(newest) == len(workers):
        return False
    return all((p.get("status") or {}).get("startTime") and not pod_disruption(p) for p in newest)


def without_replaced_pods(pods: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """``pods`` less those a newer pod of the same host replaced (:func:`~pathways_airflow.state.workload_parts.newest_pod_per_host`)."""
    kept = {id(p) for p in newest_pod_per_host(pods)}
    return tuple(p for p in pods if id(p) in kept)


def is_of_the_slices(obj: Mapping[str, Any], jobset: Mapping[str, Any] | None) -> bool:
    """A child Job or pod of the slices' replicated job (:func:`~pathways_airflow.state.workload_parts.worker_job_name`)."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(well_known.REPLICATED_JOB) == worker_job_name(jobset)


def nodes_workers_run_on(observation: Observation) -> tuple[str, ...]:
    """The nodes of each worker host's newest pod."""
    return tuple(sorted({str(p["spec"]["nodeName"]) for p in newest_pod_per_host(_current_workers(observation)) if (p.get("spec") or {}).get("nodeName")}))


def shown_without_nodes(pods: Sequence[Mapping[str, Any]], jobs: Iterable[Mapping[str, Any]], jobset: Mapping[str, Any] | None) -> bool:
    """Whether the attempt's pods or Jobs already prove a disruption (a ``DisruptionTarget``, a pod
    its node shut down or evicted, a Job failed on ``DisruptionTarget``). The nodes then only tell
    which kind it was, so a verdict need not wait long for them (:data:`NODES_REFINE_WITHIN_SECONDS`);
    where only the nodes can vouch that a failure was no bug, the verdict waits for them."""
    current = _current_pods(pods, jobset)
    return any(pod_disruption(p) is not None for p in current) or any(_failed_on_a_disruption(j) for j in jobs)


NODES_REFINE_WITHIN_SECONDS = 5.0
"""How long a verdict the pods already prove waits for the node listing that names its kind."""


def worker_node_selector(workload: Mapping[str, Any] | None) -> Mapping[str, str] | None:
    """The labels of the nodes the workload's TPU workers run on, or ``None`` when it cannot say.

    A JobSet's worker template carries them; a PathwaysJob names a machine type and a topology,
    which select the same nodes its controller's JobSet will (:func:`~pathways_airflow.spec.render.tpu_node_selector`).
    """
    if (workload or {}).get("kind") == "PathwaysJob":
        try:
            return tpu_node_selector(workload_from_pathwaysjob(workload)[0])
        except (InvalidWorkloadSpec, TypeError, ValueError, AttributeError, KeyError, IndexError):
            return None
    return replicated_pod_spec(worker_replicated_job(workload)).get("nodeSelector") or {}


def slice_nodes_disrupted(workload: Mapping[str, Any] | None, nodes: Nodes) -> bool:
    """Whether any node the workers could run on (their node selector: accelerator and topology)
    shows a disruption now. When the lost workers' pods and Jobs were never seen (a triggerer
    restarted, a watch relisted), their slice's nodes are what is left to say so. A workload whose
    nodes cannot be told counts as disrupted: no node then vouches for a bug.

    A node that went down and came back is not counted: its ``Ready`` transition cannot tell a
    slice the workload ran on from one it never used (another attempt's, down when it started),
    and counting it resubmits bugs. What a trigger saw while the workload ran is kept instead
    (:data:`~pathways_airflow.run.annotations.DISRUPTION_SEEN_ANNOTATION`), and so are the nodes
    its workers ran on (:mod:`~pathways_airflow.state.ran_on`), whose going down does count.
    """
    selector = worker_node_selector(workload)
    if selector is None:
        return True
    return any(all(_labels(node).get(key) == value for key, value in selector.items()) for node in disrupted_nodes(nodes))


def disrupted_nodes(nodes: Nodes) -> Iterable[Mapping[str, Any]]:
    """The nodes that show a disruption now (:func:`node_disruption`): a node cache's own list
    (:class:`~pathways_airflow.state.workload_parts.NodesByName`), else each node looked at."""
    if isinstance(nodes, NodesByName):
        return nodes.disrupted()
    return (node for node in nodes_by_name(nodes).values() if node_disruption(node) is not None)


def workers_nodes_disrupted(
    workload: Mapping[str, Any] | None, nodes: Nodes, ran_on: Sequence[str] = (), outlived: Collection[str] = ()
) -> bool:
    """Whether a node that can vouch for a disruption of the workers shows one now: the nodes they
    are known to have run on (``ran_on``, a gone one counting as disrupted; not those whose going
    down the program outlived: ``outlived``, :func:`~pathways_airflow.state.ran_on.outlived_by_the_program`),
    else any node of their slice shape (:func:`slice_nodes_disrupted`)."""
    if not ran_on:
        return slice_nodes_disrupted(workload, nodes)
    by_name = nodes_by_name(nodes)
    return any(node_disruption(by_name.get(name)) is not None for name in ran_on if name not in outlived)


def head_failed_first(jobset: Mapping[str, Any] | None) -> str | None:
    """The head's Job, when the JobSet's own failure message names it as the first to fail.

    The head's pod, and with it the exit code, may be gone before anyone read it (the JobSet
    deletes a failed attempt's Jobs; a watch relisting after 410 never sees the deletion). The
    JobSet still says which child failed first, ``... (first failed job: <name>)``
    (kubernetes-sigs/jobset ``messageWithFirstFailedJob``). Asked only once no pod, node or Job
    showed a disruption, and only when the nodes of the workers' slice shape are healthy
    (:func:`slice_nodes_disrupted`): a lost slice also makes the head fail first, as JAX notices.

    Not asked of a JobSet that carries the user-error failure policy rule (the ``jobset``
    backend): that rule already fails it on the user's exit codes, so a head that failed first
    without the rule firing exited with a system code.
    """
    if not jobset or has_the_user_error_rule(jobset):
        return None
    failed = true_condition(jobset, "Failed")
    found = FIRST_FAILED_JOB.search((failed or {}).get("message") or "")
    name = (jobset.get("metadata") or {}).get("name")
    if found and name and found.group(1).startswith(f"{name}-{head_job_name(jobset)}-"):
        return found.group(1)
    return None


def has_the_user_error_rule(jobset: Mapping[str, Any]) -> bool:
    """Whether the JobSet's failure policy tells the user's exit codes apart (:data:`USER_ERROR_RULE_NAME`)."""
    rules = (((jobset.get("spec") or {}).get("failurePolicy")) or {}).get("rules") or ()
    return any(isinstance(rule, Mapping) and rule.get("name") == USER_ERROR_RULE_NAME for rule in rules)


def worth_a_second_look(classification: Classification) -> bool:
    """A verdict the next watch events could still change, and that decides whether a slice is
    spent again: a user's bug (the workers' disruption may not have arrived yet), or no evidence
    at all (the head's exit code may not have)."""
    return classification.verdict is Verdict.USER_ERROR or classification.evidence == (NO_EVIDENCE,)

"""A workload the user already has — a PathwaysJob or a JobSet — read, checked and supervised. Pure.

Users arrive with YAML: ``gcluster job submit --pathways --dry-run-out`` (Cluster Toolkit's
``pkg/orchestrator/gke/templates/pathways_jobset.tmpl``), ``xpk workload create-pathways``
(``src/xpk/templates/pathways_workload_create.yaml.j2``), the PathwaysJob of google/pathways-job's
samples, JobSet's multislice examples. :func:`read_manifest` understands such a manifest: which
kind, where the user's program runs, and the TPU shape it asks for (from the PathwaysJob's
``workers`` or the JobSet's node selectors, ``google.com/tpu`` limits and replicas). What it
cannot supervise is refused naming what was found, before anything is created.

:func:`supervise` adds what the provider's guarantees need, and nothing silently: each
:class:`Change` says what was added or changed and why (the dry run and the task log show them).
The user's containers, commands, node selectors, labels, annotations, ``maxRestarts`` and own
failure-policy rules are kept as written, in their order.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from pathways_airflow import well_known
from pathways_airflow.checkpoints import Checkpoint
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem, raise_if_any
from pathways_airflow.spec.names import MAX_LABEL_VALUE, MAX_WORKLOAD_NAME
from pathways_airflow.spec.render import (
    DISRUPTION_RULE_NAME,
    HEAD_JOB,
    JOBSET_API_VERSION,
    PATHWAYSJOB_API_VERSION,
    USER_ERROR_RULE_NAME,
    replicated_pod_spec,
)
from pathways_airflow.spec.tpu import MACHINE_TYPES, TPU_RESOURCE, SliceShape, pod_spec_chips, slice_shape
from pathways_airflow.spec.serving import LWS_API_VERSION, render_service
from pathways_airflow.spec.workload import with_resume_env

BACKEND_OF_KIND = {("PathwaysJob", PATHWAYSJOB_API_VERSION): "pathwaysjob", ("JobSet", JOBSET_API_VERSION): "jobset"}
"""The kinds a task can supervise, by ``(kind, apiVersion)``, and the backend each is watched as."""
MANIFEST_FILE_SUFFIXES = (".yaml", ".yml", ".json")
PATHWAYS_IMAGES = ("/pathways/server", "/pathways/proxy_server", "/pathways/colocated_python")
"""Image paths of Pathways' own containers (resource manager, proxy, worker, sidecar): never the user's program."""
DISRUPTION_POD_RULE = {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
"""A child Job's pod failure policy rule for a pod the infrastructure ended (maintenance, preemption,
eviction): the Job fails with reason ``PodFailurePolicy`` and a message naming ``DisruptionTarget``."""
CONTROLLER = "controller"
"""Where a PathwaysJob's user program runs: its ``spec.controller.template``."""


@dataclass(frozen=True)
class Change:
    """One thing the provider added to or changed in the user's manifest, and why."""

    path: str
    now: Any
    why: str
    was: Any = None

    def line(self) -> str:
        shown = lambda value: json.dumps(value, sort_keys=True) if not isinstance(value, str) else value  # noqa: E731
        before = "" if self.was is None else f"{shown(self.was)} → "
        return f"{self.path}: {before}{shown(self.now)}  ({self.why})"


@dataclass(frozen=True)
class UserWorkload:
    """A user's manifest as understood: its kind, where the program runs, the TPU shape it holds."""

    manifest: dict[str, Any]
    backend: str
    main_job: str | None
    """The replicated job (``controller`` for a PathwaysJob) whose pod runs the user's program."""
    main_container: str | None
    shape: SliceShape
    num_slices: int

    @property
    def total_chips(self) -> int:
        return self.shape.chips * self.num_slices

    @property
    def name(self) -> str:
        return name_of(self.manifest)

    @property
    def queue_name(self) -> str | None:
        """The Kueue queue the manifest itself names, if any."""
        return ((self.manifest.get("metadata") or {}).get("labels") or {}).get(well_known.QUEUE_NAME)

    def namespace_for(self, given: str) -> str:
        return namespace_for(self.manifest, given)

    @property
    def max_restarts(self) -> int:
        """The restarts the manifest allows: a PathwaysJob's ``maxRestarts``, a JobSet's ``failurePolicy.maxRestarts``."""
        spec = self.manifest.get("spec") or {}
        written = spec.get("maxRestarts") if self.backend == "pathwaysjob" else (spec.get("failurePolicy") or {}).get("maxRestarts")
        return int(written or 0)

    def tpu(self) -> dict[str, Any]:
        """The TPU shape, as a task's result reports it."""
        return {"machine_type": self.shape.machine_type.name, "topology": self.shape.topology, "slices": self.num_slices, "chips": self.total_chips}


def name_of(manifest: Mapping[str, Any]) -> str:
    """What the user called it: the prefix of every name the task gives it."""
    meta = manifest.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "workload")


def namespace_for(manifest: Mapping[str, Any], given: str) -> str:
    """Where it runs: the manifest's own namespace, else ``given`` (the operator's); a manifest
    naming another namespace than one set explicitly (not ``default``) is refused."""
    written = (manifest.get("metadata") or {}).get("namespace")
    if written and written != given and given != "default":
        raise InvalidWorkloadSpec([SpecProblem("namespace", given, f"differs from the manifest's namespace {written!r}; set one of them")])
    return written or given


# --- reading ---------------------------------------------------------------------------------------


def is_manifest_file(value: Any) -> bool:
    """Whether ``value`` names a manifest file (as Airflow's ``template_ext`` would load it)."""
    return isinstance(value, str) and "\n" not in value and value.strip().endswith(MANIFEST_FILE_SUFFIXES)


def manifest_objects(source: Any) -> list[dict[str, Any]]:
    """The objects of ``source``: a mapping, or YAML or JSON text of one or more documents."""
    if isinstance(source, Mapping):
        return [_without_nulls(source)]
    if not isinstance(source, str):
        raise InvalidWorkloadSpec([SpecProblem("manifest", type(source).__name__, "must be a dict, YAML or JSON text, or a .yaml/.yml/.json file")])
    try:
        documents = [d for d in yaml.safe_load_all(source) if d is not None]
    except yaml.YAMLError as error:
        raise InvalidWorkloadSpec([SpecProblem("manifest", source[:80], f"is not YAML or JSON: {error}")]) from None
    strange = next((d for d in documents if not isinstance(d, Mapping)), None)
    if strange is not None:
        raise InvalidWorkloadSpec([SpecProblem("manifest", str(strange)[:80], "is not a Kubernetes object")])
    return [_without_nulls(d) for d in documents]


def _found(documents: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{d.get('kind')} {(d.get('metadata') or {}).get('name')}" for d in documents) or "nothing"


def manifest_object(source: Any) -> dict[str, Any]:
    """The one object of ``source`` (see :func:`manifest_objects`)."""
    documents = manifest_objects(source)
    if len(documents) != 1:
        raise InvalidWorkloadSpec([SpecProblem("manifest", _found(documents), f"holds {len(documents)} objects; give one workload per task")])
    return documents[0]


def _without_nulls(value: Any) -> Any:
    """The object as the API server stores it: a field written ``null`` (an empty ``metadata:``) is absent."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def read_manifest(source: Any, *, main_container: str | None = None) -> UserWorkload:
    """Understand a user's PathwaysJob or JobSet; every problem is raised at once, naming what was found."""
    manifest = manifest_object(source)
    kind, api_version = manifest.get("kind"), manifest.get("apiVersion")
    backend = BACKEND_OF_KIND.get((kind, api_version))
    if backend is None:
        valid = "; ".join(f"{k} {v}" for k, v in BACKEND_OF_KIND)
        raise InvalidWorkloadSpec([SpecProblem("manifest", f"{kind} {api_version}", f"is not a workload this operator supervises; valid: {valid}")])
    if backend == "pathwaysjob":
        return _read_pathwaysjob(manifest, main_container)
    return _read_jobset(manifest, main_container)


def _read_pathwaysjob(manifest: dict[str, Any], main_container: str | None) -> UserWorkload:
    spec = manifest.get("spec") or {}
    workers = spec.get("workers") or []
    if not workers or not isinstance(workers[0], Mapping):
        raise InvalidWorkloadSpec([SpecProblem("manifest", "spec.workers", "is empty: the PathwaysJob requests no TPU")])
    worker = workers[0]
    machine = MACHINE_TYPES.get(str(worker.get("type")))
    if machine is None:
        raise InvalidWorkloadSpec([SpecProblem("manifest", worker.get("type"), f"spec.workers[0].type is not a TPU machine type; valid: {', '.join(sorted(MACHINE_TYPES))}")])
    shape = slice_shape(machine, str(worker.get("topology", "")))
    controller = spec.get("controller") or {}
    template = controller.get("template")
    name = None
    if isinstance(template, Mapping):
        containers = [c.get("name") for c in ((template.get("spec") or {}).get("containers") or [])]
        wanted = main_container or controller.get("mainContainerName") or ("main" if "main" in containers else None)
        name = _one_container("spec.controller.template", containers, wanted)
    return UserWorkload(manifest, "pathwaysjob", CONTROLLER, name, shape, int(worker.get("numSlices", 1)))


def _read_jobset(manifest: dict[str, Any], main_container: str | None) -> UserWorkload:
    jobs = [j for j in (manifest.get("spec") or {}).get("replicatedJobs") or [] if isinstance(j, Mapping)]
    tpu_jobs = [j for j in jobs if pod_spec_chips(replicated_pod_spec(j)) > 0]
    if not tpu_jobs:
        found = ", ".join(str(j.get("name")) for j in jobs) or "none"
        raise InvalidWorkloadSpec([SpecProblem("manifest", f"replicated jobs: {found}", f"no container requests {TPU_RESOURCE}: the JobSet holds no TPU slice")])
    problems: list[SpecProblem] = _job_name_problems(manifest, jobs)
    if len(tpu_jobs) > 1:
        problems.append(SpecProblem("manifest", ", ".join(str(j.get("name")) for j in tpu_jobs), "more than one replicated job requests TPUs; give one slice shape per workload"))
    workers = tpu_jobs[0]
    shape = _jobset_shape(workers, problems)
    forever = restarts_forever_on_a_bug(manifest)
    if forever:
        problems.append(SpecProblem("manifest", "spec.failurePolicy", forever))
    coordinator = ((manifest.get("spec") or {}).get("coordinator") or {}).get("replicatedJob")
    main_job = next((j for j in jobs if j.get("name") == (coordinator or HEAD_JOB)), None) or workers  # else every pod runs it
    candidates = [str(c.get("name")) for c in replicated_pod_spec(main_job).get("containers") or () if not _is_pathways_image(c.get("image"))]
    try:
        name = _one_container(f"replicated job {main_job.get('name')}", candidates, main_container)
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
        name = None
    raise_if_any(problems)
    assert shape is not None
    return UserWorkload(manifest, "jobset", str(main_job.get("name")), name, shape, int(workers.get("replicas", 1)))


def _job_name_problems(manifest: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]]) -> list[SpecProblem]:
    """Replicated job names too long for the names derived from the task's workload name (at most
    :data:`~pathways_airflow.spec.names.MAX_WORKLOAD_NAME` characters, ``N``; see the table in
    :mod:`pathways_airflow.spec.names`): a pod's hostname ``N-<job>-<slice>-<pod>`` must fit in 63,
    and the coordinator label ``N-<job>-0-0.N`` too, which leaves the coordinator's job as many
    characters as ``pathways-head`` has."""
    coordinator = ((manifest.get("spec") or {}).get("coordinator") or {}).get("replicatedJob")
    problems = []
    for job in jobs:
        name = str(job.get("name", ""))
        limit = len(HEAD_JOB) if name == coordinator else MAX_LABEL_VALUE - MAX_WORKLOAD_NAME - len("--999-99")
        if len(name) > limit:
            problems.append(SpecProblem("manifest", f"replicated job {name}", f"is {len(name)} characters; the pod names derived from it need it at most {limit}"))
    return problems


def _jobset_shape(workers: Mapping[str, Any], problems: list[SpecProblem]) -> SliceShape | None:
    return _pod_shape(replicated_pod_spec(workers), f"replicated job {workers.get('name')}'s", problems)


def _pod_shape(pod: Mapping[str, Any], whose: str, problems: list[SpecProblem]) -> SliceShape | None:
    """The slice a TPU pod template belongs to: its node selector's accelerator and topology, and
    its ``google.com/tpu`` limit (chips per VM) name the machine type."""
    selector = pod.get("nodeSelector") or {}
    accelerator, topology = selector.get(well_known.ACCELERATOR), selector.get(well_known.TOPOLOGY)
    chips_per_vm = max(int(((c.get("resources") or {}).get("limits") or {}).get(TPU_RESOURCE, 0)) for c in pod.get("containers") or ())
    machine = next((m for m in MACHINE_TYPES.values() if m.accelerator == accelerator and m.chips_per_vm == chips_per_vm), None)
    if machine is None or not topology:
        problems.append(SpecProblem(
            "manifest", f"{well_known.ACCELERATOR}={accelerator}, {well_known.TOPOLOGY}={topology}, {chips_per_vm} chips per pod",
            f"{whose} node selector and {TPU_RESOURCE} limit name no TPU machine type",
        ))
        return None
    try:
        return slice_shape(machine, str(topology))
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
        return None


def _one_container(where: str, candidates: Sequence[Any], wanted: str | None) -> str:
    if wanted is not None:
        if wanted not in candidates:
            raise InvalidWorkloadSpec([SpecProblem("main_container", wanted, f"is not a container of {where}; its containers: {', '.join(map(str, candidates)) or 'none'}")])
        return wanted
    if len(candidates) != 1:
        raise InvalidWorkloadSpec([SpecProblem(
            "main_container", None, f"{where} has {len(candidates)} containers that could run the program ({', '.join(map(str, candidates)) or 'none'}); name one with main_container=",
        )])
    return str(candidates[0])


def _is_pathways_image(image: Any) -> bool:
    return isinstance(image, str) and any(part in image for part in PATHWAYS_IMAGES)


# --- supervising ---------------------------------------------------------------------------------


def restarts_forever_on_a_bug(manifest: Mapping[str, Any]) -> str | None:
    """Why a JobSet's own failure policy would restart a deterministic bug without end, if it would:
    a rule that restarts ignoring ``maxRestarts`` on every failure, or on every pod-failure-policy
    failure (a bug's exit is one, once the provider's exit-code rule is on the program's job)
    rather than only a disruption's."""
    for rule in ((manifest.get("spec") or {}).get("failurePolicy") or {}).get("rules") or ():
        if rule.get("action") not in RESTARTS_IGNORING_MAX or _keeps_disruptions_free(rule):
            continue
        reasons = rule.get("onJobFailureReasons") or ()
        if (not reasons and not rule.get("onJobFailureMessagePatterns")) or "PodFailurePolicy" in reasons:
            return (f"failure policy rule {rule.get('name') or '(unnamed)'} restarts ignoring maxRestarts on every "
                    f"{'pod-failure-policy ' if reasons else ''}failure, not only on DisruptionTarget: a bug would run forever")
    return None


RESTARTS_IGNORING_MAX = ("RestartJobSetAndIgnoreMaxRestarts", "RestartJobAndIgnoreMaxRestarts")
"""The failure policy actions that restart without spending ``maxRestarts``: the whole JobSet, or
(JobSet ≥ 0.12) only the failed Job (``api/jobset/v1alpha2/jobset_types.go``)."""


def _keeps_disruptions_free(rule: Mapping[str, Any]) -> bool:
    """A rule that restarts without counting (the JobSet, or only the disrupted Job) exactly when a
    pod failure policy failed a Job on a disruption."""
    return (
        rule.get("action") in RESTARTS_IGNORING_MAX
        and "PodFailurePolicy" in (rule.get("onJobFailureReasons") or ())
        and any("DisruptionTarget" in pattern for pattern in rule.get("onJobFailureMessagePatterns") or ())
    )


def supervise(
    user: UserWorkload,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    queue_name: str | None = None,
    ttl_seconds_after_finished: int | None = None,
    system_exit_codes: Sequence[int] | None = None,
    resume_from: Checkpoint | None = None,
    max_exec_time_seconds: int | None = None,
) -> tuple[dict[str, Any], tuple[Change, ...]]:
    """The manifest to submit, and what was added or changed in it (see the module's docstring)."""
    manifest, changes = copy.deepcopy(user.manifest), []
    meta = _owned(manifest, changes, name=name, namespace=namespace, labels=labels)
    if queue_name:
        _set(changes, meta.setdefault("labels", {}), well_known.QUEUE_NAME, queue_name, f"metadata.labels[{well_known.QUEUE_NAME}]", "queue_name=")
    if max_exec_time_seconds is not None and (meta.get("labels") or {}).get(well_known.QUEUE_NAME):
        _set(changes, meta.setdefault("labels", {}), well_known.MAX_EXEC_TIME, str(max_exec_time_seconds), f"metadata.labels[{well_known.MAX_EXEC_TIME}]",
             "Kueue stops the workload after the task's execution_timeout, even with no Airflow left")
    _annotated(meta, changes, annotations)
    if user.backend == "jobset":
        _supervise_jobset(manifest, user, changes, ttl_seconds_after_finished, system_exit_codes)
    elif user.max_restarts:
        manifest["spec"]["maxRestarts"] = 0
        changes.append(Change(
            "spec.maxRestarts", 0, f"its JobSet would run a bug again at every restart: the task makes the {user.max_restarts} "
            "restarts itself after infrastructure failures (fresh workloads, resuming), never after a bug", user.max_restarts,
        ))
    if resume_from is not None and user.main_container is not None:
        container = _main_container(manifest, user)
        container["env"] = with_resume_env(container.get("env") or [], resume_from)
        changes.append(Change(f"{_main_path(user)}.env", f"PATHWAYS_RESUME_STEP={resume_from.step}", "resume from the newest committed checkpoint after a disruption"))
    return manifest, tuple(changes)


def _owned(manifest: dict[str, Any], changes: list[Change], *, name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The task's name, namespace and ownership labels on the object; its metadata."""
    meta = manifest.setdefault("metadata", {})
    _set(changes, meta, "name", name, "metadata.name", "one name per task attempt: a retry re-attaches, a resubmission never collides")
    if meta.pop("generateName", None) is not None:
        changes.append(Change("metadata.generateName", None, "removed: the task names its workload itself, so a retry finds it"))
    _set(changes, meta, "namespace", namespace, "metadata.namespace", "the task's namespace")
    for key, value in labels.items():
        _set(changes, meta.setdefault("labels", {}), key, value, f"metadata.labels[{key}]", "ownership: re-attach, adoption and the janitor find the task's workloads by it")
    return meta


def _annotated(meta: dict[str, Any], changes: list[Change], annotations: Mapping[str, str]) -> None:
    for key, value in annotations.items():
        _set(changes, meta.setdefault("annotations", {}), key, value, f"metadata.annotations[{key}]", "the task instance's full identifiers")


def _supervise_jobset(
    manifest: dict[str, Any], user: UserWorkload, changes: list[Change], ttl: int | None, system_exit_codes: Sequence[int] | None
) -> None:
    spec = manifest.setdefault("spec", {})
    if ttl is not None and "ttlSecondsAfterFinished" not in spec:
        spec["ttlSecondsAfterFinished"] = ttl
        changes.append(Change("spec.ttlSecondsAfterFinished", ttl, "the JobSet deletes itself after it finished, even if Airflow never comes back"))
    policy = spec.setdefault("failurePolicy", {})
    rules = policy.setdefault("rules", [])
    for index, rule in enumerate(rules):  # named before ours shift them, as JobSet's webhook names them
        if not rule.get("name"):  # (api/jobset/v1alpha2/jobset_types.go: "failurePolicyRuleN", N its index)
            rule["name"] = f"failurePolicyRule{index}"
            changes.append(Change(f"spec.failurePolicy.rules[{index}].name", rule["name"], "the name JobSet's webhook gives it, kept once other rules come before it"))
    if not any(_keeps_disruptions_free(rule) for rule in rules):
        rules.insert(0, {
            "name": DISRUPTION_RULE_NAME, "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["PodFailurePolicy"], "onJobFailureMessagePatterns": ["DisruptionTarget"],
        })
        changes.append(Change("spec.failurePolicy.rules[0]", DISRUPTION_RULE_NAME, "maintenance, preemption and eviction restart the JobSet without using up maxRestarts"))
        for job in spec.get("replicatedJobs") or ():
            _restart_pods_never(job, changes)
            pod_rules = job["template"]["spec"].setdefault("podFailurePolicy", {}).setdefault("rules", [])
            if DISRUPTION_POD_RULE not in pod_rules:
                pod_rules.insert(0, copy.deepcopy(DISRUPTION_POD_RULE))
                changes.append(Change(f"replicatedJobs[{job['name']}].podFailurePolicy.rules[0]", "FailJob on DisruptionTarget", "a pod the infrastructure ended fails its Job with a reason the rule above reads"))
    if system_exit_codes is not None and user.main_container is not None and all(r.get("name") != USER_ERROR_RULE_NAME for r in rules):
        job = next(j for j in spec["replicatedJobs"] if j.get("name") == user.main_job)
        _restart_pods_never(job, changes)
        pod_rules = job["template"]["spec"].setdefault("podFailurePolicy", {}).setdefault("rules", [])
        pod_rules.append({"action": "FailJob", "onExitCodes": {"containerName": user.main_container, "operator": "NotIn", "values": sorted(set(system_exit_codes) - {0})}})
        after = max((i + 1 for i, rule in enumerate(rules) if _keeps_disruptions_free(rule)), default=0)  # a disruption is never a bug
        rules.insert(after, {"name": USER_ERROR_RULE_NAME, "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"], "targetReplicatedJobs": [user.main_job]})
        changes.append(Change(f"spec.failurePolicy.rules[{after}]", USER_ERROR_RULE_NAME, f"{user.main_container} exiting with a code outside system_exit_codes is a bug: the JobSet fails at once instead of restarting it"))


def _restart_pods_never(job: Mapping[str, Any], changes: list[Change]) -> None:
    """A pod failure policy needs ``restartPolicy: Never`` (batch/v1 ``JobSpec.podFailurePolicy``):
    a pod restarted in place would run a bug again, or hold a disrupted slice; the JobSet restarts
    a failed job whole instead."""
    pod = replicated_pod_spec(job)
    if pod.get("restartPolicy") != "Never":
        changes.append(Change(f"replicatedJobs[{job['name']}].restartPolicy", "Never", "a pod failure policy needs it; the JobSet restarts a failed job whole", pod.get("restartPolicy")))
        pod["restartPolicy"] = "Never"


def _pod_spec_of(spec: Mapping[str, Any], job_name: str | None) -> dict[str, Any]:
    return next((replicated_pod_spec(j) for j in spec.get("replicatedJobs") or () if j.get("name") == job_name), {})


def _main_container(manifest: dict[str, Any], user: UserWorkload) -> dict[str, Any]:
    if user.backend == "pathwaysjob":
        pod = manifest["spec"]["controller"]["template"]["spec"]
    else:
        pod = _pod_spec_of(manifest["spec"], user.main_job)
    return next(c for c in pod["containers"] if c.get("name") == user.main_container)


def _main_path(user: UserWorkload) -> str:
    where = "spec.controller.template" if user.backend == "pathwaysjob" else f"replicatedJobs[{user.main_job}]"
    return f"{where}.containers[{user.main_container}]"


def _set(changes: list[Change], mapping: dict[str, Any], key: str, value: Any, path: str, why: str) -> None:
    was = mapping.get(key)
    if was != value:
        mapping[key] = value
        changes.append(Change(path, value, why, was))


# --- a server the user already has: a LeaderWorkerSet -------------------------------------------


@dataclass(frozen=True)
class UserServer:
    """A user's LeaderWorkerSet as understood: the engine as it runs there, the TPU shape it holds."""

    manifest: dict[str, Any]
    engine: Engine
    """The engine with this manifest's server container, health check and ports."""
    shape: SliceShape
    image: str
    """The server container's image (a benchmark's default image)."""
    on_pathways: bool
    service: dict[str, Any] | None = None
    """A Service the file carried beside it (replaced: see :func:`supervise_server`)."""

    @property
    def name(self) -> str:
        return name_of(self.manifest)

    def namespace_for(self, given: str) -> str:
        return namespace_for(self.manifest, given)

    def tpu(self) -> dict[str, Any]:
        return {"machine_type": self.shape.machine_type.name, "topology": self.shape.topology, "slices": 1, "chips": self.shape.chips}


def read_server_manifest(source: Any, *, engine: Engine, main_container: str | None = None) -> UserServer:
    """Understand a user's LeaderWorkerSet, as the multihost-inference guides write it (with the
    Service they put beside it, if any): which container is ``engine``'s server, where its health
    check answers, and the slice it holds. Every problem is raised at once, naming what was found."""
    documents = manifest_objects(source)
    sets = [d for d in documents if (d.get("kind"), d.get("apiVersion")) == ("LeaderWorkerSet", LWS_API_VERSION)]
    services = [d for d in documents if (d.get("kind"), d.get("apiVersion")) == ("Service", "v1")]
    if len(sets) != 1 or len(services) > 1 or len(sets) + len(services) != len(documents):
        raise InvalidWorkloadSpec([SpecProblem(
            "manifest", _found(documents), f"must be one LeaderWorkerSet {LWS_API_VERSION}, with at most one Service beside it",
        )])
    lws = sets[0]
    group = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    leader = _template_pod(group.get("leaderTemplate") or group.get("workerTemplate"))  # LWS: no leaderTemplate, the worker's
    pods = [leader, _template_pod(group.get("workerTemplate"))]
    problems: list[SpecProblem] = []
    shape = _lws_shape(pods, problems)
    containers = [c for c in leader.get("containers") or () if isinstance(c, Mapping)]
    server = None
    try:
        server = _server_container(containers, engine, main_container)
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
    raise_if_any(problems)
    assert shape is not None and server is not None
    return UserServer(
        lws, _engine_as_run(engine, server, containers), shape, str(server.get("image") or ""),
        any(_is_pathways_image(c.get("image")) for c in containers), services[0] if services else None,
    )


def _template_pod(template: Any) -> dict[str, Any]:
    return ((template or {}).get("spec") or {}) if isinstance(template, Mapping) else {}


def _lws_shape(pods: Sequence[Mapping[str, Any]], problems: list[SpecProblem]) -> SliceShape | None:
    """The slice from the templates' node selectors and ``google.com/tpu`` limits (the leader's
    on a single-pod server; the workers' on Pathways, whose leader holds no chips)."""
    holder = next((pod for pod in reversed(pods) if pod_spec_chips(pod) > 0), None)
    if holder is None:
        problems.append(SpecProblem("manifest", "leaderTemplate, workerTemplate", f"no container requests {TPU_RESOURCE}: the LeaderWorkerSet holds no TPU slice"))
        return None
    return _pod_shape(holder, "the LeaderWorkerSet's TPU pods'", problems)


def _server_container(containers: Sequence[Mapping[str, Any]], engine: Engine, wanted: str | None) -> Mapping[str, Any]:
    """The engine's server: ``main_container=``, else the container named as the engine names its
    own, else the leader's one container that is not Pathways', else the one of those with a probe."""
    candidates = [c for c in containers if not _is_pathways_image(c.get("image"))]
    names = [str(c.get("name")) for c in candidates]
    if wanted is None and engine.container not in names and len(candidates) > 1:
        probed = [str(c.get("name")) for c in candidates if c.get("readinessProbe") or c.get("startupProbe")]
        wanted = probed[0] if len(probed) == 1 else None
    if wanted is None and engine.container in names:
        wanted = engine.container
    name = _one_container("the leader", names, wanted)
    return next(c for c in candidates if c.get("name") == name)


def _engine_as_run(engine: Engine, server: Mapping[str, Any], containers: Sequence[Mapping[str, Any]]) -> Engine:
    """``engine`` with the manifest's server container, health check and ports: the port and path of
    the server's readiness (or start-up) probe, else the engine's own where the leader declares it."""
    ports = [p["containerPort"] for c in containers for p in c.get("ports") or () if p.get("containerPort")]
    declared = {p.get("name"): p["containerPort"] for c in containers for p in c.get("ports") or () if p.get("name") and p.get("containerPort")}
    probe = server.get("readinessProbe") or server.get("startupProbe") or {}
    check = probe.get("httpGet") or probe.get("tcpSocket") or {}
    port = check.get("port")
    port = declared.get(port, port) if isinstance(port, str) else port
    if isinstance(port, str) and not port.isdigit():
        raise InvalidWorkloadSpec([SpecProblem("manifest", port, f"container {server.get('name')}'s probe port names no containerPort of the leader")])
    own = [p.get("containerPort") for p in server.get("ports") or () if p.get("containerPort")]
    http_port = int(port or (engine.http_port if engine.http_port in ports else (own or ports or [engine.http_port])[0]))
    benchmark_port = engine.benchmark_port if engine.benchmark_port in ports else http_port
    service_ports = [{"name": "http", "protocol": "TCP", "port": http_port, "targetPort": http_port}]
    if benchmark_port != http_port:
        service_ports.append({"name": "benchmark", "protocol": "TCP", "port": benchmark_port, "targetPort": benchmark_port})
    return dataclasses.replace(
        engine, container=str(server.get("name")), http_port=http_port, health_path=str((probe.get("httpGet") or {}).get("path") or engine.health_path),
        benchmark_port=benchmark_port, service_ports=tuple(service_ports),
    )


def supervise_server(
    user: UserServer, *, name: str, service: str, namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> tuple[list[dict[str, Any]], tuple[Change, ...]]:
    """The LeaderWorkerSet and its Service to create, and what was added or changed: the task's
    names, namespace, labels (on its pods too, which the task and the janitor find by them) and
    annotations; a Service of the task's own that selects this task's leader on the server's ports."""
    manifest, changes = copy.deepcopy(user.manifest), []
    _annotated(_owned(manifest, changes, name=name, namespace=namespace, labels=labels), changes, annotations)
    group = manifest.setdefault("spec", {}).setdefault("leaderWorkerTemplate", {})
    for key in ("leaderTemplate", "workerTemplate"):
        if isinstance(group.get(key), Mapping):
            pod_labels = group[key].setdefault("metadata", {}).setdefault("labels", {})
            if any(pod_labels.get(k) != v for k, v in labels.items()):
                pod_labels.update(labels)
                changes.append(Change(f"spec.leaderWorkerTemplate.{key}.metadata.labels", ", ".join(labels), "the task's pods are found by them"))
    rendered = render_service(engine=user.engine, name=service, namespace=namespace, lws_name=name, labels=labels, annotations=annotations)
    ports = ", ".join(str(p["port"]) for p in rendered["spec"]["ports"])
    if user.service is not None:
        why = (f"replaces the file's Service {name_of(user.service)} (selector {json.dumps(user.service.get('spec', {}).get('selector'))}, "
               f"which reaches every run's pods): this task's leader only, on ports {ports}")
    else:
        why = f"the task's Service: this task's leader, on ports {ports}"
    changes.append(Change("Service", service, why))
    return [manifest, rendered], tuple(changes)


__all__ = ["Change", "UserServer", "UserWorkload", "read_server_manifest", "supervise_server", "is_manifest_file", "manifest_object", "manifest_objects", "read_manifest", "restarts_forever_on_a_bug", "supervise"]

"""A user's own PathwaysJob or JobSet, read and supervised (pure), on the manifests upstream tools write.

The fixtures are taken from upstream (``tests/unit/fixtures/manifests/README.md`` cites each file).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from pathways_airflow.checkpoints import Checkpoint
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.manifest import is_manifest_file, manifest_object, read_manifest, read_server_manifest, supervise, supervise_server
from pathways_airflow.spec.names import TaskIdentity
from pathways_airflow.spec.render import DISRUPTION_RULE_NAME, USER_ERROR_RULE_NAME, XPK_SYSTEM_EXIT_CODES

pytestmark = pytest.mark.pure

MANIFESTS = Path(__file__).parent / "fixtures" / "manifests"
SUPERVISED = ("gcluster-pathways-jobset.yaml", "xpk-pathways-jobset.yaml", "pathways-job-sample.yaml", "jobset-multislice.yaml")
IDENTITY = TaskIdentity("nightly_training", "train", "scheduled__2026-11-27T00:00:00+00:00")


def text(name: str) -> str:
    return (MANIFESTS / name).read_text()


def supervised(name: str, **overrides):
    user = read_manifest(text(name))
    arguments = {
        "name": IDENTITY.workload_name(0, "demo"),
        "namespace": "default",
        "labels": IDENTITY.labels(0),
        "annotations": IDENTITY.annotations(),
        "queue_name": None,
        "ttl_seconds_after_finished": 86_400,
        "system_exit_codes": XPK_SYSTEM_EXIT_CODES,
        **overrides,
    }
    return user, *supervise(user, **arguments)


@pytest.mark.parametrize(
    ("name", "backend", "machine_type", "topology", "slices", "chips", "main"),
    [
        ("gcluster-pathways-jobset.yaml", "jobset", "ct5lp-hightpu-4t", "2x4", 2, 16, ("pathways-head", "workload-container")),
        ("xpk-pathways-jobset.yaml", "jobset", "ct5lp-hightpu-4t", "2x4", 2, 16, ("pathways-head", "jax-tpu")),
        ("pathways-job-sample.yaml", "pathwaysjob", "ct4p-hightpu-4t", "2x2x2", 2, 16, ("controller", "main-workload")),
        ("jobset-multislice.yaml", "jobset", "ct6e-standard-4t", "4x4", 2, 32, ("slice", "jax-tpu")),
    ],
)
def test_the_shape_and_the_program_come_from_the_manifest(name, backend, machine_type, topology, slices, chips, main):
    user = read_manifest(text(name))
    assert (user.backend, user.shape.machine_type.name, user.shape.topology, user.num_slices, user.total_chips) == (
        backend, machine_type, topology, slices, chips,
    )
    assert (user.main_job, user.main_container) == main
    assert user.tpu() == {"machine_type": machine_type, "topology": topology, "slices": slices, "chips": chips}


@pytest.mark.parametrize("name", SUPERVISED)
def test_every_supervised_manifest_validates_against_its_crd(schema_validator, name):
    _, manifest, _ = supervised(name, queue_name="multislice-queue", resume_from=Checkpoint(120, "gs://demo-bucket/ckpt/120"))
    assert schema_validator.errors(manifest) == []


def containers_of(manifest):
    if manifest["kind"] == "PathwaysJob":
        return {"controller": manifest["spec"]["controller"]["template"]["spec"]["containers"]}
    return {j["name"]: j["template"]["spec"]["template"]["spec"]["containers"] for j in manifest["spec"]["replicatedJobs"]}


@pytest.mark.parametrize("name", SUPERVISED)
def test_the_users_fields_are_kept_exactly(name):
    original = yaml.safe_load(text(name))
    user, manifest, _ = supervised(name)
    assert containers_of(manifest) == containers_of(original)
    assert original["metadata"].get("labels", {}).items() <= manifest["metadata"]["labels"].items()
    assert original["metadata"].get("annotations", {}).items() <= manifest["metadata"]["annotations"].items()
    if manifest["kind"] == "JobSet":
        before, after = original["spec"].get("failurePolicy", {}), manifest["spec"]["failurePolicy"]
        assert after.get("maxRestarts") == before.get("maxRestarts")
        kept = [{k: v for k, v in rule.items() if k != "name"} for rule in before.get("rules", [])]
        theirs = [{k: v for k, v in r.items() if k != "name"} for r in after["rules"] if r["name"] not in ("disruptionRestartsFree", "userErrorFailsJobSet")]
        assert theirs == kept
        for job_before, job_after in zip(original["spec"]["replicatedJobs"], manifest["spec"]["replicatedJobs"]):
            pod_before = job_before["template"]["spec"]["template"]["spec"]
            pod_after = job_after["template"]["spec"]["template"]["spec"]
            assert pod_after.get("nodeSelector") == pod_before.get("nodeSelector")
            assert job_after["replicas"] == job_before["replicas"]
    else:
        assert manifest["spec"]["workers"] == original["spec"]["workers"]
        assert manifest["spec"]["maxRestarts"] == 0 and user.max_restarts == original["spec"]["maxRestarts"] == 10
    assert read_manifest(text(name)).manifest == user.manifest  # reading twice gives the same


def test_a_jobset_gains_the_rules_that_keep_disruptions_free_and_stop_a_bug():
    _, manifest, changes = supervised("xpk-pathways-jobset.yaml")
    rules = manifest["spec"]["failurePolicy"]["rules"]
    assert [r["name"] for r in rules] == ["disruptionRestartsFree", "userErrorFailsJobSet"]
    assert rules[0]["action"] == "RestartJobSetAndIgnoreMaxRestarts"
    assert rules[1] == {"name": "userErrorFailsJobSet", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"], "targetReplicatedJobs": ["pathways-head"]}
    head, worker = manifest["spec"]["replicatedJobs"]
    assert head["template"]["spec"]["podFailurePolicy"]["rules"][0] == {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert head["template"]["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["containerName"] == "jax-tpu"
    assert worker["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 86_400
    lines = [change.line() for change in changes]
    assert "replicatedJobs[worker].restartPolicy: OnFailure → Never  (a pod failure policy needs it; the JobSet restarts a failed job whole)" in lines
    assert any(line.startswith("metadata.name: demo-pathways → demo-") for line in lines)


def test_the_users_own_rules_keep_their_order_after_ours_and_an_unnamed_one_its_webhook_name():
    _, manifest, changes = supervised("gcluster-pathways-jobset.yaml")
    rules = manifest["spec"]["failurePolicy"]["rules"]
    assert [r["name"] for r in rules] == ["disruptionRestartsFree", "userErrorFailsJobSet", "failurePolicyRule0"]
    assert rules[2] == {"name": "failurePolicyRule0", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 3600  # the user's own is kept
    assert not any(c.path == "spec.ttlSecondsAfterFinished" for c in changes)


def test_a_rule_that_already_keeps_disruptions_free_is_kept_and_not_doubled():
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    own = {"name": "maintenance", "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"],
           "onJobFailureMessagePatterns": ["reason=DisruptionTarget"]}
    document["spec"]["failurePolicy"]["rules"] = [own]
    user = read_manifest(document)
    manifest, _ = supervise(user, name="a-b", namespace="default", labels={}, annotations={}, system_exit_codes=None)
    assert manifest["spec"]["failurePolicy"]["rules"] == [own]
    manifest, _ = supervise(user, name="a-b", namespace="default", labels={}, annotations={}, system_exit_codes=XPK_SYSTEM_EXIT_CODES)
    assert [r["name"] for r in manifest["spec"]["failurePolicy"]["rules"]] == ["maintenance", "userErrorFailsJobSet"]


def test_the_bug_rule_comes_before_the_users_own_restart_rules():
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    document["spec"]["failurePolicy"]["rules"] = [{"name": "retry", "action": "RestartJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]
    manifest, _ = supervise(read_manifest(document), name="a-b", namespace="default", labels={}, annotations={}, system_exit_codes=XPK_SYSTEM_EXIT_CODES)
    assert [r["name"] for r in manifest["spec"]["failurePolicy"]["rules"]] == ["disruptionRestartsFree", "userErrorFailsJobSet", "retry"]


def test_the_queue_and_kueues_time_limit_are_labels_even_on_a_manifest_without_labels():
    document = yaml.safe_load(text("pathways-job-sample.yaml"))
    document["metadata"].pop("labels", None)
    manifest, changes = supervise(read_manifest(document), name="a-b", namespace="default", labels={}, annotations={}, queue_name="q", max_exec_time_seconds=3720)
    assert manifest["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/max-exec-time-seconds": "3720"}


def test_the_name_namespace_queue_and_resume_are_added_and_said():
    resume = Checkpoint(120, "gs://demo-bucket/ckpt/120")
    user, manifest, changes = supervised("pathways-job-sample.yaml", namespace="ml-team", queue_name="multislice-queue", resume_from=resume)
    assert manifest["metadata"]["name"] == IDENTITY.workload_name(0, "demo") and "generateName" not in manifest["metadata"]
    assert manifest["metadata"]["namespace"] == "ml-team"
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "multislice-queue"
    assert manifest["metadata"]["labels"].items() >= IDENTITY.labels(0).items()
    main = next(c for c in manifest["spec"]["controller"]["template"]["spec"]["containers"] if c["name"] == "main-workload")
    assert {"name": "PATHWAYS_RESUME_STEP", "value": "120"} in main["env"]
    assert {"name": "PATHWAYS_RESUME_CHECKPOINT", "value": "gs://demo-bucket/ckpt/120"} in main["env"]
    paths = [c.path for c in changes]
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in paths and "spec.controller.template.containers[main-workload].env" in paths
    assert user.manifest["metadata"]["name"] == "pathways-trial"  # the user's object is not touched


def test_generate_name_is_replaced_by_the_tasks_name():
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    document["metadata"] = {"generateName": "demo-", **{k: v for k, v in document["metadata"].items() if k != "name"}}
    manifest, changes = supervise(read_manifest(json.dumps(document)), name="demo-x", namespace="default", labels={}, annotations={})
    assert manifest["metadata"]["name"] == "demo-x" and "generateName" not in manifest["metadata"]
    assert any(c.path == "metadata.generateName" for c in changes)


# --- refused before anything is created ------------------------------------------------------------


def refusal(source, **kwargs) -> str:
    with pytest.raises(InvalidWorkloadSpec) as caught:
        read_manifest(source, **kwargs)
    return str(caught.value)


def test_another_kind_is_refused_naming_it():
    assert "LeaderWorkerSet leaderworkerset.x-k8s.io/v1" in refusal(text("lws-multihost-inference.yaml"))


def test_several_objects_in_one_file_are_refused_naming_them():
    message = refusal(text("xpk-pathways-jobset.yaml") + "\n---\n" + text("pathways-job-sample.yaml"))
    assert "holds 2 objects" in message and "JobSet demo-pathways" in message and "PathwaysJob pathways-trial" in message


def test_a_jobset_that_requests_no_tpu_is_refused():
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    for job in document["spec"]["replicatedJobs"]:
        for container in job["template"]["spec"]["template"]["spec"]["containers"]:
            container.get("resources", {}).get("limits", {}).pop("google.com/tpu", None)
    assert "holds no TPU slice" in refusal(document)


def test_an_ambiguous_or_unknown_main_container_is_refused_naming_the_candidates():
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    head = document["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    head["containers"].append({**copy.deepcopy(head["containers"][0]), "name": "logger"})
    assert "2 containers that could run the program (jax-tpu, logger)" in refusal(document)
    assert read_manifest(document, main_container="jax-tpu").main_container == "jax-tpu"
    assert "its containers: jax-tpu, logger" in refusal(document, main_container="trainer")


def test_a_failure_policy_that_would_restart_a_bug_forever_is_refused():
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    document["spec"]["failurePolicy"]["rules"] = [{"name": "always", "action": "RestartJobSetAndIgnoreMaxRestarts"}]
    assert "restarts ignoring maxRestarts on every failure" in refusal(document)
    document["spec"]["failurePolicy"]["rules"] = [{"name": "pfp", "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]}]
    assert "on every pod-failure-policy failure, not only on DisruptionTarget" in refusal(document)
    document["spec"]["failurePolicy"]["rules"] = [{"name": "job-always", "action": "RestartJobAndIgnoreMaxRestarts"}]
    assert "rule job-always restarts ignoring maxRestarts on every failure" in refusal(document)


def test_a_rule_restarting_only_the_disrupted_job_for_free_keeps_disruptions_free():
    """JobSet ≥ 0.12: ``RestartJobAndIgnoreMaxRestarts`` on a disruption recreates only the Job whose
    slice went, at no cost to ``maxRestarts``; the provider adds no JobSet-wide rule before it."""
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    own = {"name": "slice-back", "action": "RestartJobAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"],
           "onJobFailureMessagePatterns": ["DisruptionTarget"], "targetReplicatedJobs": ["worker"]}
    document["spec"]["failurePolicy"]["rules"] = [own]
    manifest, _ = supervise(read_manifest(document), name="a-b", namespace="default", labels={}, annotations={}, system_exit_codes=XPK_SYSTEM_EXIT_CODES)
    assert [r["name"] for r in manifest["spec"]["failurePolicy"]["rules"]] == ["slice-back", "userErrorFailsJobSet"]


def test_a_plain_multislice_jobset_is_supervised_on_the_job_every_pod_of_which_runs_the_program():
    """JobSet's TPU tutorial: one replicated job ``slice``, no head; a bug on any of its pods fails
    the JobSet, a disruption restarts it without using up its own ``maxRestarts: 4``."""
    user, manifest, _ = supervised("jobset-multislice.yaml", resume_from=Checkpoint(40, "gs://demo-bucket/ckpt/40"))
    (job,) = manifest["spec"]["replicatedJobs"]
    rules = manifest["spec"]["failurePolicy"]["rules"]
    assert [r["name"] for r in rules] == [DISRUPTION_RULE_NAME, USER_ERROR_RULE_NAME]
    assert rules[1]["targetReplicatedJobs"] == ["slice"] and manifest["spec"]["failurePolicy"]["maxRestarts"] == 4
    pod = job["template"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert job["template"]["spec"]["podFailurePolicy"]["rules"][-1]["onExitCodes"]["containerName"] == "jax-tpu"
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["PATHWAYS_RESUME_STEP"] == "40"


def test_replicated_job_names_too_long_for_the_derived_pod_names_are_refused():
    document = yaml.safe_load(text("jobset-multislice.yaml"))
    document["spec"]["replicatedJobs"][0]["name"] = "s" * 34
    assert "is 34 characters; the pod names derived from it need it at most 33" in refusal(document)
    document["spec"]["replicatedJobs"][0]["name"] = "trainer-coordinator"
    document["spec"]["coordinator"] = {"replicatedJob": "trainer-coordinator"}
    assert "at most 13" in refusal(document)


def test_text_that_is_not_an_object_is_refused():
    assert "is not a Kubernetes object" in refusal("just a string")
    with pytest.raises(InvalidWorkloadSpec):
        manifest_object(42)


def test_a_file_name_is_told_from_manifest_text():
    assert is_manifest_file("manifests/train.yaml") and is_manifest_file("train.json")
    assert not is_manifest_file(text("xpk-pathways-jobset.yaml")) and not is_manifest_file({"kind": "JobSet"})


def test_the_programs_pods_stop_restarting_in_place_so_a_bug_is_stopped_at_once():
    """A head whose pods restart in place would run a bug again before any rule sees it: with the
    user-error rule its pods are set to ``Never``, even where the manifest keeps disruptions free itself."""
    document = yaml.safe_load(text("xpk-pathways-jobset.yaml"))
    document["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    document["spec"]["failurePolicy"]["rules"] = [
        {"name": "maintenance", "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"], "onJobFailureMessagePatterns": ["DisruptionTarget"]}
    ]
    manifest, changes = supervise(read_manifest(document), name="a-b", namespace="default", labels={}, annotations={}, system_exit_codes=XPK_SYSTEM_EXIT_CODES)
    head = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert head["template"]["spec"]["restartPolicy"] == "Never"
    assert head["podFailurePolicy"]["rules"][-1]["onExitCodes"]["containerName"] == "jax-tpu"
    assert [r["name"] for r in manifest["spec"]["failurePolicy"]["rules"]] == ["maintenance", "userErrorFailsJobSet"]
    assert "replicatedJobs[pathways-head].restartPolicy: OnFailure → Never" in " ".join(c.line() for c in changes)


def test_a_manifest_the_provider_rendered_is_supervised_without_doubling_its_rules():
    _, once, _ = supervised("xpk-pathways-jobset.yaml")
    twice, changes = supervise(read_manifest(once), name=once["metadata"]["name"], namespace="default", labels={}, annotations={},
                               system_exit_codes=XPK_SYSTEM_EXIT_CODES, ttl_seconds_after_finished=86_400)
    assert twice == once and changes == ()


# --- a LeaderWorkerSet for the inference operators -------------------------------------------------


def jetstream_on_pathways(upstream_samples) -> str:
    """GKE's JetStream + Pathways LeaderWorkerSet and its Service, with its placeholders filled in."""
    text = (upstream_samples / "seed-jetstream-lws-single.yaml").read_text()
    return text.replace("TPU_ACCELERATOR_TYPE", "tpu-v6e-slice").replace("TPU_TOPOLOGY", "4x4").replace("GCS_CHECKPOINT_PATH", "gs://demo-bucket/ckpt/0/items")


def test_a_vllm_leaderworkerset_is_read_from_the_leaders_server_container_and_probe():
    from pathways_airflow.spec.vllm import ENGINE

    user = read_server_manifest(text("lws-multihost-inference.yaml"), engine=ENGINE)
    assert (user.engine.container, user.engine.http_port, user.engine.health_path, user.engine.benchmark_port) == ("vllm-leader", 8000, "/health", 8000)
    assert user.tpu() == {"machine_type": "tpu7x-standard-4t", "topology": "2x2x2", "slices": 1, "chips": 8}
    assert (user.on_pathways, user.image, user.service) == (False, "vllm/vllm-tpu:latest", None)


def test_jetstream_on_pathways_takes_its_health_check_from_the_probe_and_its_grpc_port_from_the_leader(upstream_samples):
    """The engine container is the one with the probes (``jetstream-http`` beside it has none); the
    health check is the probe's ``/healthcheck`` on 8000, the benchmark's gRPC port 9000 is declared."""
    from pathways_airflow.spec.jetstream import ENGINE

    user = read_server_manifest(jetstream_on_pathways(upstream_samples), engine=ENGINE)
    assert (user.engine.container, user.engine.http_port, user.engine.health_path, user.engine.benchmark_port) == ("jax-tpu", 8000, "/healthcheck", 9000)
    assert user.tpu()["chips"] == 16 and user.on_pathways and user.service["metadata"]["name"] == "jetstream-svc"


def test_a_supervised_leaderworkerset_keeps_the_users_fields_and_its_service_selects_only_this_tasks_leader(schema_validator, upstream_samples):
    from pathways_airflow.spec.jetstream import ENGINE

    source = jetstream_on_pathways(upstream_samples)
    user = read_server_manifest(source, engine=ENGINE)
    labels = IDENTITY.labels()
    (lws, service), changes = supervise_server(user, name="jetstream-abc", service="jetstream-abc-svc", namespace="default", labels=labels, annotations=IDENTITY.annotations())
    assert schema_validator.errors(lws) == []
    original = yaml.safe_load_all(source).__next__()["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        assert lws["spec"]["leaderWorkerTemplate"][key]["spec"] == original[key]["spec"]
        assert labels.items() <= lws["spec"]["leaderWorkerTemplate"][key]["metadata"]["labels"].items()
    assert lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]["app"] == "jetstream-pathways"
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "jetstream-abc", "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    assert [p["port"] for p in service["spec"]["ports"]] == [8000, 9000]
    assert any("replaces the file's Service jetstream-svc" in c.line() for c in changes)


def test_a_leaderworkerset_is_refused_naming_what_was_found():
    from pathways_airflow.spec.vllm import ENGINE

    document = yaml.safe_load(text("lws-multihost-inference.yaml"))
    two = yaml.safe_dump_all([document, document])
    with pytest.raises(InvalidWorkloadSpec, match="LeaderWorkerSet tpu-offline-inference-multihost, LeaderWorkerSet tpu-offline-inference-multihost': must be one LeaderWorkerSet"):
        read_server_manifest(two, engine=ENGINE)
    with pytest.raises(InvalidWorkloadSpec, match="JobSet .*must be one LeaderWorkerSet"):
        read_server_manifest(text("xpk-pathways-jobset.yaml"), engine=ENGINE)
    cpu = copy.deepcopy(document)
    for key in ("leaderTemplate", "workerTemplate"):
        for container in cpu["spec"]["leaderWorkerTemplate"][key]["spec"]["containers"]:
            container.pop("resources")
    with pytest.raises(InvalidWorkloadSpec, match="holds no TPU slice"):
        read_server_manifest(cpu, engine=ENGINE)
    sidecar = copy.deepcopy(document)
    sidecar["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"].append({"name": "metrics", "image": "prom/statsd-exporter", "readinessProbe": {"tcpSocket": {"port": 9102}}})
    with pytest.raises(InvalidWorkloadSpec, match=r"2 containers that could run the program \(vllm-leader, metrics\)"):
        read_server_manifest(sidecar, engine=ENGINE)
    assert read_server_manifest(sidecar, engine=ENGINE, main_container="vllm-leader").engine.container == "vllm-leader"


def test_a_pathwaysjobs_restarts_are_the_tasks_to_make_so_a_bug_runs_once():
    """The sample's ``maxRestarts: 10`` would restart a bug ten times: the task restarts after
    infrastructure failures itself, and says so."""
    user, manifest, changes = supervised("pathways-job-sample.yaml")
    assert (manifest["spec"]["maxRestarts"], user.max_restarts) == (0, 10)
    (line,) = [c.line() for c in changes if c.path == "spec.maxRestarts"]
    assert line.startswith("spec.maxRestarts: 10 → 0") and "never after a bug" in line


def test_a_probe_on_a_port_name_the_leader_does_not_declare_is_refused():
    from pathways_airflow.spec.vllm import ENGINE

    document = yaml.safe_load(text("lws-multihost-inference.yaml"))
    leader = document["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    leader["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}}
    with pytest.raises(InvalidWorkloadSpec, match="probe port names no containerPort of the leader"):
        read_server_manifest(document, engine=ENGINE)
    leader["ports"] = [{"name": "http", "containerPort": 8000}]
    assert read_server_manifest(document, engine=ENGINE).engine.http_port == 8000

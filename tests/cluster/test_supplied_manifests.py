"""``PathwaysJobOperator(manifest=...)`` on the manifests gcluster, xpk and pathways-job write, end to end.

Each fixture (``tests/unit/fixtures/manifests/``, its upstream file cited there) is adapted to the
local cluster only where the cluster differs from GKE: its CPU node pool is ``default-pool`` (the
manifests pin ``cpu-np``), its bucket is ``pathways-demo``, its TPU pools are v5e 2x4 and v6e 4x4
(the PathwaysJob sample asks for v4), the training stand-in runs where the user's program does
(the JobSet tutorial's inline JAX script on every host of its plain multislice JobSet), and its
step time is set in the program's environment so a disruption can land mid-run.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from airflow.providers.common.compat.sdk import TaskDeferred

from pathways_airflow.exceptions import UserCodeError
from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.operators import PathwaysJobOperator
from pathways_airflow.resources import JOBSET, PATHWAYSJOB
from pathways_airflow.spec import TaskIdentity
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.names import TASK_KEY_LABEL

from tests.support.connections import connect
from tests.support.task_instance import TaskInstance
from tests.support.triggers import first_event
from tests.support.waiting import wait_for
from tests.support.workloads import LiveWorkloads, when_step


MANIFESTS = Path(__file__).parents[1] / "unit" / "fixtures" / "manifests"


@pytest.fixture(autouse=True)
def connections(pathways_cluster, monkeypatch):
    connect(monkeypatch, pathways_cluster)


@pytest.fixture(autouse=True, scope="module")
def xpk_priority_classes(pathways_cluster):
    """The PriorityClass xpk's workers name (``medium``), which ``xpk cluster create`` makes on a real cluster."""
    if pathways_cluster.get("scheduling.k8s.io/v1", "PriorityClass", "medium", namespace=None) is None:
        pathways_cluster.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "medium"}, "value": 500})


def local(name: str, run: str, *, env: dict[str, str] | None = None) -> tuple[dict, str]:
    """The upstream manifest on the local cluster; the container that runs the program."""
    text = (MANIFESTS / name).read_text().replace("gs://demo-bucket", "gs://pathways-demo").replace("run_name=demo ", f"run_name={run} ")
    document = yaml.safe_load(text)
    env = [{"name": k, "value": v} for k, v in {"PATHWAYS_TESTING_STEP_SECONDS": "10", **(env or {})}.items()]
    if document["kind"] == "PathwaysJob":
        document["spec"]["workers"][0].update({"type": "ct5lp-hightpu-4t", "topology": "2x4"})
        document["spec"]["workers"][0].pop("nodeSelector", None)  # the sample's reservation
        pod = document["spec"]["controller"]["template"]["spec"]
        main = pod["containers"][0]
        main["command"] = ["python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml",
                           "base_output_directory=gs://pathways-demo/maxtext", f"run_name={run}", "steps=20"]
        main.pop("args", None)
    elif len(document["spec"]["replicatedJobs"]) == 1:  # plain multislice: every host runs the program
        main = document["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        main["command"] = ["python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml",
                           "base_output_directory=gs://pathways-demo/maxtext", f"run_name={run}", "steps=20"]
    else:
        head, _ = document["spec"]["replicatedJobs"]
        pod = head["template"]["spec"]["template"]["spec"]
        pod["nodeSelector"]["cloud.google.com/gke-nodepool"] = "default-pool"
        main = next(c for c in pod["containers"] if "pathways" not in c["image"])
    main["env"] = [*(main.get("env") or []), *env]
    return document, main["name"]


def task(task_id: str, manifest, **overrides) -> PathwaysJobOperator:
    return PathwaysJobOperator(task_id=task_id, manifest=manifest, deferrable=False, **overrides)


def gone(identity: TaskIdentity, prefix: str) -> bool:
    hook = PathwaysHook()
    selector = f"{TASK_KEY_LABEL}={identity.key}"
    return not hook.list(JOBSET, "default", label_selector=selector) and not hook.list(PATHWAYSJOB, "default", label_selector=selector)


@pytest.mark.parametrize(("fixture", "jobs", "tpu"), [
    ("xpk-pathways-jobset.yaml", ("pathways-head", "worker"), ("ct5lp-hightpu-4t", "2x4", 16)),
    ("gcluster-pathways-jobset.yaml", ("pathways-head", "worker"), ("ct5lp-hightpu-4t", "2x4", 16)),
    ("jobset-multislice.yaml", ("slice", "slice"), ("ct6e-standard-4t", "4x4", 32)),
])
def test_maintenance_mid_run_resumes_a_supplied_jobset_from_the_newest_committed_step(pathways_cluster, fixture, jobs, tpu):
    task_id = f"byo-{fixture.split('-')[0]}"
    run = f"byo-{uuid.uuid4().hex[:6]}"
    identity = TaskIdentity("dag", task_id, "run-1")
    document, container = local(fixture, run)
    prefix = document["metadata"]["name"][:10].rstrip("-")
    disrupt = when_step(pathways_cluster, identity, 15, lambda pool: pathways_cluster.maintenance(pool, duration=600), container=container, prefix=prefix, jobs=jobs)
    with LiveWorkloads(pathways_cluster, identity, api="jobset.x-k8s.io/v1alpha2", kind="JobSet") as live:
        result = task(task_id, document, checkpoint_dir=f"gs://pathways-demo/maxtext/{run}/checkpoints").execute({"ti": TaskInstance("dag", task_id, "run-1")})
    disrupt.join(1)
    assert live.most == 1
    assert result["state"] == "SUCCEEDED" and result["checkpoint"]["step"] == 19
    machine_type, topology, chips = tpu
    assert result["tpu"] == {"machine_type": machine_type, "topology": topology, "slices": 2, "chips": chips}
    disruptions = result["disruptions"]
    assert disruptions and {d["kind"] for d in disruptions} == {"MAINTENANCE"}
    resubmitted = [d for d in disruptions if d.get("handled_by") != "JobSet restart"]
    if resubmitted:  # the JobSet's own restart (the rule the provider added) may have ridden it out instead
        assert resubmitted[0]["resumed_from_step"] == 10 and result["name"] == identity.workload_name(1, prefix)
    wait_for(lambda: gone(identity, prefix), timeout=30)


@pytest.mark.parametrize(("fixture", "prefix"), [("xpk-pathways-jobset.yaml", "demo-pathw"), ("jobset-multislice.yaml", "v6e-multis")])
def test_a_bug_in_a_supplied_jobset_fails_at_once_and_is_never_resubmitted(pathways_cluster, fixture, prefix):
    task_id, run = f"byo-bug-{prefix[:3]}", f"byo-{uuid.uuid4().hex[:6]}"
    identity = TaskIdentity("dag", task_id, "run-1")
    document, _ = local(fixture, run, env={"PATHWAYS_TESTING_FAIL_AT_STEP": "3", "PATHWAYS_TESTING_EXIT_CODE": "1", "PATHWAYS_TESTING_STEP_SECONDS": "1"})
    with pytest.raises(UserCodeError) as caught:
        task(task_id, yaml.safe_dump(document)).execute({"ti": TaskInstance("dag", task_id, "run-1")})
    assert caught.value.exit_code == 1
    involved = {e["involvedObject"]["name"] for e in pathways_cluster.list("v1", "Event", "default")}
    assert identity.workload_name(0, prefix) in involved
    assert not any(name.startswith(identity.workload_name(1, prefix)) for name in involved), "never resubmitted"


def test_a_supplied_pathwaysjob_runs_deferred_and_a_kill_deletes_it(pathways_cluster):
    task_id, run = "byo-pwj", f"byo-{uuid.uuid4().hex[:6]}"
    identity = TaskIdentity("dag", task_id, "run-1")
    document, _ = local("pathways-job-sample.yaml", run, env={"PATHWAYS_TESTING_STEP_SECONDS": "30"})
    operator = PathwaysJobOperator(task_id=task_id, manifest=document, deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute({"ti": TaskInstance("dag", task_id, "run-1")})
    name = identity.workload_name(0, "pathways-t")
    assert deferred.value.trigger.serialize()[1]["backend"] == "pathwaysjob"
    pathwaysjob = PathwaysHook().get(PATHWAYSJOB, "default", name)
    assert pathwaysjob["metadata"]["labels"][TASK_KEY_LABEL] == identity.key
    wait_for(lambda: (PathwaysHook().get(JOBSET, "default", name) or {}).get("status", {}).get("replicatedJobsStatus"), timeout=30)
    operator.on_kill()
    wait_for(lambda: gone(identity, "pathways-t"), timeout=30)


def test_a_supplied_manifest_file_is_found_and_rendered_as_a_template(pathways_cluster, tmp_path):
    document, _ = local("xpk-pathways-jobset.yaml", "byo-file")
    document["metadata"]["labels"]["team"] = "{{ params.team }}"
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(document))
    operator = task("byo-file", str(path))
    ti = TaskInstance("dag", "byo-file", "run-1")
    manifest = operator.render_manifest({"ti": ti, "params": {"team": "ml-infra"}})
    assert manifest["metadata"]["labels"]["team"] == "ml-infra"
    assert manifest["metadata"]["name"] == TaskIdentity("dag", "byo-file", "run-1").workload_name(0, "demo-pathw")
    assert [r["name"] for r in manifest["spec"]["failurePolicy"]["rules"]] == ["disruptionRestartsFree", "userErrorFailsJobSet"]


def test_a_manifest_mixed_with_spec_parameters_is_refused_naming_both_sides():
    document = yaml.safe_load((MANIFESTS / "xpk-pathways-jobset.yaml").read_text())
    with pytest.raises(InvalidWorkloadSpec) as caught:
        PathwaysJobOperator(task_id="mixed", manifest=document, tpu="v5e", topology="2x4")
    assert "manifest=" in str(caught.value) and "also given: topology, tpu" in str(caught.value)
    assert PathwaysJobOperator(task_id="queued", manifest=document, queue_name="multislice-queue")  # applies to both


def test_a_bad_manifest_is_refused_when_the_dag_is_parsed():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        PathwaysJobOperator(task_id="lws", manifest=(MANIFESTS / "lws-multihost-inference.yaml").read_text())
    assert "LeaderWorkerSet leaderworkerset.x-k8s.io/v1" in str(caught.value)


def test_the_dry_run_of_a_supplied_manifest_needs_no_cluster(pathways_cluster):
    document, _ = local("gcluster-pathways-jobset.yaml", "byo-dry")
    manifest = task("byo-dry", document).render_manifest()
    assert manifest["metadata"]["name"].startswith("demo-gclus-") and manifest["metadata"]["namespace"] == "default"


@pytest.mark.parametrize(("fixture", "prefix", "tpu"), [
    ("xpk-pathways-jobset.yaml", "demo-pathw", ("ct5lp-hightpu-4t", "2x4", 16)),
    ("jobset-multislice.yaml", "v6e-multis", ("ct6e-standard-4t", "4x4", 32)),
])
def test_a_deferred_task_with_a_manifest_file_resumes_in_a_fresh_process_on_the_manifests_kind(pathways_cluster, tmp_path, fixture, prefix, tpu):
    """The triggerer's event comes back to a new operator object (another worker): it reads the
    file again, so it acts on the JobSet in the manifest's namespace, not on the defaults."""
    task_id, run = f"byo-resume-{prefix[:3]}", f"byo-{uuid.uuid4().hex[:6]}"
    document, _ = local(fixture, run, env={"PATHWAYS_TESTING_STEP_SECONDS": "1"})
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(TaskDeferred) as deferred:
        PathwaysJobOperator(task_id=task_id, manifest=str(path), deferrable=True).execute({"ti": TaskInstance("dag", task_id, "run-1")})
    event = first_event(deferred.value.trigger)
    fresh = PathwaysJobOperator(task_id=task_id, manifest=str(path), deferrable=True)
    result = fresh.execute_complete({"ti": TaskInstance("dag", task_id, "run-1")}, event, **deferred.value.kwargs)
    assert result["state"] == "SUCCEEDED" and result["backend"] == "jobset"
    machine_type, topology, chips = tpu
    assert result["tpu"] == {"machine_type": machine_type, "topology": topology, "slices": 2, "chips": chips}
    wait_for(lambda: gone(TaskIdentity("dag", task_id, "run-1"), prefix), timeout=30)


def test_a_subclass_taking_kwargs_takes_a_manifest_too():
    class Training(PathwaysJobOperator):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)

    document = yaml.safe_load((MANIFESTS / "xpk-pathways-jobset.yaml").read_text())
    assert Training(task_id="sub", manifest=document).render_manifest()["kind"] == "JobSet"
    with pytest.raises(InvalidWorkloadSpec, match="also given: tpu"):
        Training(task_id="sub-mixed", manifest=document, tpu="v5e")


def test_a_manifest_template_that_needs_the_tasks_context_says_so_in_a_dry_run(tmp_path):
    document = yaml.safe_load((MANIFESTS / "xpk-pathways-jobset.yaml").read_text())
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(document).replace("name: demo-pathways", "name: demo-{{ params.team.upper() }}", 1))
    with pytest.raises(InvalidWorkloadSpec, match="needs the task's context to render"):
        task("byo-undefined", str(path)).render_manifest()


# --- a LeaderWorkerSet for the inference operators -------------------------------------------------


def local_lws(env: dict[str, str] | None = None) -> dict:
    """tpu-inference's multi-host vLLM LeaderWorkerSet on the local cluster: its TPU is a v5e 2x4
    slice (2 VMs of 4 chips, as the manifest's size 2 wants) instead of TPU7x 2x2x2, and the
    stand-in's warm-up and latencies are short."""
    document = yaml.safe_load((MANIFESTS / "lws-multihost-inference.yaml").read_text())
    group = document["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        group[key]["spec"]["nodeSelector"] = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice", "cloud.google.com/gke-tpu-topology": "2x4"}
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    knobs = {"PATHWAYS_TESTING_WARMUP_SECONDS": "30", "PATHWAYS_TESTING_TTFT_MS": "2", "PATHWAYS_TESTING_TPOT_MS": "1", **(env or {})}
    leader["env"] += [{"name": k, "value": v} for k, v in knobs.items()]
    return document


@pytest.fixture(scope="module")
def hf_token(pathways_cluster):
    """The Secret the manifest reads ``HF_TOKEN`` from (``hf-token-secret``), as its guide has the user create."""
    if pathways_cluster.get("v1", "Secret", "hf-token-secret") is None:
        pathways_cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token-secret", "namespace": "default"}, "stringData": {"token": "hf_local"}})


def test_a_supplied_vllm_leaderworkerset_serves_is_benchmarked_and_leaves_nothing(pathways_cluster, hf_token):
    from pathways_airflow.operators import InferenceBenchmarkOperator
    from pathways_airflow.spec.vllm import METRIC_KEYS
    from tests.support.gcs import gcs_bucket
    from tests.support.serving import leftovers

    ti = TaskInstance("serving", "byo_lws", "run-1")
    identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id)
    with gcs_bucket(pathways_cluster, "pathways-demo"):
        operator = InferenceBenchmarkOperator(
            task_id="byo_lws", manifest=local_lws(), engine="vllm", hf_model="gs://demo-bucket/models/Qwen3-30B-A3B",
            num_prompts=4, request_rate="inf", max_output_length=8, results_uri="gs://pathways-demo/byo-lws/results/",
            startup_timeout=120, poll_interval=0.05, cleanup_timeout=20,
        )
        result = operator.execute({"ti": ti})
    assert set(METRIC_KEYS) <= set(result) and (result["completed"], result["failed"]) == (4, 0)
    assert result["result_uri"].startswith("gs://pathways-demo/byo-lws/results/tpu-offlin-")
    assert leftovers(pathways_cluster, identity) == []


def test_a_supplied_server_that_crashes_while_starting_fails_at_once_with_its_log_and_is_deleted(pathways_cluster, hf_token):
    from pathways_airflow.operators import DeployInferenceServerOperator
    from tests.support.serving import eventually_nothing_left

    ti = TaskInstance("serving", "byo_lws_crash", "run-1")
    document = local_lws()
    script = document["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["args"]
    script[0] = script[0].replace("--seed 42", "--seed 42 --hf-overrides not-json")
    operator = DeployInferenceServerOperator(task_id="byo_lws_crash", manifest=document, engine="vllm", startup_timeout=600, poll_interval=0.05, cleanup_timeout=20)
    with pytest.raises(UserCodeError, match="vllm-leader") as failure:
        operator.execute({"ti": ti})
    assert "--hf-overrides" in str(failure.value)
    eventually_nothing_left(pathways_cluster, TaskIdentity(ti.dag_id, ti.task_id, ti.run_id))


def test_googles_jetstream_on_pathways_leaderworkerset_deploys_serves_and_is_torn_down(pathways_cluster, upstream_samples):
    """GKE's JetStream + Pathways manifest (the engine beside the Pathways proxy and resource
    manager in the leader, a Service beside it in the file): its placeholders filled with the local
    cluster's v6e 4x4 slice and a committed checkpoint, its 900 s start-up delay cut to 30 s."""
    from pathways_airflow.hooks.pathways import PathwaysHook
    from pathways_airflow.operators import DeployInferenceServerOperator, TeardownInferenceServerOperator
    from tests.support.gcs import gcs_bucket
    from tests.support.serving import committed_serving_checkpoint, eventually_nothing_left

    with gcs_bucket(pathways_cluster, "pathways-demo") as bucket:
        checkpoint = committed_serving_checkpoint(bucket, "byo-jetstream/checkpoints/0")
        text = (upstream_samples / "seed-jetstream-lws-single.yaml").read_text()
        text = text.replace("TPU_ACCELERATOR_TYPE", "tpu-v6e-slice").replace("TPU_TOPOLOGY", "4x4").replace("GCS_CHECKPOINT_PATH", checkpoint["items_uri"])
        documents = list(yaml.safe_load_all(text))
        documents[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][2]["startupProbe"]["initialDelaySeconds"] = 30
        ti = TaskInstance("serving", "byo_jetstream", "run-1")
        deploy = DeployInferenceServerOperator(task_id="byo_jetstream", manifest=yaml.safe_dump_all(documents), engine="jetstream", startup_timeout=600, poll_interval=0.05)
        served = deploy.execute({"ti": ti})
        assert (served["engine"], served["http_port"], served["benchmark_port"]) == ("jetstream", 8000, 9000)
        assert PathwaysHook().service_get_status("default", served["service"], 8000, "/healthcheck")[0] == 200
        TeardownInferenceServerOperator(task_id="down", deploy_task_id="byo_jetstream", cleanup_timeout=20).execute({"ti": TaskInstance(ti.dag_id, "down", ti.run_id)})
    eventually_nothing_left(pathways_cluster, TaskIdentity(ti.dag_id, ti.task_id, ti.run_id))


def test_a_slice_a_supplied_jobset_restarts_alone_is_still_the_disruption_its_head_died_of(pathways_cluster):
    """JobSet ≥ 0.12: the user's rule ``RestartJobAndIgnoreMaxRestarts`` on a disruption recreates
    only the Job whose slice went. The slice is shut down without notice and marked
    ``node.kubernetes.io/out-of-service``; its pods are deleted (``DeletionByPodGC``), the worker
    Job fails on its pod failure policy and the JobSet recreates that Job alone. The Pathways head
    ran on through it and loses its slice (exit 1), which the bug rule turns into a failed JobSet:
    the task counts the per-Job restart, judges the failure a slice loss and not a bug, and
    resubmits, resuming from the newest committed step."""
    task_id, run = "byo-restart-job", f"byo-{uuid.uuid4().hex[:6]}"
    identity = TaskIdentity("dag", task_id, "run-1")
    document, container = local("xpk-pathways-jobset.yaml", run)
    document["spec"]["failurePolicy"]["rules"] = [{
        "name": "slice-back", "action": "RestartJobAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"],
        "onJobFailureMessagePatterns": ["DisruptionTarget"], "targetReplicatedJobs": ["worker"],
    }]
    worker = document["spec"]["replicatedJobs"][1]["template"]["spec"]
    worker["backoffLimit"] = 0
    worker["podFailurePolicy"] = {"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    worker["template"]["spec"]["restartPolicy"] = "Never"
    prefix = document["metadata"]["name"][:10].rstrip("-")
    disrupt = when_step(pathways_cluster, identity, 15, lambda pool: pathways_cluster.lose_slice(pool, downtime=600, out_of_service=True),
                        container=container, prefix=prefix)
    with LiveWorkloads(pathways_cluster, identity, api="jobset.x-k8s.io/v1alpha2", kind="JobSet") as live:
        result = task(task_id, document, checkpoint_dir=f"gs://pathways-demo/maxtext/{run}/checkpoints").execute({"ti": TaskInstance("dag", task_id, "run-1")})
    disrupt.join(1)
    assert live.most == 1 and result["state"] == "SUCCEEDED" and result["checkpoint"]["step"] == 19
    assert result["name"] == identity.workload_name(1, prefix)
    in_place = [d for d in result["disruptions"] if d.get("handled_by") == "JobSet restart"]
    resubmitted = [d for d in result["disruptions"] if d.get("handled_by") != "JobSet restart"]
    assert [d["kind"] for d in in_place] == ["SLICE_FAILURE"], result["disruptions"]
    assert any("DeletionByPodGC" in e for e in in_place[0]["evidence"]), in_place[0]["evidence"]
    [lost] = resubmitted
    assert lost["kind"] == "SLICE_FAILURE" and lost["resumed_from_step"] == 10, lost
    assert any("node.kubernetes.io/out-of-service" in e or "DeletionByPodGC" in e for e in lost["evidence"]), lost["evidence"]
    wait_for(lambda: gone(identity, prefix), timeout=30)


@pytest.mark.parametrize(("save_seconds", "grace", "committed"), [("2", 120, True), ("30", 1, False)], ids=["committed", "partial"])
def test_a_checkpoint_saved_on_sigterm_is_resumed_from_when_committed_and_never_when_partial(pathways_cluster, save_seconds, grace, committed):
    """MaxText's ``enable_autocheckpoint`` on every host of the plain multislice JobSet: maintenance
    on process 0's slice at step 15 sends SIGTERM, and process 0 saves the step it completed last
    within its grace period (a 2 s save in 120 s) or is killed in the middle of it (a 30 s save in 1 s).
    The run goes on from that step in the first case, from the periodic step 10 in the second;
    the partial step is never reported."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    task_id = f"sigterm-{'ok' if committed else 'cut'}"
    run = f"sigterm-{uuid.uuid4().hex[:6]}"
    identity = TaskIdentity("dag", task_id, "run-1")
    document, container = local("jobset-multislice.yaml", run, env={"PATHWAYS_TESTING_SAVE_SECONDS": save_seconds})
    pod_spec = document["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["containers"][0]["command"].append("enable_autocheckpoint=true")
    pod_spec["terminationGracePeriodSeconds"] = grace  # what Autocheckpoint gets to save in
    prefix = document["metadata"]["name"][:10].rstrip("-")
    process_0 = {"jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": "0"}

    def maintenance_on_process_0s_slice(_: str) -> None:
        [pod] = [p for p in pathways_cluster.list("v1", "Pod", "default", labels=process_0) if p["metadata"]["name"].startswith(identity.workload_name(0, prefix))]
        node = pathways_cluster.get("v1", "Node", pod["spec"]["nodeName"], namespace=None)
        pathways_cluster.maintenance(node["metadata"]["labels"]["cloud.google.com/gke-nodepool"], duration=600)

    disrupt = when_step(pathways_cluster, identity, 15, maintenance_on_process_0s_slice, container=container, prefix=prefix, jobs=("slice", "slice"))
    restored: list[str] = []

    def note_restores() -> None:  # what each run of process 0 logged it resumed from, read before the pods go
        for pod in pathways_cluster.list("v1", "Pod", "default", labels=process_0):
            if pod["metadata"]["name"].startswith(identity.workload_name(0, prefix)[:-1]):
                for line in pathways_cluster.read_log("default", pod["metadata"]["name"], container):
                    if line.startswith(("restoring from this run's directory step", "preemption reached", "Job is preempted", "terminated at")) and (pod["metadata"]["name"], line) not in restored:
                        restored.append((pod["metadata"]["name"], line))

    done = threading.Event()
    watcher = threading.Thread(target=lambda: [note_restores() or time.sleep(0.1) for _ in iter(lambda: done.is_set(), True)], daemon=True)
    watcher.start()
    try:
        result = task(task_id, document, checkpoint_dir=f"gs://pathways-demo/maxtext/{run}/checkpoints").execute({"ti": TaskInstance("dag", task_id, "run-1")})
    finally:
        done.set()
        watcher.join(5)
    disrupt.join(1)
    assert result["state"] == "SUCCEEDED" and result["checkpoint"]["step"] == 19
    assert [d["kind"] for d in result["disruptions"]] == ["MAINTENANCE"]
    client = storage.Client(project="test", client_options={"api_endpoint": pathways_cluster.gcs_endpoint}, credentials=AnonymousCredentials())
    names = [b.name for b in client.list_blobs("pathways-demo", prefix=f"maxtext/{run}/checkpoints/")]
    steps_started = sorted({int(n.split("/")[3]) for n in names})
    steps_committed = sorted({int(n.split("/")[3]) for n in names if n.endswith("/commit_success.txt")})
    on_sigterm = [s for s in steps_started if s % 10 and s != 19]
    assert len(on_sigterm) == 1 and on_sigterm[0] > 10, (steps_started, restored)  # process 0 may be a step behind the host that said 15
    assert (on_sigterm[0] in steps_committed) is committed
    resumed = [int(line.rsplit(" ", 1)[1]) for _, line in restored if line.startswith("restoring from")]
    assert resumed and resumed[0] == (on_sigterm[0] if committed else 10), restored
    wait_for(lambda: gone(identity, prefix), timeout=30)

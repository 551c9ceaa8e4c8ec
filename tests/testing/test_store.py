"""The object store: resourceVersions, optimistic concurrency, finalizers, cascading deletion."""

from __future__ import annotations

import pytest

from pathways_airflow_testing.clock import VirtualClock
from pathways_airflow_testing.errors import ApiError
from pathways_airflow_testing.kinds import KindRegistry
from pathways_airflow_testing.store import Store, copy_of

pytestmark = pytest.mark.pure


@pytest.fixture
def store():
    kinds = KindRegistry()
    store = Store(kinds, VirtualClock(), history=10)
    store.create(kinds.lookup("", "v1", "namespaces"), {"metadata": {"name": "default"}})
    return store


def kind(store, group, version, plural):
    return store.kinds.lookup(group, version, plural)


def test_resource_versions_grow_across_kinds_and_events_replay(store):
    cms, secrets = kind(store, "", "v1", "configmaps"), kind(store, "", "v1", "secrets")
    start = store.resource_version
    a = store.create(cms, {"metadata": {"name": "a"}})
    b = store.create(secrets, {"metadata": {"name": "b"}})
    assert int(a["metadata"]["resourceVersion"]) < int(b["metadata"]["resourceVersion"])
    assert [e.name for e in store.events_since(cms, start)] == ["a"]


def test_stale_replace_conflicts_and_noop_writes_change_nothing(store):
    cms = kind(store, "", "v1", "configmaps")
    created = store.create(cms, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    fresh = copy_of(created)
    fresh["data"] = {"k": "2"}
    updated = store.replace(cms, fresh)
    with pytest.raises(ApiError) as stale:
        store.replace(cms, {**copy_of(created), "data": {"k": "3"}})
    assert stale.value.code == 409 and stale.value.reason == "Conflict"
    assert store.replace(cms, copy_of(updated)) is updated  # no-op: same object, same resourceVersion


def test_history_is_bounded_and_compaction_answers_410(store):
    cms = kind(store, "", "v1", "configmaps")
    start = store.resource_version
    for i in range(15):
        store.create(cms, {"metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiError) as gone:
        store.events_since(cms, start)
    assert gone.value.code == 410 and gone.value.reason == "Expired"
    recent = store.resource_version
    store.create(cms, {"metadata": {"name": "late"}})
    assert [e.name for e in store.events_since(cms, recent)] == ["late"]
    store.compact()
    with pytest.raises(ApiError):
        store.events_since(cms, recent)


def test_status_changes_only_through_the_status_subresource(store):
    jobs = kind(store, "batch", "v1", "jobs")
    created = store.create(jobs, {"metadata": {"name": "j"}, "spec": {"template": {}}, "status": {"active": 9}})
    assert "status" not in created or created["status"] == {}
    spec_write = store.replace(jobs, {**copy_of(created), "status": {"active": 5}, "spec": {"template": {}, "parallelism": 2}})
    assert spec_write.get("status") in (None, {}) and spec_write["metadata"]["generation"] == 2
    status_write = store.replace(jobs, {**copy_of(spec_write), "status": {"active": 5}, "spec": {"parallelism": 99}}, subresource="status")
    assert status_write["status"] == {"active": 5} and status_write["spec"]["parallelism"] == 2


def test_finalizers_hold_an_object_until_they_are_removed(store):
    cms = kind(store, "", "v1", "configmaps")
    store.create(cms, {"metadata": {"name": "held", "finalizers": ["example.com/keep"]}})
    pending = store.delete(cms, "default", "held")
    assert pending["metadata"]["deletionTimestamp"] and store.find(cms, "default", "held") is not None
    released = copy_of(pending)
    released["metadata"]["finalizers"] = []
    store.replace(cms, released)
    assert store.find(cms, "default", "held") is None


def owned(owner):
    return {"ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]}


def test_background_foreground_and_orphan_propagation(store):
    jobs, pods = kind(store, "batch", "v1", "jobs"), kind(store, "", "v1", "pods")
    for policy in ("Background", "Foreground", "Orphan"):
        job = store.create(jobs, {"metadata": {"name": f"job-{policy.lower()}"}, "spec": {"template": {}}})
        store.create(pods, {"metadata": {"name": f"pod-{policy.lower()}", **owned(job)}, "spec": {"containers": []}})
        store.delete(jobs, "default", job["metadata"]["name"], propagation=policy)
        pod = store.find(pods, "default", f"pod-{policy.lower()}")
        assert store.find(jobs, "default", job["metadata"]["name"]) is None
        if policy == "Orphan":
            assert pod is not None and pod["metadata"]["ownerReferences"] == []
        else:
            assert pod is None
    job = store.create(jobs, {"metadata": {"name": "job-default"}, "spec": {"template": {}}})
    store.create(pods, {"metadata": {"name": "pod-default", **owned(job)}, "spec": {"containers": []}})
    store.delete(jobs, "default", "job-default")
    assert store.find(pods, "default", "pod-default") is not None, "batch/v1 Jobs orphan their pods by default"


def test_foreground_deletion_waits_for_a_dependent_held_by_a_finalizer(store):
    jobs, pods = kind(store, "batch", "v1", "jobs"), kind(store, "", "v1", "pods")
    job = store.create(jobs, {"metadata": {"name": "fg"}, "spec": {"template": {}}})
    store.create(pods, {"metadata": {"name": "fg-pod", "finalizers": ["example.com/drain"], **owned(job)}, "spec": {"containers": []}})
    store.delete(jobs, "default", "fg", propagation="Foreground")
    waiting = store.find(jobs, "default", "fg")
    assert waiting is not None and "foregroundDeletion" in waiting["metadata"]["finalizers"]
    pod = store.find(pods, "default", "fg-pod")
    released = copy_of(pod)
    released["metadata"]["finalizers"] = []
    store.replace(pods, released)
    assert store.find(pods, "default", "fg-pod") is None and store.find(jobs, "default", "fg") is None


def test_deleting_again_in_the_background_takes_a_job_waiting_on_its_foreground_deletion_away_at_once(store):
    """As a real API server does (``registry/generic/registry/store.go``: a DELETE's propagation
    policy replaces the garbage-collection finalizers of an object already being deleted): a Job
    held by ``foregroundDeletion`` goes when deleted again in the background, and its pod is then
    collected in the background. Deleting it again with no policy, or in the foreground, keeps
    it waiting; other finalizers stay."""
    jobs, pods = kind(store, "batch", "v1", "jobs"), kind(store, "", "v1", "pods")
    job = store.create(jobs, {"metadata": {"name": "held"}, "spec": {"template": {}}})
    store.create(pods, {"metadata": {"name": "held-0", "finalizers": ["example.com/drain"], **owned(job)}, "spec": {"containers": []}})
    store.delete(jobs, "default", "held", propagation="Foreground")
    for policy in (None, "Foreground"):
        store.delete(jobs, "default", "held", propagation=policy)
        assert store.find(jobs, "default", "held")["metadata"]["finalizers"] == ["foregroundDeletion"], policy
    store.delete(jobs, "default", "held", propagation="Background")
    assert store.find(jobs, "default", "held") is None
    pod = store.find(pods, "default", "held-0")
    assert pod["metadata"].get("deletionTimestamp") and pod["metadata"]["finalizers"] == ["example.com/drain"]
    store.delete(pods, "default", "held-0", propagation="Background")
    assert store.find(pods, "default", "held-0")["metadata"]["finalizers"] == ["example.com/drain"], "not a collector's finalizer"


def test_a_late_collector_leaves_each_level_of_dependents_running_until_it_comes(store):
    """A JobSet → Job → pod chain deleted in the foreground while the collector is 60 s (1 s real)
    late: the JobSet is only marked and the pod lives on; the collector reaches the Job after 1 s
    and the pod after 2 s, and then the marked owners go. Set back to 0, it catches up at once."""
    import asyncio

    jobsets, jobs, pods = kind(store, "jobset.x-k8s.io", "v1alpha2", "jobsets"), kind(store, "batch", "v1", "jobs"), kind(store, "", "v1", "pods")
    store.clock = VirtualClock(speed=60)
    chain = ((jobsets, "js"), (jobs, "js-worker-0"), (pods, "js-worker-0-0"))

    def look() -> list[str]:
        found = [store.find(k, "default", n) for k, n in chain]
        return ["gone" if o is None else "marked" if o["metadata"].get("deletionTimestamp") else "live" for o in found]

    async def scenario(catch_up_after: float | None) -> list[list[str]]:
        store.set_collector_delay(60)
        jobset = store.create(jobsets, {"metadata": {"name": "js"}, "spec": {"replicatedJobs": []}})
        job = store.create(jobs, {"metadata": {"name": "js-worker-0", **owned(jobset)}, "spec": {"template": {}}})
        store.create(pods, {"metadata": {"name": "js-worker-0-0", **owned(job)}, "spec": {"containers": []}})
        store.delete(jobsets, "default", "js", propagation="Foreground")
        seen = [look()]
        if catch_up_after is not None:
            await asyncio.sleep(catch_up_after)
            store.set_collector_delay(0)
            return [*seen, look()]
        for _ in range(2):
            await asyncio.sleep(1.5 if len(seen) == 1 else 1.0)
            seen.append(look())
        store.set_collector_delay(0)
        return seen

    assert asyncio.run(scenario(None)) == [["marked", "live", "live"], ["marked", "marked", "live"], ["gone", "gone", "gone"]]
    assert asyncio.run(scenario(0.2)) == [["marked", "live", "live"], ["gone", "gone", "gone"]], "caught up at once"


def test_an_event_is_gone_after_the_api_servers_event_ttl_and_other_objects_stay(store):
    """kube-apiserver keeps Events for ``--event-ttl`` (an hour): at speed 3600 that is one real
    second. A ConfigMap made beside them stays; an Event deleted and made again under its name
    keeps its own hour."""
    import asyncio

    events, cms = kind(store, "", "v1", "events"), kind(store, "", "v1", "configmaps")
    store.clock = VirtualClock(speed=3600)

    async def scenario() -> list[list[str]]:
        store.create(events, {"metadata": {"name": "a.1"}, "involvedObject": {"kind": "Pod", "name": "a"}, "reason": "Scheduled"})
        store.create(events, {"metadata": {"name": "b.1"}, "involvedObject": {"kind": "Pod", "name": "b"}, "reason": "Scheduled"})
        store.create(cms, {"metadata": {"name": "kept"}})
        await asyncio.sleep(0.5)
        store.delete(events, "default", "b.1")
        store.create(events, {"metadata": {"name": "b.1"}, "involvedObject": {"kind": "Pod", "name": "b"}, "reason": "Pulled"})
        names = lambda: sorted(o["metadata"]["name"] for k in (events, cms) for o in store.list(k, "default"))  # noqa: E731
        seen = [names()]
        await asyncio.sleep(0.7)  # past the first hour of a.1, not of the second b.1
        seen.append(names())
        await asyncio.sleep(0.6)
        seen.append(names())
        return seen

    assert asyncio.run(scenario()) == [["a.1", "b.1", "kept"], ["b.1", "kept"], ["kept"]]


def test_creating_in_a_missing_namespace_is_404_and_names_can_be_generated(store):
    cms = kind(store, "", "v1", "configmaps")
    with pytest.raises(ApiError) as missing:
        store.create(cms, {"metadata": {"name": "x", "namespace": "nope"}})
    assert missing.value.code == 404 and 'namespaces "nope" not found' in missing.value.message
    generated = store.create(cms, {"metadata": {"generateName": "gen-"}})
    assert generated["metadata"]["name"].startswith("gen-") and len(generated["metadata"]["name"]) == 9

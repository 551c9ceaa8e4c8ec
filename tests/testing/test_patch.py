"""PATCH semantics: RFC 7386, RFC 6902, Kubernetes strategic merge patch, and Content-Type dispatch.

The kubectl bodies below were captured from kubectl v1.32.4 talking to a recording HTTP server
(same objects as here); the Python clients' choices are exercised through the installed clients.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from pathways_airflow_testing.patch import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    apply_patch,
    json_patch,
    merge_patch,
    strategic_merge_kinds,
    strategic_merge_patch,
    supports_strategic_merge,
)

LAST_APPLIED_KEY = "kubectl.kubernetes.io/last-applied-configuration"


def make_pod() -> dict:
    """A running worker pod as the API server returns it, with a server-injected env var."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "default",
            "uid": "1111",
            "resourceVersion": "7",
            "labels": {"app": "trainer"},
            "annotations": {LAST_APPLIED_KEY: "{}\n"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "train-worker-0",
                    "uid": "j-1",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {
                    "name": "main",
                    "image": "nginx:1.0",
                    "args": ["--steps=100"],
                    "ports": [
                        {"containerPort": 8471, "name": "tpu"},
                        {"containerPort": 8080, "name": "http"},
                    ],
                    "env": [
                        {"name": "A", "value": "1"},
                        {"name": "B", "value": "2"},
                        {"name": "INJECTED", "value": "x"},
                    ],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                },
                {"name": "sidecar", "image": "busybox"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False"},
            ],
        },
    }


def make_jobset() -> dict:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "uid": "2222", "labels": {"team": "ml"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {"name": "pathways-head", "replicas": 1},
                {"name": "workers", "replicas": 2},
            ],
            "failurePolicy": {"maxRestarts": 3},
        },
    }


def env_of(pod: dict, container: str = "main") -> list:
    return next(c for c in pod["spec"]["containers"] if c["name"] == container)["env"]


# --- RFC 7386 merge patch -----------------------------------------------------------------------------

# RFC 7386 Appendix A: every example, original -> patch -> result.
RFC7386_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC7386_EXAMPLES)
def test_merge_patch_follows_rfc7386(original, patch, expected):
    assert merge_patch(original, patch) == expected


def test_merge_patch_on_a_custom_resource_replaces_lists_and_never_mutates_inputs():
    jobset = make_jobset()
    patch = {
        "metadata": {"labels": {"team": None, "owner": "airflow"}},
        "spec": {"suspend": False, "replicatedJobs": [{"name": "workers", "replicas": 4}]},
    }
    jobset_before, patch_before = copy.deepcopy(jobset), copy.deepcopy(patch)

    result = merge_patch(jobset, patch)

    assert result["metadata"]["labels"] == {"owner": "airflow"}
    assert result["spec"] == {
        "suspend": False,
        "replicatedJobs": [{"name": "workers", "replicas": 4}],  # lists replace: the head is gone
        "failurePolicy": {"maxRestarts": 3},
    }
    assert jobset == jobset_before and patch == patch_before
    result["spec"]["failurePolicy"]["maxRestarts"] = 9
    result["spec"]["replicatedJobs"][0]["replicas"] = 9
    assert jobset == jobset_before and patch == patch_before  # no shared structure either


# --- RFC 6902 JSON patch ------------------------------------------------------------------------------

# RFC 6902 Appendix A examples that succeed.
RFC6902_EXAMPLES = [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    (
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    (
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    (
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],  # unknown members are ignored
        {"foo": "bar", "baz": "qux"},
    ),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    (
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
    ({"n": 1}, [{"op": "test", "path": "/n", "value": 1.0}], {"n": 1}),  # numbers compare by value
    ({"a": 1}, [{"op": "copy", "from": "/a", "path": "/b"}], {"a": 1, "b": 1}),
    ({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
]


@pytest.mark.parametrize(("document", "operations", "expected"), RFC6902_EXAMPLES)
def test_json_patch_follows_rfc6902(document, operations, expected):
    assert json_patch(document, operations) == expected


@pytest.mark.parametrize(
    ("document", "operations", "status", "message"),
    [
        (
            {"baz": "qux"},
            [{"op": "test", "path": "/baz", "value": "bar"}],
            422,
            'test failed: /baz is "qux", not "bar"',
        ),
        ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], 422, "/baz does not exist"),
        ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}], 422, "test failed"),
        ({"flag": True}, [{"op": "test", "path": "/flag", "value": 1}], 422, "test failed"),  # true is not 1
        ({"a": 1}, [{"op": "remove", "path": "/b"}], 422, "cannot remove /b: it does not exist"),
        ({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}], 422, 'use op "add"'),
        ({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 3}], 422, "index 2 is out of range"),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/01"}], 422, "'01' is not an array index"),
        ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}], 422, "into its own child"),
        ({"a": 1}, [{"op": "frobnicate", "path": "/a"}], 422, 'unknown JSON patch operation "frobnicate"'),
        ({"a": 1}, [{"op": "add", "value": 1}], 422, 'missing "path"'),
        ({"a": 1}, [{"op": "add", "path": "/b"}], 422, 'needs a "value"'),
        ({"a": 1}, [{"op": "add", "path": "b", "value": 1}], 422, "is not a JSON pointer"),
        ({"a": 1}, [{"op": "add", "path": "/~2", "value": 1}], 422, 'a "~" not followed by 0 or 1'),
        ({"a": 1}, {"op": "add", "path": "/b", "value": 1}, 400, "must be a JSON array of operations"),
        ({"a": 1}, ["add /b"], 400, "operation 0 is not an object"),
        ({"a": 1}, [{"op": 3, "path": "/a"}], 400, '"op" must be a string'),
        ({"a": 1}, [{"op": "test", "path": "/a", "value": 1}] * 10001, 413, "maximum operations"),
    ],
)
def test_json_patch_errors_carry_the_servers_status(document, operations, status, message):
    with pytest.raises(PatchError) as raised:
        json_patch(document, operations)
    assert raised.value.status == status
    assert message in str(raised.value)


def test_json_patch_is_atomic_and_leaves_its_inputs_alone():
    pod = make_pod()
    before = copy.deepcopy(pod)
    operations = [
        {"op": "add", "path": "/metadata/labels/stage", "value": "done"},
        {"op": "test", "path": "/status/phase", "value": "Succeeded"},  # fails: nothing may stick
    ]
    with pytest.raises(PatchError) as raised:
        json_patch(pod, operations)
    assert raised.value.status == 422 and raised.value.reason == "Invalid"
    assert "JSON patch operation 1" in str(raised.value)
    assert pod == before


def test_json_patch_escapes_reach_annotation_keys_with_slashes():
    pod = make_pod()
    result = json_patch(
        pod,
        [
            {"op": "add", "path": "/metadata/annotations/example.com~1step", "value": "42"},
            {
                "op": "remove",
                "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
            },
            {"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/also"},
        ],
    )
    assert result["metadata"]["annotations"] == {"example.com/step": "42"}
    assert result["metadata"]["finalizers"] == ["example.com/keep", "example.com/also"]


# --- strategic merge patch ----------------------------------------------------------------------------


def test_containers_merge_by_name_and_unnamed_fields_keep_their_values():
    pod = make_pod()
    patch = {"spec": {"containers": [{"name": "main", "image": "nginx:1.2"}]}}
    result = strategic_merge_patch(pod, patch, "Pod")
    main, sidecar = result["spec"]["containers"]
    assert main["image"] == "nginx:1.2"
    assert main["env"] == env_of(pod) and main["args"] == ["--steps=100"]
    assert sidecar == {"name": "sidecar", "image": "busybox"}


def test_nested_lists_merge_by_their_own_keys():
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "env": [{"name": "B", "value": "20"}, {"name": "D", "value": "4"}],
                    "ports": [{"containerPort": 8080, "name": "metrics"}],
                    "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}],
                }
            ],
            "volumes": [{"name": "ckpt", "emptyDir": {"medium": "Memory"}}],
        }
    }
    result = strategic_merge_patch(make_pod(), patch, "Pod")
    main = result["spec"]["containers"][0]
    # Order as on the API server: an existing item stays ahead of a patched one only if it was
    # ahead of it before; items new to the list go before the remaining existing ones.
    assert [(e["name"], e["value"]) for e in main["env"]] == [
        ("A", "1"),
        ("B", "20"),
        ("D", "4"),
        ("INJECTED", "x"),
    ]
    assert main["ports"] == [
        {"containerPort": 8471, "name": "tpu"},
        {"containerPort": 8080, "name": "metrics"},
    ]
    assert [m["mountPath"] for m in main["volumeMounts"]] == ["/ckpt", "/data"]
    assert [v["name"] for v in result["spec"]["volumes"]] == ["ckpt", "data"]


def test_a_new_container_goes_first_as_in_the_kubectl_patch_documentation():
    patch = {"spec": {"containers": [{"name": "profiler", "image": "redis"}]}}
    result = strategic_merge_patch(make_pod(), patch, "Pod")
    assert [c["name"] for c in result["spec"]["containers"]] == ["profiler", "main", "sidecar"]


def test_lists_without_a_strategy_are_replaced():
    tolerations = [{"key": "cloud.google.com/gke-spot", "operator": "Exists"}]
    patch = {"spec": {"tolerations": tolerations, "containers": [{"name": "main", "args": ["--steps=5"]}]}}
    result = strategic_merge_patch(make_pod(), patch, "Pod")
    assert result["spec"]["tolerations"] == tolerations  # tolerations have no patch strategy upstream
    assert result["spec"]["containers"][0]["args"] == ["--steps=5"]


def test_status_conditions_merge_by_type():
    conditions = [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]
    patch = {"status": {"conditions": conditions}}
    result = strategic_merge_patch(make_pod(), patch, "Pod")
    assert result["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True"},
        {"type": "Initialized", "status": "True"},
    ]


def test_finalizers_are_a_set_and_owner_references_merge_by_uid():
    pod = make_pod()
    finalizers = ["example.com/keep", "example.com/new"]
    added = strategic_merge_patch(pod, {"metadata": {"finalizers": finalizers}}, "Pod")
    assert added["metadata"]["finalizers"] == ["example.com/keep", "example.com/new"]
    removed = strategic_merge_patch(
        added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/keep"]}}, "Pod"
    )
    assert removed["metadata"]["finalizers"] == ["example.com/new"]
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "js-1"}
    owned = strategic_merge_patch(
        pod, {"metadata": {"ownerReferences": [owner, {"uid": "j-1", "blockOwnerDeletion": True}]}}, "Pod"
    )
    references = owned["metadata"]["ownerReferences"]
    assert [(o["uid"], o.get("blockOwnerDeletion"), o.get("kind")) for o in references] == [
        ("js-1", None, "JobSet"),  # every item is named by the patch: the patch's order wins
        ("j-1", True, "Job"),
    ]


def test_null_deletes_and_new_values_lose_their_nulls():
    patch = {
        "metadata": {"labels": {"app": None}, "annotations": None},
        "spec": {"nodeSelector": {"a": "b", "c": None}},
    }
    result = strategic_merge_patch(make_pod(), patch, "Pod")
    assert result["metadata"]["labels"] == {}
    assert "annotations" not in result["metadata"]
    assert result["spec"]["nodeSelector"] == {"a": "b"}


def test_patch_directives_delete_and_replace_list_items_and_maps():
    pod = make_pod()
    delete = {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}
    deleted = strategic_merge_patch(pod, delete, "Pod")
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["main"]

    replaced = strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "solo", "image": "x"}, {"$patch": "replace"}]}}, "Pod"
    )
    assert replaced["spec"]["containers"] == [{"name": "solo", "image": "x"}]

    relabel = {"metadata": {"labels": {"$patch": "replace", "only": "this"}}}
    relabelled = strategic_merge_patch(pod, relabel, "Pod")
    assert relabelled["metadata"]["labels"] == {"only": "this"}

    emptied = strategic_merge_patch(pod, {"status": {"$patch": "delete"}}, "Pod")
    assert emptied["status"] == {}


def test_merge_directive_is_refused_as_the_api_server_refuses_it():
    with pytest.raises(PatchError) as in_map:
        strategic_merge_patch(make_pod(), {"metadata": {"labels": {"$patch": "merge", "a": "b"}}}, "Pod")
    assert in_map.value.status == 500 and "unknown patch type: merge" in str(in_map.value)
    with pytest.raises(PatchError) as in_list:
        strategic_merge_patch(make_pod(), {"spec": {"containers": [{"$patch": "merge"}]}}, "Pod")
    assert "merging lists cannot yet be specified in the patch" in str(in_list.value)


def test_retain_keys_clears_the_fields_it_does_not_list():
    volume = {"name": "data", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cfg"}}
    patch = {"spec": {"volumes": [volume]}}
    result = strategic_merge_patch(make_pod(), patch, "Pod")
    assert result["spec"]["volumes"] == [{"name": "data", "configMap": {"name": "cfg"}}]  # emptyDir cleared
    with pytest.raises(PatchError) as raised:
        strategic_merge_patch(make_pod(), {"spec": {"$retainKeys": ["containers"], "nodeName": "x"}}, "Pod")
    assert raised.value.status == 400 and "retainKeys" in str(raised.value)


def test_set_element_order_reorders_a_merged_list():
    patch = {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "main"}]}}
    result = strategic_merge_patch(make_pod(), patch, "Pod")
    assert [c["name"] for c in result["spec"]["containers"]] == ["sidecar", "main"]
    with pytest.raises(PatchError, match="doesn't match \\$setElementOrder list"):
        strategic_merge_patch(
            make_pod(),
            {"spec": {"$setElementOrder/containers": [{"name": "main"}], "containers": [{"name": "other"}]}},
            "Pod",
        )


def test_pod_templates_inside_jobs_follow_the_pod_rules():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train-worker-0"},
        "spec": {
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {
                    "containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}, {"name": "s"}]
                },
            }
        },
        "status": {"conditions": [{"type": "Suspended", "status": "True"}]},
    }
    patch = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}
        },
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    result = strategic_merge_patch(job, patch, "Job")
    containers = result["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main", "s"]
    assert containers[0]["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert [c["type"] for c in result["status"]["conditions"]] == ["Complete", "Suspended"]


def test_service_ports_merge_by_port_and_other_kinds_only_by_object_meta():
    service = {"kind": "Service", "metadata": {"name": "head"}, "spec": {"ports": [{"port": 8080}]}}
    merged = strategic_merge_patch(service, {"spec": {"ports": [{"port": 29000}]}}, "Service")
    assert [p["port"] for p in merged["spec"]["ports"]] == [29000, 8080]
    configmap = {"kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["a"]}, "data": {"x": "1"}}
    patch = {"metadata": {"finalizers": ["b"]}, "data": {"y": "2"}}
    patched = strategic_merge_patch(configmap, patch, "ConfigMap")
    assert patched["data"] == {"x": "1", "y": "2"}
    assert patched["metadata"]["finalizers"] == ["b", "a"]
    assert {"Pod", "Job", "Service", "Node", "Namespace"} <= strategic_merge_kinds()


@pytest.mark.parametrize(
    ("patch", "status", "message"),
    [
        ({"spec": {"containers": [{"image": "x"}]}}, 500, "does not contain declared merge key: name"),
        ({"spec": {"containers": [["main"]]}}, 422, "lists of lists are not supported"),
        (
            {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}},
            400,
            "invalid patch format of primitive list",
        ),
        (
            {"metadata": {"$setElementOrder/finalizers": "a"}},
            400,
            "invalid patch format of setElementOrder list",
        ),
    ],
)
def test_malformed_strategic_patches_fail_like_the_api_server(patch, status, message):
    with pytest.raises(PatchError) as raised:
        strategic_merge_patch(make_pod(), patch, "Pod")
    assert raised.value.status == status
    assert message in str(raised.value)


def test_strategic_merge_patch_does_not_mutate_or_share_with_its_inputs():
    pod, patch = make_pod(), {"spec": {"containers": [{"name": "new", "env": [{"name": "X", "value": "1"}]}]}}
    pod_before, patch_before = copy.deepcopy(pod), copy.deepcopy(patch)
    result = strategic_merge_patch(pod, patch, "Pod")
    containers = {c["name"]: c for c in result["spec"]["containers"]}
    containers["new"]["env"][0]["value"] = "changed"
    containers["main"]["env"][0]["value"] = "changed"
    assert pod == pod_before and patch == patch_before


# --- what kubectl sends (captured from kubectl v1.32.4) ------------------------------------------------

KUBECTL_LABEL = b'{"metadata":{"labels":{"team":"ml"}}}'
KUBECTL_UNLABEL = b'{"metadata":{"labels":{"app":null}}}'
KUBECTL_ANNOTATE = b'{"metadata":{"annotations":{"example.com/note":"hello"}}}'
KUBECTL_PATCH_JSON = b'[{"op":"add","path":"/metadata/labels/x","value":"y"}]'
KUBECTL_PATCH_STRATEGIC = b'{"spec":{"containers":[{"name":"main","image":"nginx:1.2"}]}}'

# `kubectl apply` of a pod whose file changed image 1.0 -> 1.1, env [A, B] -> [A, C], label team
# added and finalizer example.com/keep -> example.com/other (three-way strategic merge patch).
NEW_LAST_APPLIED = (
    '{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"finalizers":["example.com/other"],'
    '"labels":{"app":"trainer","team":"ml"},"name":"p","namespace":"default"},"spec":{"containers":'
    '[{"env":[{"name":"A","value":"1"},{"name":"C","value":"3"}],"image":"nginx:1.1","name":"main"}]}}\n'
)
KUBECTL_APPLY_POD = json.dumps(
    {
        "metadata": {
            "$deleteFromPrimitiveList/finalizers": ["example.com/keep"],
            "$setElementOrder/finalizers": ["example.com/other"],
            "annotations": {LAST_APPLIED_KEY: NEW_LAST_APPLIED},
            "finalizers": ["example.com/other"],
            "labels": {"team": "ml"},
        },
        "spec": {
            "$setElementOrder/containers": [{"name": "main"}],
            "containers": [
                {
                    "$setElementOrder/env": [{"name": "A"}, {"name": "C"}],
                    "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "B"}],
                    "image": "nginx:1.1",
                    "name": "main",
                }
            ],
        },
    },
    separators=(",", ":"),
).encode()

# `kubectl apply` of a JobSet: custom resources get a merge patch carrying the whole new config.
NEW_JOBSET_LAST_APPLIED = (
    '{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"annotations":{},"name":"js",'
    '"namespace":"default"},"spec":{"replicatedJobs":[{"name":"workers","replicas":3}],"suspend":false}}\n'
)
KUBECTL_APPLY_JOBSET = json.dumps(
    {
        "metadata": {"annotations": {LAST_APPLIED_KEY: NEW_JOBSET_LAST_APPLIED}},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 3}], "suspend": False},
    },
    separators=(",", ":"),
).encode()


def test_kubectl_label_unlabel_and_annotate_are_merge_patches():
    pod = make_pod()
    labelled = apply_patch(pod, KUBECTL_LABEL, MERGE_PATCH, "Pod", "")
    assert labelled["metadata"]["labels"] == {"app": "trainer", "team": "ml"}
    unlabelled = apply_patch(labelled, KUBECTL_UNLABEL, MERGE_PATCH, "Pod", "")
    assert unlabelled["metadata"]["labels"] == {"team": "ml"}
    annotated = apply_patch(make_jobset(), KUBECTL_ANNOTATE, MERGE_PATCH, "JobSet", "jobset.x-k8s.io")
    assert annotated["metadata"]["annotations"] == {"example.com/note": "hello"}
    assert annotated["spec"] == make_jobset()["spec"]


def test_kubectl_patch_json_and_strategic_on_a_pod():
    pod = make_pod()
    labelled = apply_patch(pod, KUBECTL_PATCH_JSON, JSON_PATCH, "Pod", "")
    assert labelled["metadata"]["labels"] == {"app": "trainer", "x": "y"}
    patched = apply_patch(pod, KUBECTL_PATCH_STRATEGIC, STRATEGIC_MERGE_PATCH, "Pod", "")
    images = [(c["name"], c["image"]) for c in patched["spec"]["containers"]]
    assert images == [("main", "nginx:1.2"), ("sidecar", "busybox")]


def test_kubectl_patch_defaults_to_strategic_which_custom_resources_refuse_with_415():
    with pytest.raises(PatchError) as raised:
        body = b'{"spec":{"suspend":false}}'
        apply_patch(make_jobset(), body, STRATEGIC_MERGE_PATCH, "JobSet", "jobset.x-k8s.io")
    assert raised.value.status == 415 and raised.value.reason == "UnsupportedMediaType"
    message = str(raised.value)
    assert "the body of the request was in an unknown format" in message
    assert "application/merge-patch+json" in message and "--type=merge" in message


def test_kubectl_apply_three_way_patch_on_a_pod():
    result = apply_patch(make_pod(), KUBECTL_APPLY_POD, STRATEGIC_MERGE_PATCH, "Pod", "")
    assert result["metadata"]["finalizers"] == ["example.com/other"]
    assert result["metadata"]["labels"] == {"app": "trainer", "team": "ml"}
    assert result["metadata"]["annotations"] == {LAST_APPLIED_KEY: NEW_LAST_APPLIED}
    main, sidecar = result["spec"]["containers"]
    assert main["image"] == "nginx:1.1"
    # B deleted, C added, the server-injected var kept. The API server places INJECTED between
    # A and C: it orders server-only items by their slot in the original slice, into which it
    # shifted survivors and appended C (apimachinery's upstream tests pin the same order).
    assert main["env"] == [
        {"name": "A", "value": "1"},
        {"name": "INJECTED", "value": "x"},
        {"name": "C", "value": "3"},
    ]
    assert main["ports"] == make_pod()["spec"]["containers"][0]["ports"]
    assert sidecar["name"] == "sidecar"  # never in the applied file's list, so not deleted
    assert result["status"] == make_pod()["status"]
    assert not any(key.startswith("$") for key in json.dumps(result).split('"'))


def test_kubectl_apply_on_a_custom_resource_is_a_merge_patch():
    result = apply_patch(make_jobset(), KUBECTL_APPLY_JOBSET, MERGE_PATCH, "JobSet", "jobset.x-k8s.io")
    assert result["spec"] == {
        "suspend": False,
        "replicatedJobs": [{"name": "workers", "replicas": 3}],
        "failurePolicy": {"maxRestarts": 3},
    }
    assert result["metadata"]["annotations"][LAST_APPLIED_KEY] == NEW_JOBSET_LAST_APPLIED


# --- Content-Type dispatch -----------------------------------------------------------------------------


def test_body_may_be_bytes_text_or_already_decoded():
    for body in (KUBECTL_LABEL, KUBECTL_LABEL.decode(), json.loads(KUBECTL_LABEL)):
        assert apply_patch(make_pod(), body, MERGE_PATCH, "Pod", "")["metadata"]["labels"]["team"] == "ml"
    charset = apply_patch(make_pod(), KUBECTL_LABEL, "Application/Merge-Patch+JSON; charset=utf-8", "Pod", "")
    assert charset["metadata"]["labels"]["team"] == "ml"


@pytest.mark.parametrize(
    ("content_type", "body", "status", "message"),
    [
        (
            "application/apply-patch+yaml",
            b"metadata: {}",
            415,
            "server-side apply is not supported by the local cluster",
        ),
        ("application/apply-patch+cbor", b"\xa0", 415, "server-side apply is not supported"),
        ("application/json", b"{}", 415, "accepted media types include: application/json-patch+json"),
        ("", b"{}", 415, "no Content-Type"),
        (MERGE_PATCH, b"{not json", 400, "not valid JSON"),
        (MERGE_PATCH, b"\xff", 400, "not UTF-8"),
        (MERGE_PATCH, b"null", 400, "a merge patch must be a JSON object"),
        (STRATEGIC_MERGE_PATCH, b"[]", 400, "a strategic merge patch must be a JSON object"),
        (JSON_PATCH, b'[{"op":"replace","path":"","value":[1]}]', 422, "not an object"),
    ],
)
def test_requests_the_api_server_refuses(content_type, body, status, message):
    with pytest.raises(PatchError) as raised:
        apply_patch(make_pod(), body, content_type, "Pod", "")
    assert raised.value.status == status
    assert message in str(raised.value)


def test_strategic_merge_is_for_built_in_groups_only():
    built_in = ("", "apps", "batch", "rbac.authorization.k8s.io", "coordination.k8s.io", "scheduling.k8s.io")
    for group in (*built_in, "events.k8s.io", "policy"):
        assert supports_strategic_merge(group), group
    # Custom resource groups, including ones that end in .k8s.io.
    custom = ("jobset.x-k8s.io", "kueue.x-k8s.io", "pathways-job.pathways.domain")
    for group in (*custom, "metrics.k8s.io", "gateway.networking.k8s.io"):
        assert not supports_strategic_merge(group), group


# --- what the installed Python clients send -------------------------------------------------------------


class _Recorded:
    """Stands in for an HTTP response: the clients only need status, reason, data and headers."""

    status, reason = 200, "OK"

    def __init__(self, data: bytes):
        self.data = data
        self.headers = {"content-type": "application/json"}

    def getheaders(self):
        return self.headers

    def getheader(self, name, default=None):
        return self.headers.get(name, default)


def _sync_client_sends(call) -> tuple[str, object]:
    """Run ``call(kubernetes.client)`` against a stub connection pool; return what went on the wire."""
    import kubernetes.client as k8s

    sent: list = []

    class Pool:
        def request(self, method, url, body=None, headers=None, **_):
            sent.append((headers["Content-Type"], json.loads(body)))
            return _Recorded(b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}')

    configuration = k8s.Configuration()
    configuration.host = "http://cluster.invalid"
    api = k8s.ApiClient(configuration)
    api.rest_client.pool_manager = Pool()
    call(k8s, api)
    return sent[0]


def _async_client_sends(call) -> tuple[str, object]:
    import kubernetes_asyncio.client as k8s

    sent: list = []

    async def run():
        configuration = k8s.Configuration()
        configuration.host = "http://cluster.invalid"
        async with k8s.ApiClient(configuration) as api:

            async def request(method, url, headers=None, body=None, **_):
                sent.append((headers["Content-Type"], body))
                return _Recorded(b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}')

            api.rest_client.request = request
            await call(k8s, api)

    asyncio.run(run())
    return sent[0]


LABEL_PATCH = {"metadata": {"labels": {"team": "ml"}}}
LABEL_OPERATIONS = [{"op": "add", "path": "/metadata/labels/team", "value": "ml"}]


@pytest.mark.parametrize("body", [LABEL_PATCH, LABEL_OPERATIONS], ids=["dict", "list"])
def test_both_clients_patch_built_in_objects_in_a_way_the_cluster_accepts(body):
    sync = _sync_client_sends(lambda k8s, api: k8s.CoreV1Api(api).patch_namespaced_pod("p", "default", body))

    async def async_call(k8s, api):
        await k8s.CoreV1Api(api).patch_namespaced_pod("p", "default", body)

    asynchronous = _async_client_sends(async_call)
    expected = STRATEGIC_MERGE_PATCH if isinstance(body, dict) else JSON_PATCH
    for content_type, sent in (sync, asynchronous):
        assert content_type == expected
        assert apply_patch(make_pod(), sent, content_type, "Pod", "")["metadata"]["labels"]["team"] == "ml"


def _jobset_team(sent, content_type: str) -> str:
    patched = apply_patch(make_jobset(), sent, content_type, "JobSet", "jobset.x-k8s.io")
    return patched["metadata"]["labels"]["team"]


def _custom_object_patch(body, **kwargs):
    def call(k8s, api):
        return k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", "js", body, **kwargs
        )

    return call


def test_custom_object_patches_that_work_on_a_real_cluster_work_here():
    content_type, sent = _sync_client_sends(_custom_object_patch(LABEL_PATCH))
    assert content_type == MERGE_PATCH
    assert _jobset_team(sent, content_type) == "ml"

    async def async_list(k8s, api):
        await _custom_object_patch(LABEL_OPERATIONS)(k8s, api)

    content_type, sent = _async_client_sends(async_list)
    assert content_type == JSON_PATCH
    assert _jobset_team(sent, content_type) == "ml"


def test_custom_object_patches_that_fail_on_a_real_cluster_fail_here_with_the_fix():
    # The sync client sends a list of operations as a merge patch...
    content_type, sent = _sync_client_sends(_custom_object_patch(LABEL_OPERATIONS))
    assert content_type == MERGE_PATCH
    with pytest.raises(PatchError) as raised:
        apply_patch(make_jobset(), sent, content_type, "JobSet", "jobset.x-k8s.io")
    assert raised.value.status == 422
    assert '_content_type="application/json-patch+json"' in str(raised.value)
    # ...and following the advice works.
    content_type, sent = _sync_client_sends(_custom_object_patch(LABEL_OPERATIONS, _content_type=JSON_PATCH))
    assert _jobset_team(sent, content_type) == "ml"

    # The asyncio client sends a dict as a JSON patch...
    async def async_dict(k8s, api):
        await _custom_object_patch(LABEL_PATCH)(k8s, api)

    content_type, sent = _async_client_sends(async_dict)
    assert content_type == JSON_PATCH
    with pytest.raises(PatchError) as raised:
        apply_patch(make_jobset(), sent, content_type, "JobSet", "jobset.x-k8s.io")
    assert raised.value.status == 400
    assert '_content_type="application/merge-patch+json"' in str(raised.value)

    async def async_dict_fixed(k8s, api):
        await _custom_object_patch(LABEL_PATCH, _content_type=MERGE_PATCH)(k8s, api)

    content_type, sent = _async_client_sends(async_dict_fixed)
    assert _jobset_team(sent, content_type) == "ml"

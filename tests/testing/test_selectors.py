"""Label and field selectors, checked against the API server's parsing and matching rules."""

from __future__ import annotations

import pytest

from pathways_airflow_testing.selectors import (
    FieldSelector,
    LabelSelector,
    Operator,
    SelectorError,
    label_selector_from_dict,
    label_selector_from_set,
    parse_field_selector,
    parse_label_selector,
    supported_field_labels,
)

# Labels as JobSet puts them on the pods of a Pathways workload.
WORKER = {
    "jobset.sigs.k8s.io/jobset-name": "train",
    "jobset.sigs.k8s.io/replicatedjob-name": "worker",
    "batch.kubernetes.io/job-completion-index": "3",
    "app": "pathways",
    "tier": "",
}
HEAD = {"jobset.sigs.k8s.io/jobset-name": "train", "jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"}


# --- label selector strings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "worker", "head"),
    [
        ("", True, True),
        ("jobset.sigs.k8s.io/jobset-name=train", True, True),
        ("jobset.sigs.k8s.io/jobset-name==train", True, True),
        ("jobset.sigs.k8s.io/replicatedjob-name!=worker", False, True),
        ("app!=pathways", False, True),  # != also matches objects without the key
        ("jobset.sigs.k8s.io/replicatedjob-name in (worker,pathways-head)", True, True),
        ("jobset.sigs.k8s.io/replicatedjob-name notin (worker)", False, True),
        ("app notin (other)", True, True),  # notin matches objects without the key
        ("app", True, False),
        ("!app", False, True),
        ("tier=", True, False),  # "k=" selects the empty value, not a missing key
        ("tier in ()", True, False),  # "()" is the set holding ""
        ("batch.kubernetes.io/job-completion-index>2", True, False),
        ("batch.kubernetes.io/job-completion-index<3", False, False),
        ("app=pathways,!canary,jobset.sigs.k8s.io/jobset-name in (train)", True, False),
    ],
)
def test_label_selector_matches_like_the_api_server(selector, worker, head):
    parsed = parse_label_selector(selector)
    assert parsed.matches(WORKER) is worker
    assert parsed.matches(HEAD) is head


def test_whitespace_between_tokens_is_ignored():
    spaced = parse_label_selector(
        "  app = pathways ,\tjobset.sigs.k8s.io/replicatedjob-name  in ( worker , x ) , ! canary "
    )
    compact = parse_label_selector("app=pathways,jobset.sigs.k8s.io/replicatedjob-name in (worker,x),!canary")
    assert spaced == compact
    assert spaced.matches(WORKER) and not spaced.matches(HEAD)


def test_in_and_notin_are_ordinary_words_where_a_value_or_key_goes():
    assert parse_label_selector("mode in (in,notin)").matches({"mode": "notin"})
    assert parse_label_selector("in=yes").matches({"in": "yes"})


def test_greater_than_needs_an_integer_label_value():
    selector = parse_label_selector("rank>1")
    assert selector.matches({"rank": "2"})
    assert not selector.matches({"rank": "two"})
    assert not selector.matches({})


def test_parsed_selector_keeps_structure_and_prints_canonically():
    selector = parse_label_selector("b in (z,y,y),a!=1,!c")
    assert [r.key for r in selector.requirements] == ["a", "b", "c"]
    assert selector.requirements[1].operator is Operator.IN
    assert selector.requirements[1].values == ("y", "z")
    assert str(selector) == "a!=1,b in (y,z),!c"
    assert parse_label_selector(str(selector)) == selector


def test_empty_selector_matches_objects_without_labels():
    assert parse_label_selector("").matches(None)
    assert parse_label_selector("").matches_everything
    assert not parse_label_selector("app").matches(None)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app in worker", "unable to parse requirement: found 'worker' expected: '('"),
        ("app in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("app worker", "unable to parse requirement: found 'worker', expected: in, notin, =, ==, !=, gt, lt"),
        ("app=a b", "found 'b', expected: ',' or 'end of string'"),
        ("app=pathways,", "found '', expected: identifier after ','"),
        ("=pathways", "found '=', expected: !, identifier, or 'end of string'"),
        ("!app=x", "found '=', expected: ',' or 'end of string'"),
        ("app=(x)", "unable to parse requirement: found '(', expected: identifier"),
        ("-app=x", "unable to parse requirement: key: Invalid value: \"-app\": name part must consist of"),
        ("Example.com/app=x", "prefix part a lowercase RFC 1123 subdomain"),
        ("a/b/c=x", "a qualified name must consist of"),
        ("app=-x", 'values[0][app]: Invalid value: "-x": a valid label must be an empty string'),
        ("app=" + "x" * 64, "must be no more than 63 characters"),
        ("rank>high", "for 'Gt', 'Lt' operators, the value must be an integer"),
    ],
)
def test_invalid_label_selectors_fail_with_the_servers_message(selector, message):
    with pytest.raises(SelectorError) as raised:
        parse_label_selector(selector)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError)  # the server maps it to 400 BadRequest


# --- metav1.LabelSelector objects ---------------------------------------------------------------------


def test_label_selector_object_ands_match_labels_and_expressions():
    selector = label_selector_from_dict(
        {
            "matchLabels": {"jobset.sigs.k8s.io/jobset-name": "train"},
            "matchExpressions": [
                {"key": "jobset.sigs.k8s.io/replicatedjob-name", "operator": "In", "values": ["worker"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "app", "operator": "Exists"},
                {"key": "tier", "operator": "NotIn", "values": ["gold"]},
            ],
        }
    )
    assert selector.matches(WORKER)
    assert not selector.matches(HEAD)
    assert not selector.matches({**WORKER, "canary": "true"})
    assert str(selector) == (
        "app,!canary,jobset.sigs.k8s.io/jobset-name=train,"
        "jobset.sigs.k8s.io/replicatedjob-name in (worker),tier notin (gold)"
    )


def test_empty_selector_object_matches_all_and_null_matches_none():
    assert label_selector_from_dict({}).matches(WORKER)
    assert label_selector_from_dict({"matchLabels": None, "matchExpressions": []}).matches({})
    nothing = label_selector_from_dict(None)
    assert nothing.matches_nothing and not nothing.matches_everything
    assert not nothing.matches(WORKER)
    assert not nothing.matches({})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
            '"Equals" is not a valid label selector operator',
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "values set can't be empty"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "values set must be empty",
        ),
        ({"matchExpressions": [{"operator": "Exists"}]}, "name part must be non-empty"),
        ({"matchLabels": {"app": "no spaces"}}, "a valid label must be an empty string"),
        ({"matchLabels": {"app": 3}}, "must be a string"),
        (["app=x"], "must be an object"),
    ],
)
def test_invalid_selector_objects_are_refused(selector, message):
    with pytest.raises(SelectorError, match=message):
        label_selector_from_dict(selector)


def test_selector_from_set_is_equality_and_empty_set_selects_everything():
    assert label_selector_from_set({"app": "pathways"}).matches(WORKER)
    assert not label_selector_from_set({"app": "pathways"}).matches(HEAD)
    assert label_selector_from_set(None) == LabelSelector()
    assert label_selector_from_set({}).matches(HEAD)


# --- field selectors ------------------------------------------------------------------------------

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train-worker-0-0", "namespace": "ml"},
    "spec": {"nodeName": "gke-tpu-1", "restartPolicy": "Never", "containers": [{"name": "main"}]},
    "status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}]},
}
PENDING_POD = {
    "metadata": {"name": "train-worker-0-1", "namespace": "ml"},
    "spec": {},
    "status": {"phase": "Pending"},
}
EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "train-worker-0-0.17f", "namespace": "ml"},
    "involvedObject": {"kind": "Pod", "name": "train-worker-0-0", "namespace": "ml", "uid": "1234"},
    "reason": "FailedScheduling",
    "type": "Warning",
    "source": {"component": "default-scheduler"},
}


@pytest.mark.parametrize(
    ("selector", "obj", "expected"),
    [
        ("", POD, True),
        ("metadata.name=train-worker-0-0", POD, True),
        ("metadata.name==train-worker-0-0,metadata.namespace=ml", POD, True),
        ("metadata.namespace!=ml", POD, False),
        ("status.phase!=Succeeded,status.phase!=Failed", POD, True),
        ("spec.nodeName=gke-tpu-1", POD, True),
        ("spec.nodeName=", PENDING_POD, True),  # an unscheduled pod has no nodeName: compares as ""
        ("spec.nodeName=", POD, False),
        ("status.podIP=10.0.0.9", POD, True),
        ("status.podIP=10.0.0.7", {"status": {"podIPs": [{"ip": "10.0.0.7"}]}}, True),  # read from podIPs[0]
        ("spec.hostNetwork=false", POD, True),  # typed bool: absent reads as "false"
        (
            "involvedObject.kind=Pod,involvedObject.name=train-worker-0-0,involvedObject.namespace=ml",
            EVENT,
            True,
        ),
        ("involvedObject.uid=1234,type=Warning,reason=FailedScheduling", EVENT, True),
        ("type=Normal", EVENT, False),
        ("source=default-scheduler", EVENT, True),  # source means source.component
        ("source=kueue", {"reportingController": "kueue"}, True),  # ... or reportingController
        ("reportingComponent=kueue", {"reportingController": "kueue"}, True),
        ("status.successful=0", {"kind": "Job", "status": {}}, True),  # Job: status.succeeded, default 0
        ("status.successful=4", {"kind": "Job", "status": {"succeeded": 4}}, True),
        ("spec.unschedulable=false", {"kind": "Node", "spec": {}}, True),
        ("spec.unschedulable=true", {"kind": "Node", "spec": {"unschedulable": True}}, True),
    ],
)
def test_field_selector_matches_like_the_api_server(selector, obj, expected):
    assert parse_field_selector(selector).matches(obj) is expected


def test_escaped_commas_and_equals_are_part_of_the_value():
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d")
    assert selector.matches({"metadata": {"name": "a,b=c\\d"}})
    assert str(selector) == r"metadata.name=a\,b\=c\\d"


def test_field_selector_is_an_and_of_terms_and_exposes_its_fields():
    selector = parse_field_selector("status.phase=Running,metadata.name=train-worker-0-0")
    assert selector.fields == {"status.phase", "metadata.name"}
    assert selector.matches(POD)
    assert not selector.matches(PENDING_POD)
    assert isinstance(selector, FieldSelector)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("status.phase=Running,phase", "can't understand 'phase'"),
        ("metadata.name==a=b", "unescaped character in value: '='"),
        (r"metadata.name=a\b", r"invalid escape sequence: \b"),
        ("metadata.name=a\\", "invalid escape sequence"),
    ],
)
def test_invalid_field_selectors_fail_with_the_servers_message(selector, message):
    with pytest.raises(SelectorError) as raised:
        parse_field_selector(selector)
    assert message in str(raised.value)


def test_unsupported_field_labels_are_refused_per_kind():
    pods = supported_field_labels("", "Pod")
    parse_field_selector("spec.nodeName=n,status.phase=Running").require_supported(pods)
    with pytest.raises(SelectorError, match="field label not supported: spec.containers"):
        parse_field_selector("spec.containers=x").require_supported(pods)
    # Field selectors are not whitespace tolerant: the field is "metadata.name ".
    with pytest.raises(SelectorError, match="field label not supported: metadata.name $"):
        parse_field_selector("metadata.name = x").require_supported(pods)
    events = supported_field_labels("", "Event")
    parse_field_selector("involvedObject.uid=1,reason=x,type=Warning,source=s").require_supported(events)


def test_custom_resources_select_on_name_and_namespace_only():
    assert supported_field_labels("jobset.x-k8s.io", "JobSet") == {"metadata.name", "metadata.namespace"}
    assert supported_field_labels("kueue.x-k8s.io", "ClusterQueue", namespaced=False) == {"metadata.name"}
    assert "status.successful" in supported_field_labels("batch", "Job")
    with pytest.raises(SelectorError, match="field label not supported: spec.suspend"):
        jobset_fields = supported_field_labels("jobset.x-k8s.io", "JobSet")
        parse_field_selector("spec.suspend=true").require_supported(jobset_fields)

"""Bad input, generated: every operator and sensor either renders what the API server accepts, or
refuses with an ``InvalidWorkloadSpec`` (a ``ValueError``) naming a parameter that was given a bad
value. Never another exception, never a network call.

Each property starts from a valid parameter set and replaces any subset of the parameters with
values drawn from a pool of near-valid and hostile values: unicode and control characters,
10 000-character strings, negative / huge / bool / float / string numbers, Jinja-looking text,
odd env keys, image references, gs:// paths. Rendered custom resources are checked against the
published CRD schemas strictly (unknown fields are errors; ``int32``/``int64`` formats are range
checked, as the API server's decoder does); batch Jobs and Services get structural checks.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import shlex
import socket
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pathways_airflow_testing.crds import load_crds, strict_schema
from pathways_airflow.hooks.pathways import object_path
from pathways_airflow.operators import (
    BenchmarkRegressionOperator,
    CheckpointConversionOperator,
    DeletePathwaysJobOperator,
    DeployInferenceServerOperator,
    InferenceBenchmarkOperator,
    PathwaysJobOperator,
    TeardownInferenceServerOperator,
)
from pathways_airflow.sensors import CheckpointSensor, PathwaysJobSensor, TpuSliceReadinessSensor
from pathways_airflow.spec.errors import InvalidWorkloadSpec
from pathways_airflow.spec.benchmark import benchmark_script
from pathways_airflow.spec.workload import optional_text
from tests.support.crds import crd_dir

SETTINGS = settings(
    max_examples=150,
    # CI replays the same examples every run; local runs explore new ones.
    derandomize=bool(os.environ.get("CI")),
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# --- no network ------------------------------------------------------------------------------------

_ATTEMPTS: list[Any] = []
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _refuse(self: socket.socket, address: Any) -> Any:
    _ATTEMPTS.append(address)
    raise ConnectionRefusedError(f"the property tests allow no network call (tried {address!r})")


@contextmanager
def no_network() -> Iterator[None]:
    """Any socket connection attempt is recorded and refused; the test fails if one was tried.

    Recorded as well as refused: code that swallows the refusal still fails the property.
    """
    _ATTEMPTS.clear()
    socket.socket.connect, socket.socket.connect_ex = _refuse, _refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex = _real_connect, _real_connect_ex  # type: ignore[method-assign]
    assert not _ATTEMPTS, f"a network call was attempted: {_ATTEMPTS}"


class RecordingHook:
    """Stands in for ``PathwaysHook`` where an operator must not reach a cluster: records calls.

    Object reads and deletes first build their URL as the real hook does (``object_path``, which
    refuses names such as ``..``), so a refusal there counts as the hook's, before any request.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if name in ("get", "delete"):
                object_path(*args[:3])
            self.calls.append((name, args))
            return [] if name in ("list", "list_nodes", "task_workloads") else None

        return call


# --- hostile values ---------------------------------------------------------------------------------

SPECIAL_TEXT = [
    "", " ", "\t", "\n", "\x00", "\x1b[31m", "\u200b", "é", "名前", "ß", "İ", "\U0001f600", "²", "١٢", "𝟙",
    "-1", "0", "1e400", "nan", "inf", "-inf", "None", "null", "true", "False", "0x10", " 7 ", "3.0",
    "{{ ds }}", "{{ ti.xcom_pull('x') }}", "{% for x in y %}", "{{", "}}",
    "$(rm -rf /)", "`id`", "'; echo pwned; '", '"', "'", "\\", "a b", "a;b", "a&&b", "|cat", "*", "?", "[a]",
    "gs://", "gs://b", "gs://bucket", "gs://bucket/", "gs://bucket/path", "gs://Bucket/x", "gs://bucket/../x",
    "gs://bucket/a b", "gs://bucket/*", "s3://bucket/x", "/abs/path", "relative/path", ".", "..", "../x", "/",
    "2x4", "4x4", "2x2x1", "0x0", "2x", "x", "2X4", "v5e", "v6e", "tpu7x", "ct5lp-hightpu-4t",
    "python:3.11", "us-docker.pkg.dev/p/r/i@sha256:" + "a" * 64, "image with space", "UPPER", "a" * 64,
    "a" * 253, "a" * 254, "x" * 10_000, "\u00e9" * 5_000, "k=v", "model_name=x", "--server=x",
]
TEXT = st.one_of(
    st.sampled_from(SPECIAL_TEXT),
    st.text(max_size=24),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=70),
    st.text(min_size=1, max_size=4).map(lambda s: s * (10_000 // len(s))),
)
NUMBER = st.one_of(
    st.sampled_from([-(2**63), -1, 0, 1, 2, 3, 42, 999, 1000, 2**31 - 1, 2**31, 2**63, 10**30, 10**400]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(["1", "2", " 3 ", "-1", "0", "1.5", "10**9", "²", "١٢", "99999999999999999999", "1e3"]),
)
SCALAR = st.one_of(st.none(), TEXT, NUMBER, st.binary(max_size=4))
ANY = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.one_of(TEXT, NUMBER), inner, max_size=3)),
    max_leaves=6,
)
ENV_NAME = st.one_of(st.sampled_from(["A", "_X", "a.b", "a-b", "1A", "A B", "", "=", "\n", "PATH", "x" * 300]), TEXT)
ENV_VALUE = st.one_of(
    TEXT,
    NUMBER,
    st.none(),
    st.just({"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}),
    st.just({"valueFrom": "not-a-mapping"}),
    st.just({"valueFrom": {}, "value": "both"}),
)
ENV = st.one_of(
    st.dictionaries(ENV_NAME, ENV_VALUE, max_size=4),
    st.lists(st.one_of(st.fixed_dictionaries({"name": ENV_NAME, "value": ENV_VALUE}), ANY), max_size=3),
    ANY,
)
STRINGS = st.one_of(st.lists(TEXT, max_size=5), TEXT, ANY)
MAPPING = st.one_of(st.dictionaries(TEXT, st.one_of(TEXT, NUMBER), max_size=3), ANY)


def pools(**specific: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    """Per parameter: its own near-valid values, or anything at all."""
    return {name: st.one_of(strategy, ANY) for name, strategy in specific.items()}


def mutations(baseline: Mapping[str, Any], pool: Mapping[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Any subset of the parameters replaced by a drawn value (the rest keep their valid baseline)."""
    return st.fixed_dictionaries({}, optional=dict(pool))


# --- what "accepted" and "refused" must look like --------------------------------------------------


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("int32")
    def int32(value: Any) -> bool:
        return not isinstance(value, int) or isinstance(value, bool) or -(2**31) <= value < 2**31

    @checker.checks("int64")
    def int64(value: Any) -> bool:
        return not isinstance(value, int) or isinstance(value, bool) or -(2**63) <= value < 2**63

    return checker


_CRDS = crd_dir()
_VALIDATORS: dict[tuple[str, str], jsonschema.Draft202012Validator] = {}
if _CRDS is not None:
    for key, kind in load_crds([_CRDS]).items():
        _VALIDATORS[key] = jsonschema.Draft202012Validator(strict_schema(kind.schema), format_checker=_format_checker())

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*\Z")


def _qualified_name_ok(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    return bool(_LABEL_NAME.match(name)) and (not prefix or (len(prefix) <= 253 and bool(_DNS1123_SUBDOMAIN.match(prefix))))


def check_metadata(manifest: Mapping[str, Any]) -> None:
    meta = manifest["metadata"]
    assert isinstance(meta["name"], str) and len(meta["name"]) <= 63 and _DNS1123_LABEL.match(meta["name"]), meta["name"]
    assert isinstance(meta["namespace"], str) and _DNS1123_LABEL.match(meta["namespace"]) and len(meta["namespace"]) <= 63
    for key, value in (meta.get("labels") or {}).items():
        assert _qualified_name_ok(key) and isinstance(value, str) and _LABEL_VALUE.match(value), (key, value)
    annotations = meta.get("annotations") or {}
    for key, value in annotations.items():
        assert _qualified_name_ok(key) and isinstance(value, str), (key, value)
    assert sum(len(k) + len(v) for k, v in annotations.items()) <= 256 * 1024


def _pod_specs(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        if isinstance(node.get("containers"), list):
            yield node
        for value in node.values():
            yield from _pod_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _pod_specs(value)


def check_pod_specs(manifest: Mapping[str, Any]) -> None:
    """What the API server checks of every container the manifest will make."""
    for pod in _pod_specs(manifest):
        for container in [*pod["containers"], *(pod.get("initContainers") or [])]:
            assert isinstance(container["name"], str) and _DNS1123_LABEL.match(container["name"])
            assert isinstance(container["image"], str) and container["image"].strip() == container["image"] != ""
            for field in ("command", "args"):
                words = container.get(field, [])
                assert isinstance(words, list) and all(isinstance(w, str) and "\x00" not in w for w in words), words
            for var in container.get("env") or []:
                assert isinstance(var["name"], str) and _ENV_NAME.match(var["name"]), var
                assert ("value" in var) != ("valueFrom" in var), var
                assert "value" not in var or (isinstance(var["value"], str) and "\x00" not in var["value"]), var
                assert "valueFrom" not in var or isinstance(var["valueFrom"], Mapping), var


def check_accepted(manifest: Mapping[str, Any]) -> None:
    """A manifest the API server would store as it is (no error, nothing pruned)."""
    json.dumps(manifest, allow_nan=False)  # plain JSON: no NaN, no infinities, no odd types
    check_metadata(manifest)
    check_pod_specs(manifest)
    key = (manifest["apiVersion"], manifest["kind"])
    if key in _VALIDATORS:
        errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in _VALIDATORS[key].iter_errors(dict(manifest))]
        assert not errors, errors[:5]
    elif key == ("batch/v1", "Job"):
        spec = manifest["spec"]
        assert isinstance(spec["backoffLimit"], int) and 0 <= spec["backoffLimit"] < 2**31
        deadline = spec.get("activeDeadlineSeconds")
        assert deadline is None or (isinstance(deadline, int) and 0 < deadline < 2**63)
        assert spec["template"]["spec"]["restartPolicy"] in ("Never", "OnFailure")
    elif key == ("v1", "Service"):
        spec = manifest["spec"]
        assert all(isinstance(p["port"], int) and 0 < p["port"] < 65536 for p in spec["ports"])
        assert all(isinstance(v, str) and _LABEL_VALUE.match(v) for v in spec["selector"].values())
    else:  # pragma: no cover - a kind the provider does not render
        raise AssertionError(f"unexpected kind {key}")


def root_field(field: str) -> str:
    """``env.FOO`` / ``custom_components[0].image`` / ``thresholds['x']`` → the parameter's name."""
    return re.split(r"[.\[]", field, maxsplit=1)[0]


RELATED = (
    # Parameters judged together: a changed one may make a problem of an unchanged one.
    {"tpu", "machine_type", "topology"},
    {"num_slices", "elastic_slices", "max_slice_restarts"},
    {"image", "command", "arguments", "env"},
    {"checkpoint", "checkpoint_dir", "step", "output_dir", "run_name"},
    {"dataset", "dataset_path"},
    {"metrics", "watched_metrics", "thresholds"},
    {"window", "min_runs", "keep"},
    {"image", "benchmark_image"},
    {"container_resources", "resources"},
    {"deploy_task_id", "server"},
)


def _with_related(changed: set[str]) -> set[str]:
    widened = set(changed)
    for group in RELATED:
        if group & changed:
            widened |= group
    return widened


def check_refused(error: BaseException, changed: set[str], parameters: set[str]) -> None:
    """Refusal done right: an InvalidWorkloadSpec naming parameters, at least one of them changed."""
    assert isinstance(error, InvalidWorkloadSpec), f"{type(error).__name__} escaped: {error!r}"
    changed = _with_related(changed)
    roots = {root_field(p.field) for p in error.problems}
    unknown = roots - parameters
    assert not unknown, f"problems name {sorted(unknown)}, which are not parameters: {error}"
    mentioned = {name for name in changed if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", str(error))}
    assert roots & changed or mentioned, f"the refusal names {sorted(roots)}, none of which was changed ({sorted(changed)}): {error}"
    for problem in error.problems:
        assert problem.field in str(error)


def run_property(
    make: Callable[[dict[str, Any]], Any],
    render: Callable[[Any], list[Mapping[str, Any]]],
    baseline: Mapping[str, Any],
    changes: Mapping[str, Any],
    parameters: set[str],
) -> list[Mapping[str, Any]] | None:
    """Build with the changes, render; either every manifest is accepted or the refusal is right."""
    params = {**baseline, **changes}
    changed = {k for k, v in changes.items() if not _same(v, baseline.get(k, _MISSING))}
    with no_network():
        try:
            operator = make(params)
            manifests = render(operator)
        except Exception as error:  # noqa: BLE001 - the property is about which exception
            check_refused(error, changed, parameters)
            return None
    for manifest in manifests:
        check_accepted(manifest)
    return manifests


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001
        return False


needs_crds = pytest.mark.skipif(_CRDS is None, reason="CRD schemas not found (set PATHWAYS_AIRFLOW_CRDS)")

# --- PathwaysJobOperator ---------------------------------------------------------------------------

WORKLOAD_BASELINE = dict(
    task_id="train",
    tpu="v5e",
    topology="2x4",
    num_slices=2,
    pathways_dir="gs://my-bucket/pathways",
    image="us-docker.pkg.dev/p/maxtext:latest",
    command=["python3", "-m", "MaxText.train"],
    env={"A": "b", "TOKEN": {"valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}},
    kubernetes_conn_id="kubernetes_default",
)
WORKLOAD_POOL = pools(
    topology=st.sampled_from(["2x2", "2x4", "4x4", "8x8", "2x2x1", "2x2x2", "4x4x4", "3x3", "1x1", " 2x4 ", "2x4\n"]),
    tpu=st.sampled_from(["v4", "v5e", "v5p", "v6e", "tpu7x", "V5E", "v7", None]),
    machine_type=st.sampled_from(["ct5lp-hightpu-4t", "ct6e-standard-4t", "ct5p-hightpu-4t", "ct4p-hightpu-4t", "n2-standard-8", None]),
    num_slices=NUMBER,
    pathways_dir=TEXT,
    image=st.one_of(st.none(), TEXT),
    command=STRINGS,
    arguments=STRINGS,
    env=ENV,
    container_resources=st.one_of(
        st.just({"limits": {"cpu": "1", "memory": "1Gi"}}), st.just({"requests": {"cpu": True}}), st.just({"other": {}}), MAPPING
    ),
    container_name=st.one_of(st.sampled_from(["main", "pathways-rm", "Main", "a" * 64]), TEXT),
    image_pull_policy=st.sampled_from(["Always", "IfNotPresent", "Never", "always", None]),
    deployment_mode=st.sampled_from(["default", "colocate_head_with_workers", "colocate"]),
    max_restarts=NUMBER,
    max_slice_restarts=st.one_of(st.none(), NUMBER),
    elastic_slices=st.one_of(st.none(), NUMBER),
    pathways_version=st.one_of(st.none(), TEXT, st.just("jax-0.5.3")),
    custom_components=st.one_of(
        st.none(),
        st.lists(
            st.fixed_dictionaries(
                {"component_type": st.sampled_from(["pathways_server", "worker", "proxy_server", "colocated_python_sidecar", "x"])},
                optional={"image": st.one_of(TEXT, st.none()), "flags": STRINGS, "env": ENV, "extra": ANY},
            ),
            max_size=5,
        ),
    ),
    node_selector=st.one_of(st.none(), MAPPING),
    reservation=st.one_of(st.none(), TEXT),
    spot=st.one_of(st.booleans(), TEXT),
    pod_priority_class_name=st.one_of(st.none(), TEXT),
    termination_grace_period_seconds=st.one_of(st.none(), NUMBER),
    service_account_name=st.one_of(st.none(), TEXT),
    enable_metrics_collection=st.one_of(st.none(), st.booleans(), TEXT),
    queue_name=st.one_of(st.none(), TEXT),
    priority_class=st.one_of(st.none(), TEXT),
    labels=st.one_of(st.none(), MAPPING),
    annotations=st.one_of(st.none(), MAPPING),
    namespace=TEXT,
    name_prefix=st.one_of(st.none(), TEXT),
    checkpoint_dir=st.one_of(st.none(), TEXT),
    max_disruptions=NUMBER,
)
WORKLOAD_POOL["system_exit_codes"] = st.one_of(
    st.none(), NUMBER, TEXT, st.lists(st.one_of(NUMBER, TEXT), max_size=3)
)
WORKLOAD_PARAMETERS = set(WORKLOAD_POOL) | {"backend"}


@needs_crds
@pytest.mark.parametrize("backend", ["pathwaysjob", "jobset"])
@SETTINGS
@given(changes=mutations(WORKLOAD_BASELINE, WORKLOAD_POOL))
def test_pathways_job_operator_renders_a_valid_manifest_or_names_the_bad_parameter(backend, changes):
    baseline = {**WORKLOAD_BASELINE, "backend": backend}
    manifests = run_property(
        lambda p: PathwaysJobOperator(**p),
        lambda op: [op.render_manifest()],
        baseline,
        changes,
        WORKLOAD_PARAMETERS,
    )
    if manifests:
        [manifest] = manifests
        assert manifest["kind"] == ("PathwaysJob" if backend == "pathwaysjob" else "JobSet")


def test_system_exit_codes_that_is_not_a_list_is_refused_naming_it():
    with pytest.raises(InvalidWorkloadSpec, match="system_exit_codes"):
        PathwaysJobOperator(**{**WORKLOAD_BASELINE, "system_exit_codes": 3})


def test_the_baselines_are_valid():
    """The properties mutate from a valid starting point; a refusal must name a mutated parameter."""
    with no_network():
        PathwaysJobOperator(**WORKLOAD_BASELINE).render_manifest()
        CheckpointConversionOperator(**CONVERSION_BASELINE).render_manifest()
        InferenceBenchmarkOperator(**BENCHMARK_BASELINE).render_manifests()
        BenchmarkRegressionOperator(**REGRESSION_BASELINE).check()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("spot", "False"),  # what a templated bool renders to: must not select Spot nodes
        ("spot", "false"),
        ("enable_metrics_collection", "False"),
    ],
)
def test_templated_booleans_mean_what_they_say(field, value):
    manifest = PathwaysJobOperator(**{**WORKLOAD_BASELINE, field: value}).render_manifest()
    text = json.dumps(manifest)
    assert "cloud.google.com/gke-spot" not in text
    assert manifest["spec"]["controller"].get("enableMetricsCollection") in (None, False)


# --- CheckpointConversionOperator ------------------------------------------------------------------

CONVERSION_BASELINE = dict(
    task_id="convert",
    checkpoint={"step": 100, "uri": "gs://my-bucket/run/checkpoints/100"},
    output_dir="gs://my-bucket/serving",
    image="maxtext:latest",
)
CONVERSION_POOL = pools(
    checkpoint=st.one_of(
        st.none(),
        st.fixed_dictionaries({"step": NUMBER, "uri": TEXT}),
        st.just("{'step': 5, 'uri': 'gs://b-1/c/5'}"),
        st.just('{"step": 5, "uri": "gs://b-1/c/5"}'),
        st.just("[" * 50_000),
        st.just("{" * 50_000),
        st.just("(" * 50_000),
    ),
    checkpoint_dir=st.one_of(st.none(), TEXT),
    step=st.one_of(st.none(), NUMBER),
    output_dir=TEXT,
    run_name=st.one_of(st.none(), TEXT),
    quantization=st.one_of(st.none(), st.sampled_from(["int8", "int4", "None", ""]), TEXT),
    force_unroll=st.one_of(st.booleans(), TEXT),
    image=TEXT,
    command=st.one_of(st.none(), STRINGS),
    arguments=st.one_of(st.none(), STRINGS),
    extra_arguments=st.one_of(st.none(), STRINGS),
    env=ENV,
    container_resources=st.one_of(st.none(), MAPPING),
    node_selector=st.one_of(st.none(), MAPPING),
    service_account_name=st.one_of(st.none(), TEXT),
    namespace=TEXT,
    poll_interval=NUMBER,
)
CONVERSION_PARAMETERS = set(CONVERSION_POOL)


@SETTINGS
@given(changes=mutations(CONVERSION_BASELINE, CONVERSION_POOL))
def test_conversion_operator_renders_a_valid_job_or_names_the_bad_parameter(changes):
    manifests = run_property(
        lambda p: CheckpointConversionOperator(**p),
        lambda op: [op.render_manifest()],
        CONVERSION_BASELINE,
        changes,
        CONVERSION_PARAMETERS,
    )
    if manifests and "command" not in changes and "arguments" not in changes:
        container = manifests[0]["spec"]["template"]["spec"]["containers"][0]
        assert container["command"][:3] == ["python3", "-m", "maxtext.utils.generate_param_only_checkpoint"]


# --- InferenceBenchmarkOperator, Deploy, Teardown --------------------------------------------------

SERVER_BASELINE = dict(
    engine="jetstream",
    checkpoint={"uri": "gs://my-bucket/serving/checkpoints/0", "items_uri": "gs://my-bucket/serving/checkpoints/0/items"},
    model_name="llama2-7b",
    tpu="v6e",
    topology="4x4",
    pathways_dir="gs://my-bucket/pathways",
)
SERVER_POOL = pools(
    engine=st.sampled_from(["vllm", "jetstream", "tgi", None]),
    checkpoint=st.one_of(st.none(), TEXT, st.fixed_dictionaries({}, optional={"uri": TEXT, "items_uri": TEXT})),
    model_name=TEXT,
    hf_model=st.one_of(st.none(), st.just("Qwen/Qwen3-30B-A3B"), TEXT),
    pathways=st.one_of(st.booleans(), TEXT),
    topology=st.sampled_from(["2x2", "2x4", "4x4", "3x3", "2x2x1"]),
    pathways_dir=TEXT,
    tpu=st.sampled_from(["v5e", "v6e", "v5p", "bad", None]),
    machine_type=st.one_of(st.none(), st.sampled_from(["ct6e-standard-4t", "nope"])),
    image=TEXT,
    http_image=TEXT,
    pathways_version=TEXT,
    config=TEXT,
    server_args=st.one_of(st.none(), STRINGS),
    env=ENV,
    image_pull_policy=st.sampled_from(["Always", "IfNotPresent", "Never", "sometimes"]),
    node_selector=st.one_of(st.none(), MAPPING),
    service_account_name=st.one_of(st.none(), TEXT),
    startup_timeout=NUMBER,
    namespace=TEXT,
    name_prefix=st.one_of(st.none(), TEXT),
    poll_interval=NUMBER,
)
BENCHMARK_BASELINE = dict(
    task_id="bench",
    **SERVER_BASELINE,
    num_prompts=100,
    request_rate="inf",
    max_output_length=64,
    dataset="test",
    results_uri="gs://my-bucket/results/",
)
BENCHMARK_POOL = {
    **SERVER_POOL,
    **pools(
        num_prompts=NUMBER,
        request_rate=NUMBER,
        max_output_length=NUMBER,
        dataset=st.sampled_from(["test", "random", "sharegpt", "mmlu", "nope"]),
        max_concurrency=st.one_of(st.none(), NUMBER),
        results_uri=TEXT,
        dataset_path=st.one_of(st.none(), TEXT),
        tokenizer=st.one_of(st.none(), TEXT),
        benchmark_args=st.one_of(st.none(), STRINGS),
        benchmark_image=st.one_of(st.none(), TEXT),
        benchmark_script=TEXT,
        benchmark_env=ENV,
        benchmark_timeout=NUMBER,
        deferrable=st.one_of(st.booleans(), TEXT),
    ),
}
BENCHMARK_PARAMETERS = set(BENCHMARK_POOL)


def assert_script_round_trips(operator: InferenceBenchmarkOperator, job: Mapping[str, Any]) -> None:
    """Every user word reaches ``bash -c`` as exactly one shell word."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["bash", "-c"] and len(container["args"]) == 1
    words = shlex.split(container["args"][0])
    names = operator.names()
    argv = operator.benchmark().arguments(names.service)
    assert words[: len(argv)] == argv
    assert words[len(argv) :] == ["&&", "gsutil", "cp", "*.json", operator.result_uri(names)]


@needs_crds
@SETTINGS
@given(changes=mutations(BENCHMARK_BASELINE, BENCHMARK_POOL))
def test_inference_benchmark_renders_valid_objects_or_names_the_bad_parameter(changes):
    holder: dict[str, Any] = {}

    def make(params: dict[str, Any]) -> InferenceBenchmarkOperator:
        holder["op"] = InferenceBenchmarkOperator(**params)
        return holder["op"]

    manifests = run_property(make, lambda op: op.render_manifests(), BENCHMARK_BASELINE, changes, BENCHMARK_PARAMETERS)
    if manifests:
        assert [m["kind"] for m in manifests] == ["LeaderWorkerSet", "Service", "Job"]
        assert_script_round_trips(holder["op"], manifests[2])


@needs_crds
@SETTINGS
@given(changes=mutations(SERVER_BASELINE, SERVER_POOL))
def test_deploy_inference_server_renders_valid_objects_or_names_the_bad_parameter(changes):
    run_property(
        lambda p: DeployInferenceServerOperator(task_id="deploy", **p),
        lambda op: op.server_manifests(),
        SERVER_BASELINE,
        changes,
        set(SERVER_POOL),
    )


_WORDS = st.one_of(TEXT, st.text(alphabet=" \t\n'\"$`;&|<>(){}[]*?!#~\\", max_size=12), st.text(max_size=40))


@SETTINGS
@given(
    args=st.lists(_WORDS, max_size=4),
    dataset_path=st.one_of(st.none(), _WORDS),
    tokenizer=st.one_of(st.none(), _WORDS),
    script=_WORDS,
)
def test_user_words_reach_the_benchmark_shell_as_single_words_or_are_refused(args, dataset_path, tokenizer, script):
    """Quotes, ``$()``, backticks, ``;``, newlines: each user value stays one argument, or is refused."""
    params = {
        **BENCHMARK_BASELINE,
        "benchmark_args": args,
        "dataset": "sharegpt",
        "dataset_path": dataset_path,
        "tokenizer": tokenizer,
        "benchmark_script": script,
    }
    with no_network():
        try:
            operator = InferenceBenchmarkOperator(**params)
            job = operator.render_manifests()[2]
        except Exception as error:  # noqa: BLE001
            check_refused(error, {"benchmark_args", "dataset_path", "tokenizer", "benchmark_script"}, BENCHMARK_PARAMETERS)
            return
    assert_script_round_trips(operator, job)
    words = shlex.split(job["spec"]["template"]["spec"]["containers"][0]["args"][0])
    for value in args:
        assert value in words
    # Blank or "None" is what a template renders an absent value to: unset (spec.workload.optional_text).
    for value in (dataset_path, tokenizer, script):
        if optional_text(value) is not None:
            assert value in words
    assert "\x00" not in job["spec"]["template"]["spec"]["containers"][0]["args"][0]


@SETTINGS
@given(result_uri=TEXT)
def test_the_result_uri_reaches_the_shell_as_one_word_or_is_refused(result_uri):
    operator = InferenceBenchmarkOperator(**BENCHMARK_BASELINE)
    try:
        script = benchmark_script(operator.benchmark(), server="svc", result_uri=result_uri)
    except Exception as error:  # noqa: BLE001
        check_refused(error, {"results_uri"}, BENCHMARK_PARAMETERS)
        return
    assert shlex.split(script)[-1] == result_uri


TEARDOWN_POOL = pools(
    deploy_task_id=st.one_of(st.none(), TEXT), server=st.one_of(st.none(), TEXT, MAPPING), namespace=TEXT,
    engine=st.one_of(st.none(), st.sampled_from(["vllm", "jetstream", "tgi", "None"])),
)


@SETTINGS
@given(changes=st.fixed_dictionaries({}, optional=TEARDOWN_POOL))
def test_teardown_refuses_bad_parameters_before_any_api_call(changes):
    baseline = {"deploy_task_id": "deploy", "server": None, "engine": None, "namespace": "default"}
    params = {**baseline, **changes}
    changed = {k for k, v in changes.items() if not _same(v, baseline[k])}
    hook = RecordingHook()
    with no_network():
        try:
            operator = TeardownInferenceServerOperator(task_id="teardown", **params)
            operator.__dict__["hook"] = hook
            operator.validate()
        except Exception as error:  # noqa: BLE001
            check_refused(error, changed, set(TEARDOWN_POOL))
            assert hook.calls == []
            return
    assert hook.calls == []


# --- BenchmarkRegressionOperator -------------------------------------------------------------------

METRICS = {"request_throughput": 10.0, "output_throughput": 100.0, "median_ttft_ms": 5.0, "p99_ttft_ms": 9.0, "median_tpot_ms": 1.0}
REGRESSION_BASELINE = dict(task_id="check", metrics=METRICS, history_uri="gs://my-bucket/bench/history.json")
REGRESSION_POOL = pools(
    metrics=st.one_of(
        st.dictionaries(st.sampled_from(sorted(METRICS)), NUMBER, max_size=5),
        st.just(json.dumps(METRICS)),
        st.just(repr(METRICS)),
        st.just("[" * 50_000),
        st.just("{" * 50_000),
        st.just({**METRICS, "p99_ttft_ms": 10**400}),
        TEXT,
    ),
    history_uri=TEXT,
    report_dir=st.one_of(st.none(), TEXT),
    watched_metrics=st.one_of(STRINGS, st.just("p99_ttft_ms, request_throughput")),
    threshold_pct=NUMBER,
    thresholds=st.one_of(st.none(), st.dictionaries(st.sampled_from(sorted(METRICS)), NUMBER, max_size=2), MAPPING),
    window=NUMBER,
    min_runs=NUMBER,
    keep=NUMBER,
    checkpoint=st.one_of(st.none(), TEXT, MAPPING),
    labels=st.one_of(st.none(), MAPPING, TEXT),
    fail_on_regression=st.one_of(st.booleans(), TEXT),
)


@SETTINGS
@given(changes=mutations(REGRESSION_BASELINE, REGRESSION_POOL))
def test_regression_operator_resolves_its_parameters_or_names_the_bad_one(changes):
    def resolve(op: BenchmarkRegressionOperator) -> list[Mapping[str, Any]]:
        check = op.check()
        assert math.isfinite(check.threshold_pct) and check.window >= 1 and check.keep >= check.window
        assert all(math.isfinite(float(check.metrics[m])) for m in check.watched)
        return []

    run_property(lambda p: BenchmarkRegressionOperator(**p), resolve, REGRESSION_BASELINE, changes, set(REGRESSION_POOL))


# --- DeletePathwaysJobOperator ---------------------------------------------------------------------

DELETE_POOL = pools(name=TEXT, namespace=TEXT, backend=st.sampled_from(["pathwaysjob", "jobset", "lws"]))


@SETTINGS
@given(changes=st.fixed_dictionaries({}, optional=DELETE_POOL))
def test_delete_operator_refuses_bad_parameters_before_any_api_call(changes):
    baseline = {"name": "train-abcdefgh", "namespace": "default", "backend": "pathwaysjob"}
    params = {**baseline, **changes}
    changed = {k for k, v in changes.items() if not _same(v, baseline[k])}
    hook = RecordingHook()
    with no_network():
        operator = DeletePathwaysJobOperator(task_id="delete", wait_seconds=0, **params)
        operator.__dict__["hook"] = hook
        try:
            operator.execute({})
        except Exception as error:  # noqa: BLE001
            check_refused(error, changed, set(DELETE_POOL))
            assert hook.calls == []
            return
    [(verb, (resource, namespace, name))] = hook.calls
    assert verb == "delete"
    # What is deleted is one object: its name is one URL path segment, never ".", ".." or "a/b".
    path = resource.path(namespace, name)
    assert path.rsplit("/", 1)[0] == resource.path(namespace) and name not in (".", "..")


# --- the sensors -----------------------------------------------------------------------------------

CHECKPOINT_SENSOR_POOL = pools(checkpoint_dir=TEXT, min_step=st.one_of(st.none(), NUMBER), newer_than=st.one_of(st.none(), NUMBER))


@SETTINGS
@given(changes=st.fixed_dictionaries({}, optional=CHECKPOINT_SENSOR_POOL))
def test_checkpoint_sensor_accepts_or_names_the_bad_parameter(changes):
    from pathways_airflow.spec.arguments import checkpoint_arguments

    baseline = {"checkpoint_dir": "gs://my-bucket/run/checkpoints", "min_step": None, "newer_than": None}

    def resolve(sensor: CheckpointSensor) -> list[Mapping[str, Any]]:
        directory, min_step, newer_than = checkpoint_arguments(sensor.checkpoint_dir, sensor.min_step, sensor.newer_than)
        assert isinstance(directory, str) and directory.strip() == directory
        assert all(v is None or (isinstance(v, int) and v >= 0) for v in (min_step, newer_than))
        return []

    run_property(lambda p: CheckpointSensor(task_id="ckpt", **p), resolve, baseline, changes, set(CHECKPOINT_SENSOR_POOL))


SLICE_SENSOR_POOL = pools(
    tpu=st.sampled_from(["v5e", "v6e", "v9", None]),
    machine_type=st.one_of(st.none(), st.sampled_from(["ct5lp-hightpu-4t", "nope"])),
    topology=st.sampled_from(["2x4", "4x4", "3x3"]),
    num_slices=NUMBER,
    no_maintenance_within=st.one_of(st.none(), NUMBER, st.just(dt.timedelta(hours=2)), st.just(dt.timedelta(days=-1))),
)


@SETTINGS
@given(changes=st.fixed_dictionaries({}, optional=SLICE_SENSOR_POOL))
def test_slice_readiness_sensor_accepts_or_names_the_bad_parameter(changes):
    baseline = {"tpu": "v5e", "topology": "2x4", "num_slices": 2, "no_maintenance_within": None}

    def resolve(sensor: TpuSliceReadinessSensor) -> list[Mapping[str, Any]]:
        request = sensor.slice_request()
        assert 1 <= request.num_slices <= 999
        window = request.no_maintenance_within
        assert window is None or (math.isfinite(window) and window >= 0)
        return []

    run_property(lambda p: TpuSliceReadinessSensor(task_id="slices", **p), resolve, baseline, changes, set(SLICE_SENSOR_POOL))


WORKLOAD_SENSOR_POOL = pools(
    name=TEXT, namespace=TEXT, backend=st.sampled_from(["pathwaysjob", "jobset", "x"]), phase=st.sampled_from(["RUNNING", "running", "SUCCEEDED", "FAILED"])
)


@SETTINGS
@given(changes=st.fixed_dictionaries({}, optional=WORKLOAD_SENSOR_POOL))
def test_pathways_job_sensor_refuses_bad_parameters_before_any_api_call(changes):
    baseline = {"name": "train-abcdefgh", "namespace": "default", "backend": "pathwaysjob", "phase": "RUNNING"}
    params = {**baseline, **changes}
    changed = {k for k, v in changes.items() if not _same(v, baseline[k])}
    hook = RecordingHook()
    with no_network():
        try:
            sensor = PathwaysJobSensor(task_id="watch", **params)
            sensor.__dict__["hook"] = hook
            sensor.poke({})
        except Exception as error:  # noqa: BLE001
            if hook.calls:  # the arguments were accepted: what failed is reading the (absent) workload
                assert not isinstance(error, ValueError), error
            else:
                check_refused(error, changed, set(WORKLOAD_SENSOR_POOL))
            return
    [(verb, (backend, name, namespace))] = hook.calls
    assert verb == "observe" and _DNS1123_LABEL.match(name) and len(name) <= 63


# --- one regression per bug found, so they stay fixed ----------------------------------------------


def _hook_call(call: Callable[[Any], Any]) -> Any:
    from pathways_airflow.hooks.pathways import PathwaysHook

    return call(PathwaysHook(kubernetes_conn_id="no-such-connection"))


DELETE_RESOURCE = __import__("pathways_airflow.resources", fromlist=["PATHWAYSJOB"]).PATHWAYSJOB


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: PathwaysJobOperator(**{**WORKLOAD_BASELINE, "max_restarts": 2**31}), "max_restarts"),
        (lambda: PathwaysJobOperator(**{**WORKLOAD_BASELINE, "container_resources": {"limits": []}}), "container_resources"),
        (lambda: CheckpointConversionOperator(**{**CONVERSION_BASELINE, "container_resources": {"limits": {"cpu": "lots"}}}), "container_resources"),
        (lambda: PathwaysJobOperator(**{**WORKLOAD_BASELINE, "command": ["python3", "a\x00b"]}), "command"),
        (lambda: CheckpointConversionOperator(**{**CONVERSION_BASELINE, "checkpoint": None, "checkpoint_dir": "gs://b-1/c", "step": "²"}), "step"),
        (lambda: CheckpointConversionOperator(**{**CONVERSION_BASELINE, "checkpoint": "[" * 50_000}), "checkpoint"),
        (lambda: InferenceBenchmarkOperator(**{**BENCHMARK_BASELINE, "startup_timeout": 10**12}), "startup_timeout"),
        (lambda: InferenceBenchmarkOperator(**{**BENCHMARK_BASELINE, "benchmark_args": ["--x", "a\x00"]}), "benchmark_args"),
        (lambda: BenchmarkRegressionOperator(**{**REGRESSION_BASELINE, "threshold_pct": 10**400}), "threshold_pct"),
        (lambda: BenchmarkRegressionOperator(**{**REGRESSION_BASELINE, "window": "²"}), "window"),
        (lambda: BenchmarkRegressionOperator(**{**REGRESSION_BASELINE, "metrics": {**METRICS, "p99_ttft_ms": 10**400}}), "metrics"),
        (lambda: CheckpointSensor(task_id="c", checkpoint_dir="gs://b-1/c", min_step="²"), "min_step"),
        (lambda: TpuSliceReadinessSensor(task_id="s", tpu="v5e", topology="2x4", num_slices="²"), "num_slices"),
        (lambda: TpuSliceReadinessSensor(task_id="s", tpu="v5e", topology="2x4", no_maintenance_within=10**400), "no_maintenance_within"),
        (lambda: PathwaysJobSensor(task_id="w", name=".."), "name"),
        (lambda: _hook_call(lambda hook: hook.delete(DELETE_RESOURCE, "default", "..")), "name"),
        (lambda: _hook_call(lambda hook: hook.get(DELETE_RESOURCE, "default", ".")), "name"),
        (lambda: _hook_call(lambda hook: hook.delete(DELETE_RESOURCE, "default", "")), "name"),
        (lambda: TeardownInferenceServerOperator(task_id="t", deploy_task_id="deploy", server={"nam": "x"}), "server"),
    ],
)
def test_found_bugs_are_refused_with_the_field_named(make, field):
    with pytest.raises(InvalidWorkloadSpec) as refused:
        with no_network():
            make()
    assert field in refused.value.fields or any(root_field(f) == field for f in refused.value.fields), refused.value

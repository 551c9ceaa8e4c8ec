"""What to serve for an inference benchmark: one LeaderWorkerSet and its Service, whatever the
engine, and the names of everything a task creates. Pure: no I/O, no Airflow. What runs in the
server pod is the engine's (:mod:`pathways_airflow.spec.jetstream`,
:mod:`pathways_airflow.spec.vllm`); the benchmark Job and its result are
:mod:`pathways_airflow.spec.benchmark`.

The layout on Pathways is the one in Google's multi-host JetStream-on-Pathways manifests
(``leaderworkerset.x-k8s.io/v1``), which tpu-inference's multi-host GKE example shares: one group
per slice, whose leader pod runs ``pathways-proxy`` (38681), ``pathways-rm`` (38677) and the
engine's server, and whose ``VMs per slice`` worker pods run the Pathways worker on the TPUs.
``size`` is therefore ``VMs + 1``. The leader does not request TPUs but sits on the slice's node
pool (node selector and toleration), and the ``exclusive-topology`` annotation keeps one group per
node pool. An engine that runs without Pathways (vLLM) can serve a one-VM slice from a single pod
(``size`` 1) that holds the chips itself.

Everything a user gives is checked before anything is rendered (:func:`build_server`,
:func:`pathways_airflow.spec.benchmark.build_benchmark`), with the field, the value and the valid
choices, so a bad DAG fails at parse time rather than after a TPU slice has been held for a
20-minute checkpoint restore.

Names (:func:`serving_names`). The LeaderWorkerSet's name ``N`` is the provider's workload name
(``<slug>-<hash>``, at most 22 characters, deterministic per task instance). Everything derived
from it must stay within the Kubernetes limits:

==========================================================  ================  =====
derived from the LeaderWorkerSet name N                     length            limit
==========================================================  ================  =====
LeaderWorkerSet, leader StatefulSet, headless Service       N                 63
Service ``N-svc`` (DNS-1035 label)                          N + 4             63
worker StatefulSet ``N-<group>`` (one group: ``N-0``)       N + 2             63
its pods' ``controller-revision-hash`` ``N-0-<10 chars>``   N + 13            63
worker pod hostnames ``N-0-<worker>`` (≤ 4 digits)          N + 7             63
benchmark Job ``N-bench`` and its pods ``N-bench-<5>``      N + 12            63
==========================================================  ================  =====

The StatefulSet revision label binds: N ≤ 50 (:data:`MAX_SERVING_NAME`). Workload names are far
shorter, so a prefix chosen for training fits here too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pathways_airflow import well_known
from pathways_airflow.checkpoints import ITEMS_DIR, join
from pathways_airflow.spec.arguments import looks_templated, rendered_flag
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem, raise_if_any
from pathways_airflow.spec.names import TaskIdentity, is_dns_label
from pathways_airflow.spec.render import IMAGE_REPOSITORY
from pathways_airflow.spec.tpu import TPU_RESOURCE, SliceShape, resolve_machine_type, slice_shape
from pathways_airflow.spec.workload import (
    MAX_INT32,
    GCS_PATH,
    IMAGE_REFERENCE,
    IMAGE_TAG,
    IMAGE_PULL_POLICIES,
    EnvVar,
    is_dns_subdomain,
    env_vars_from,
    optional_text,
    rendered_literal,
)

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"

PROXY_PORT = 38681
"""The Pathways proxy in the leader pod: what a server's JAX talks to (``grpc://127.0.0.1:38681``)."""
RESOURCE_MANAGER_PORT = 38677
WORKER_PORT = 38679
PATHWAYS_CONTAINERS = ("pathways-proxy", "pathways-rm")

DEFAULT_STARTUP_SECONDS = 1800
"""A 405B model restores in 7–20 minutes; 30 minutes covers it with room for scheduling."""

MAX_SERVING_NAME = 50
"""Longest LeaderWorkerSet name whose derived names fit (see the module docstring)."""
SERVICE_SUFFIX = "-svc"
JOB_SUFFIX = "-bench"

MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}\Z")
_TPU_TOLERATION = {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}


# --- names -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServingNames:
    """The deterministic names of one task's server and benchmark."""

    lws: str
    service: str
    job: str


def serving_names(identity: TaskIdentity, prefix: str | None = None) -> ServingNames:
    """Names from the task instance: every try of a task computes the same ones (adopt, never duplicate)."""
    return names_for(identity.workload_name(0, prefix))


def names_for(lws: str) -> ServingNames:
    """The Service and Job names that go with a LeaderWorkerSet name."""
    if not is_dns_label(lws, MAX_SERVING_NAME):
        raise InvalidWorkloadSpec(
            [
                SpecProblem(
                    "name",
                    lws,
                    f"must be a DNS-1035 label of at most {MAX_SERVING_NAME} characters, so that the "
                    f"worker StatefulSet's revision label '<name>-0-<hash>' fits in 63",
                )
            ]
        )
    return ServingNames(lws, f"{lws}{SERVICE_SUFFIX}", f"{lws}{JOB_SUFFIX}")


# --- inputs ------------------------------------------------------------------------------------


def checkpoint_items_uri(checkpoint: Any) -> str:
    """The ``load_parameters_path`` the server restores (JetStream's, or vLLM's MaxText plugin's),
    from a conversion result or a URI.

    Accepts the ``{"uri", "items_uri"}`` that ``CheckpointConversionOperator`` returns (``uri``
    alone means ``<uri>/items``, Orbax's layout), or a ``gs://`` URI of the ``items`` directory.
    Without ``render_template_as_native_obj`` a templated XCom dict arrives as its Python ``repr``,
    which is read back as the dict.
    """
    field_name = "checkpoint"
    if isinstance(checkpoint, str) and checkpoint.strip().startswith("{"):
        checkpoint = rendered_literal(checkpoint)
    if checkpoint is None or checkpoint == "None":
        raise InvalidWorkloadSpec(
            [
                SpecProblem(
                    field_name,
                    checkpoint,
                    "no checkpoint given (did the upstream conversion return nothing?)",
                )
            ]
        )
    if isinstance(checkpoint, Mapping):
        if isinstance(checkpoint.get("items_uri"), str):
            uri = checkpoint["items_uri"]
        elif isinstance(checkpoint.get("uri"), str):
            uri = join(checkpoint["uri"], ITEMS_DIR)
        else:
            raise InvalidWorkloadSpec(
                [
                    SpecProblem(
                        field_name,
                        dict(checkpoint),
                        "a mapping needs 'items_uri' or 'uri'",
                        ("items_uri", "uri"),
                    )
                ]
            )
    elif isinstance(checkpoint, str):
        uri = checkpoint.strip()
    else:
        raise InvalidWorkloadSpec(
            [
                SpecProblem(
                    field_name,
                    checkpoint,
                    "must be a gs:// URI or the result of CheckpointConversionOperator",
                )
            ]
        )
    if not GCS_PATH.match(uri) or any(c.isspace() for c in uri):
        raise InvalidWorkloadSpec(
            [
                SpecProblem(
                    field_name, uri, "must be a gs://BUCKET/PATH of the serving checkpoint's items directory"
                )
            ]
        )
    return uri.rstrip("/")


# --- the server ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class InferenceServer:
    """A valid server of one engine on one slice; built by :func:`build_server`."""

    engine: Engine
    shape: SliceShape
    image: str
    model_name: str | None = None
    """The MaxText model name (``llama2-70b``) of the checkpoint."""
    load_parameters_path: str | None = None
    """The checkpoint's ``items`` directory; ``None`` when the engine serves ``hf_model``'s own weights."""
    hf_model: str | None = None
    """The Hugging Face model id vLLM serves (architecture and tokenizer)."""
    on_pathways: bool = True
    pathways_dir: str | None = None
    http_image: str | None = None
    pathways_version: str = "latest"
    config: str | None = None
    server_args: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    image_pull_policy: str = "Always"
    startup_seconds: int = DEFAULT_STARTUP_SECONDS
    node_selector: Mapping[str, str] = field(default_factory=dict)
    service_account_name: str | None = None

    @property
    def size(self) -> int:
        """Pods per group: on Pathways the leader plus one worker per TPU VM; else the one server pod."""
        return self.shape.vms + 1 if self.on_pathways else 1


def build_server(
    *,
    engine: Engine,
    checkpoint: Any,
    model_name: Any,
    topology: Any,
    pathways_dir: Any = None,
    tpu: Any = None,
    machine_type: Any = None,
    image: Any = None,
    http_image: Any = None,
    pathways_version: Any = "latest",
    config: Any = None,
    server_args: Any = None,
    hf_model: Any = None,
    pathways: Any = True,
    env: Any = None,
    image_pull_policy: Any = "Always",
    startup_seconds: Any = DEFAULT_STARTUP_SECONDS,
    node_selector: Any = None,
    service_account_name: Any = None,
) -> InferenceServer:
    """Check everything a DAG author wrote and return the server, or raise one error listing every
    problem. What is common to every engine is checked here; the rest by ``engine.check_server``."""
    problems: list[SpecProblem] = []
    model_name, hf_model, image, http_image, config = map(optional_text, (model_name, hf_model, image, http_image, config))
    shape = None
    try:
        shape = slice_shape(resolve_machine_type(machine_type, tpu), topology)
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
    items = None
    if looks_templated(checkpoint):  # known at run time (an upstream task's XCom); that there is one is known now
        items = str(checkpoint)
    elif checkpoint is not None:
        try:
            items = checkpoint_items_uri(checkpoint)
        except InvalidWorkloadSpec as error:
            problems.extend(error.problems)
    if model_name is not None and (not isinstance(model_name, str) or not MODEL_NAME.match(model_name)):
        problems.append(
            SpecProblem("model_name", model_name, "must be a MaxText model name such as 'llama2-70b'")
        )
    on_pathways = _on_pathways(problems, engine, pathways, shape)
    if on_pathways is not False and (not isinstance(pathways_dir, str) or not GCS_PATH.match(pathways_dir)):
        problems.append(
            SpecProblem(
                "pathways_dir", pathways_dir, "must be a gs://BUCKET/PATH for Pathways' scratch files"
            )
        )
    given_image, image = image, engine.default_image if image is None else image
    if not isinstance(image, str) or not IMAGE_REFERENCE.match(image):
        problems.append(SpecProblem("image", image, "must be a non-empty container image reference"))
    if not isinstance(pathways_version, str) or not IMAGE_TAG.match(pathways_version):
        problems.append(
            SpecProblem(
                "pathways_version", pathways_version, "must be an image tag such as 'latest' or 'jax-0.5.3'"
            )
        )
    engine.check_server(
        problems,
        {
            "checkpoint": items,
            "model_name": model_name,
            "hf_model": hf_model,
            "image": given_image,
            "http_image": http_image,
            "config": config,
            "pathways": on_pathways,
            "env": env,
            "server_args": server_args,
        },
    )
    args = engine.server_args(problems, server_args)
    env_vars = env_vars_from(problems, "env", env)
    if image_pull_policy not in IMAGE_PULL_POLICIES:
        problems.append(
            SpecProblem("image_pull_policy", image_pull_policy, "unknown policy", IMAGE_PULL_POLICIES)
        )
    # The startup probe's failureThreshold is startup_timeout / 10 (an int32).
    startup = positive_int(problems, "startup_timeout", startup_seconds, maximum=MAX_INT32)
    selector = _node_selector(problems, node_selector)
    service_account_problems(problems, service_account_name)
    raise_if_any(problems)
    assert shape is not None and startup is not None
    return InferenceServer(
        engine=engine,
        shape=shape,
        image=image,
        model_name=model_name,
        load_parameters_path=items,
        hf_model=hf_model,
        on_pathways=bool(on_pathways),
        pathways_dir=pathways_dir if on_pathways else None,
        http_image=http_image,
        pathways_version=pathways_version,
        config=config,
        server_args=args,
        env=env_vars,
        image_pull_policy=image_pull_policy,
        startup_seconds=startup,
        node_selector=selector,
        service_account_name=service_account_name,
    )


def _on_pathways(problems: list[SpecProblem], engine: Engine, pathways: Any, shape: SliceShape | None) -> bool | None:
    """Whether the server runs on Pathways: always for JetStream; without it, one pod holds the
    chips, so the slice must be one TPU VM."""
    flag = rendered_flag(pathways)
    if flag is None:
        problems.append(SpecProblem("pathways", pathways, "must be True or False", ("True", "False")))
    elif not flag and not engine.runs_without_pathways:
        problems.append(SpecProblem("pathways", pathways, f"engine={engine.name!r} serves only on Pathways"))
    elif not flag and shape is not None and shape.vms != 1:
        problems.append(
            SpecProblem(
                "pathways",
                pathways,
                f"without Pathways one pod serves, so the slice must be one TPU VM; {shape.topology} "
                f"of {shape.machine_type.name} is {shape.vms} VMs",
            )
        )
    return flag


def model_id_problem(problems: list[SpecProblem], name: str, value: Any, what: str) -> None:
    """A problem unless ``value`` can name a model on a command line: a Hugging Face id, a MaxText
    model name or a path, as one word."""
    if not isinstance(value, str) or not value.strip() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        problems.append(SpecProblem(name, value, what))


def service_account_problems(problems: list[SpecProblem], value: Any) -> None:
    if value is not None and not (isinstance(value, str) and is_dns_subdomain(value)):
        problems.append(
            SpecProblem(
                "service_account_name", value, "must be a Kubernetes service account name (DNS subdomain)"
            )
        )


def positive_int(problems: list[SpecProblem], name: str, value: Any, *, maximum: int | None = None) -> int | None:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif (
        isinstance(value, float)
        and value.is_integer()
        or isinstance(value, str)
        and len(value) <= 100
        and re.fullmatch(r"\s*[0-9]+\s*", value)
    ):
        number = int(value)
    if number is None or number < 1 or (maximum is not None and number > maximum):
        bounds = "a positive integer" if maximum is None else f"an integer between 1 and {maximum}"
        problems.append(SpecProblem(name, value, f"must be {bounds}"))
        return None
    return number


def _node_selector(problems: list[SpecProblem], value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        problems.append(SpecProblem("node_selector", value, "must map label names to label values (strings)"))
        return {}
    owned = sorted(set(value) & {well_known.ACCELERATOR, well_known.TOPOLOGY})
    if owned:
        problems.append(SpecProblem("node_selector", owned[0], "is set from tpu/machine_type and topology"))
    return dict(value)


def tpu_pod_spec(server: InferenceServer, containers: list[dict[str, Any]]) -> dict[str, Any]:
    """A pod of the server's group: on the slice's node pool, tolerating its TPU taint."""
    spec: dict[str, Any] = {
        "nodeSelector": {
            **server.node_selector,
            well_known.ACCELERATOR: server.shape.machine_type.accelerator,
            well_known.TOPOLOGY: server.shape.topology,
        },
        "tolerations": [dict(_TPU_TOLERATION)],
        "containers": containers,
    }
    if server.service_account_name:
        spec["serviceAccountName"] = server.service_account_name
    return spec


def _pathways_image(server: InferenceServer, name: str) -> str:
    return f"{IMAGE_REPOSITORY}/{name}:{server.pathways_version}"


def health_probes(server: InferenceServer) -> dict[str, Any]:
    """The server container's probes, all on the engine's health check.

    The startup probe gives the server as long as the operator waits (``startup_seconds``), so the
    kubelet never restarts a restore the operator is still willing to wait for, and the operator
    never waits on a server the kubelet has given up on.
    """

    def probe(period: int, failures: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": server.engine.health_path, "port": server.engine.http_port, "scheme": "HTTP"},
            "periodSeconds": period,
            "failureThreshold": failures,
        }

    return {
        "startupProbe": probe(10, max(1, math.ceil(server.startup_seconds / 10))),
        "livenessProbe": probe(60, 10),
        "readinessProbe": probe(10, 6),
    }


def tpu_limits(server: InferenceServer) -> dict[str, Any]:
    """The chips of one TPU VM: what a pod that drives the TPUs itself requests."""
    return {"limits": {TPU_RESOURCE: str(server.shape.chips_per_vm)}}


def _pathways_containers(server: InferenceServer) -> list[dict[str, Any]]:
    scratch = f"--gcs_scratch_location={server.pathways_dir}"
    return [
        {
            "name": PATHWAYS_CONTAINERS[0],
            "image": _pathways_image(server, "proxy_server"),
            "imagePullPolicy": "Always",
            "args": [
                f"--resource_manager_address={LEADER_ADDRESS}:{RESOURCE_MANAGER_PORT}",
                f"--server_port={PROXY_PORT}",
                scratch,
            ],
            "ports": [{"containerPort": PROXY_PORT}],
        },
        {
            "name": PATHWAYS_CONTAINERS[1],
            "image": _pathways_image(server, "server"),
            "imagePullPolicy": "Always",
            "env": [
                {"name": "HOST_ADDRESS", "value": LEADER_ADDRESS},
                {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
            ],
            "args": [
                f"--server_port={RESOURCE_MANAGER_PORT}",
                scratch,
                "--node_type=resource_manager",
                "--instance_count=1",
                f"--instance_type={server.shape.machine_type.pathways_instance_type}:{server.shape.topology}",
            ],
            "ports": [{"containerPort": RESOURCE_MANAGER_PORT}],
        },
    ]


def _worker_container(server: InferenceServer) -> dict[str, Any]:
    return {
        "name": "worker",
        "image": _pathways_image(server, "server"),
        "imagePullPolicy": "Always",
        "args": [
            f"--server_port={WORKER_PORT}",
            f"--resource_manager_address={LEADER_ADDRESS}:{RESOURCE_MANAGER_PORT}",
            f"--gcs_scratch_location={server.pathways_dir}",
        ],
        "ports": [{"containerPort": WORKER_PORT}],
        "resources": tpu_limits(server),
    }


def object_metadata(
    name: str, namespace: str, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def render_leaderworkerset(
    server: InferenceServer,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The LeaderWorkerSet serving ``server``: one group on one slice, one node pool to itself.

    On Pathways the leader runs the proxy, the resource manager and the engine's containers, and
    the workers hold the chips. Without Pathways the group is one pod, given by ``workerTemplate``
    alone (LWS uses it for the leader when ``leaderTemplate`` is absent), whose server container
    holds the chips. ``labels`` go on the LeaderWorkerSet and on every pod, so a task's pods are
    found by its task-key label as well as by the LWS name.
    """
    names_for(name)
    template_metadata = {"metadata": {"labels": dict(labels)}} if labels else {}
    serving = server.engine.serving_containers(server)
    if server.on_pathways:
        templates = {
            "leaderTemplate": {
                **template_metadata,
                "spec": tpu_pod_spec(server, [*_pathways_containers(server), *serving]),
            },
            "workerTemplate": {**template_metadata, "spec": tpu_pod_spec(server, [_worker_container(server)])},
        }
    else:
        holder = {**serving[0], "resources": tpu_limits(server)}
        templates = {"workerTemplate": {**template_metadata, "spec": tpu_pod_spec(server, [holder, *serving[1:]])}}
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": object_metadata(
            name, namespace, labels, {**(annotations or {}), well_known.LWS_EXCLUSIVE_TOPOLOGY: well_known.NODEPOOL}
        ),
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": server.size, **templates}},
    }


def service_selector(lws_name: str) -> dict[str, str]:
    """The leader pod of the server: LWS labels every pod with its name and worker index (0 = leader)."""
    return {well_known.LWS_NAME: lws_name, well_known.LWS_WORKER_INDEX: "0"}


def render_service(
    *,
    engine: Engine,
    name: str,
    namespace: str,
    lws_name: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The server's Service: the engine's health and serving port, and the port its benchmark talks to.

    Its name differs from the LeaderWorkerSet's: LWS creates a headless Service of that name itself.
    """
    if not is_dns_label(name):
        raise InvalidWorkloadSpec(
            [SpecProblem("service", name, "must be a DNS-1035 label (≤ 63 of [a-z0-9-])")]
        )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(name, namespace, labels, annotations),
        "spec": {
            "selector": service_selector(lws_name),
            "ports": [dict(port) for port in engine.service_ports],
        },
    }


__all__ = [
    "DEFAULT_STARTUP_SECONDS",
    "InferenceServer",
    "ServingNames",
    "build_server",
    "checkpoint_items_uri",
    "health_probes",
    "names_for",
    "render_leaderworkerset",
    "render_service",
    "serving_names",
]

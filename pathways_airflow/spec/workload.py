"""The workload model: everything needed to render a Pathways workload, checked before it exists.

``build_workload`` takes what a DAG author wrote (strings from templates included) and returns an
immutable :class:`Workload`, or raises one :class:`InvalidWorkloadSpec` listing every problem with
the field, the value and the valid choices. Renderers only ever see a valid ``Workload``, so nothing
invalid is ever applied to a cluster: the PathwaysJob CRD checks little (topologies are rejected by
the controller only at run time, after quota may already be held).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pathways_airflow import well_known
from pathways_airflow.checkpoints import Checkpoint
from pathways_airflow.spec.errors import SpecProblem, raise_if_any
from pathways_airflow.spec.names import is_dns_label
from pathways_airflow.spec.tpu import (
    MachineType,
    SliceShape,
    resolve_machine_type,
    slice_shape,
    topology_problem,
)
from pathways_airflow.spec.errors import InvalidWorkloadSpec

COMPONENT_TYPES = ("pathways_server", "worker", "proxy_server", "colocated_python_sidecar")
DEPLOYMENT_MODES = ("default", "colocate_head_with_workers")
IMAGE_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
MAX_CUSTOM_COMPONENTS = 4
MAX_SLICES = 999
"""Child Job names carry the slice index; three digits keep them within the name budget."""
MAX_INT32 = 2**31 - 1
"""Largest value of the API's ``int32`` fields (restart counts, backoff limits): beyond it the
API server refuses the whole object, so such a value is refused here, naming its parameter."""
MAX_INT64 = 2**63 - 1

# Containers the Pathways layout adds next to the user's; the main container may not take their names.
RESERVED_CONTAINER_NAMES = ("pathways-rm", "pathways-proxy", "pathways-worker", "colocated-python-sidecar")

RESERVATION_SELECTOR = "cloud.google.com/reservation-name"
SPOT_SELECTOR = "cloud.google.com/gke-spot"

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
QUANTITY = re.compile(
    r"^[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?\Z"
)
"""A Kubernetes resource quantity (``500m``, ``16Gi``, ``1e3``), as the CRD schemas check it."""
IMAGE_REFERENCE = re.compile(r"^[^\s]+\Z")
IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
GCS_PATH = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/.*)?\Z")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")

EnvVar = Mapping[str, Any]
"""A Kubernetes ``EnvVar``: ``{"name": ..., "value": ...}`` or ``{"name": ..., "valueFrom": ...}``."""


@dataclass(frozen=True)
class CustomComponent:
    """A replacement image, extra flags or extra env for one Pathways component."""

    component_type: str
    image: str | None = None
    flags: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()


@dataclass(frozen=True)
class MainContainer:
    """The user's program: the container that runs on the Pathways head."""

    image: str
    name: str = "main"
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    resources: Mapping[str, Mapping[str, Any]] | None = None
    image_pull_policy: str | None = None


@dataclass(frozen=True)
class Workload:
    """A valid Pathways workload; built by :func:`build_workload`, rendered by ``spec.render``."""

    shape: SliceShape
    num_slices: int
    pathways_dir: str
    main: MainContainer | None
    deployment_mode: str = "default"
    max_restarts: int = 0
    max_slice_restarts: int | None = None
    elastic_slices: int | None = None
    pathways_version: str | None = None
    custom_components: tuple[CustomComponent, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    pod_priority_class_name: str | None = None
    termination_grace_period_seconds: int | None = None
    service_account_name: str | None = None
    enable_metrics_collection: bool | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def machine_type(self) -> MachineType:
        return self.shape.machine_type

    @property
    def queue_name(self) -> str | None:
        return self.labels.get(well_known.QUEUE_NAME)

    @property
    def total_chips(self) -> int:
        return self.shape.chips * self.num_slices

    def component(self, component_type: str) -> CustomComponent | None:
        return next((c for c in self.custom_components if c.component_type == component_type), None)


def build_workload(
    *,
    machine_type: str | None = None,
    tpu: str | None = None,
    topology: str,
    num_slices: int | str = 1,
    pathways_dir: str,
    image: str | None = None,
    command: Sequence[str] | None = None,
    arguments: Sequence[str] | None = None,
    env: Mapping[str, Any] | Sequence[EnvVar] | None = None,
    resources: Mapping[str, Mapping[str, Any]] | None = None,
    container_name: str = "main",
    image_pull_policy: str | None = None,
    deployment_mode: str = "default",
    max_restarts: int | str = 0,
    max_slice_restarts: int | str | None = None,
    elastic_slices: int | str | None = None,
    pathways_version: str | None = None,
    custom_components: Sequence[CustomComponent | Mapping[str, Any]] | None = None,
    node_selector: Mapping[str, str] | None = None,
    reservation: str | None = None,
    spot: bool = False,
    pod_priority_class_name: str | None = None,
    termination_grace_period_seconds: int | str | None = None,
    service_account_name: str | None = None,
    enable_metrics_collection: bool | None = None,
    queue_name: str | None = None,
    priority_class: str | None = None,
    max_exec_time_seconds: int | str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Workload:
    """Check every field and return a :class:`Workload`; raise ``InvalidWorkloadSpec`` otherwise.

    ``image=None`` means a headless workload (no user program; clients connect from outside),
    as a PathwaysJob without ``controller.template``. Integer fields accept integer strings, as
    rendered Jinja templates produce them. ``max_exec_time_seconds`` becomes Kueue's
    max-exec-time label: a limit the cluster enforces even when no Airflow is left to.
    """
    problems: list[SpecProblem] = []

    machine = _collect(problems, lambda: resolve_machine_type(machine_type, tpu))
    shape = None
    if machine is not None:
        problem = topology_problem(machine, topology)
        if problem:
            problems.append(problem)
        else:
            shape = slice_shape(machine, topology)

    slices = checked_integer(problems, "num_slices", num_slices, minimum=1, maximum=MAX_SLICES)
    restarts = checked_integer(problems, "max_restarts", max_restarts, minimum=0, maximum=MAX_INT32)
    slice_restarts = _optional_integer(problems, "max_slice_restarts", max_slice_restarts, minimum=1, maximum=MAX_INT32)
    elastic = _optional_integer(problems, "elastic_slices", elastic_slices, minimum=0, maximum=MAX_SLICES)
    if elastic is not None and slices is not None and elastic >= slices:
        problems.append(
            SpecProblem(
                "elastic_slices",
                elastic_slices,
                f"must be less than num_slices ({slices}): at least one slice must stay",
                tuple(str(i) for i in range(slices)),
            )
        )
    grace = _optional_integer(
        problems, "termination_grace_period_seconds", termination_grace_period_seconds, minimum=0, maximum=MAX_INT64
    )
    if (
        slice_restarts is not None
        and elastic
        and shape is not None
        and slice_restarts * shape.vms > MAX_INT32
    ):
        # The worker Jobs' backoffLimit is VMs per slice x max_slice_restarts (an int32).
        problems.append(
            SpecProblem(
                "max_slice_restarts",
                max_slice_restarts,
                f"must be at most {MAX_INT32 // shape.vms} with {shape.vms} VMs per slice (the worker Jobs' backoffLimit)",
            )
        )

    if not isinstance(pathways_dir, str) or not GCS_PATH.match(pathways_dir):
        problems.append(
            SpecProblem(
                "pathways_dir",
                pathways_dir,
                "must be gs://<bucket>[/<path>] with a valid bucket name (3-63 characters of "
                "a-z 0-9 - _ .); Pathways keeps its scratch data there and the bucket must exist",
            )
        )
    if deployment_mode not in DEPLOYMENT_MODES:
        problems.append(SpecProblem("deployment_mode", deployment_mode, "unknown mode", DEPLOYMENT_MODES))
    if pathways_version is not None and not (
        isinstance(pathways_version, str) and IMAGE_TAG.match(pathways_version)
    ):
        problems.append(
            SpecProblem(
                "pathways_version",
                pathways_version,
                "must be an image tag such as 'jax-0.5.3' (it selects the Pathways images)",
            )
        )
    metrics = None if enable_metrics_collection is None else checked_flag(problems, "enable_metrics_collection", enable_metrics_collection)
    spot_nodes = checked_flag(problems, "spot", spot)

    main = None
    if image is None:
        for name, value in (("command", command), ("arguments", arguments), ("env", env)):
            if value:
                problems.append(
                    SpecProblem(name, value, "given without an image; set image for the main container")
                )
    else:
        main = checked_main_container(
            problems, image, container_name, command, arguments, env, resources, image_pull_policy
        )

    components = tuple(_custom_components(problems, custom_components if custom_components is not None else ()))

    selector = dict(string_mapping(problems, "node_selector", node_selector or {}, labels_like=True))
    if reservation is not None:
        if not _label_value_ok(reservation) or not reservation:
            problems.append(SpecProblem("reservation", reservation, "must be a reservation name"))
        selector[RESERVATION_SELECTOR] = str(reservation)
    if spot_nodes:
        selector[SPOT_SELECTOR] = "true"

    for fieldname, value in (
        ("pod_priority_class_name", pod_priority_class_name),
        ("service_account_name", service_account_name),
    ):
        if value is not None and not (isinstance(value, str) and is_dns_subdomain(value)):
            problems.append(SpecProblem(fieldname, value, "must be a DNS subdomain name"))

    all_labels = dict(string_mapping(problems, "labels", labels or {}, labels_like=True))
    for fieldname, label, value in (
        ("queue_name", well_known.QUEUE_NAME, queue_name),
        ("priority_class", well_known.PRIORITY_CLASS, priority_class),
    ):
        if value is None:
            continue
        if not (isinstance(value, str) and value and _label_value_ok(value) and is_dns_subdomain(value)):
            problems.append(SpecProblem(fieldname, value, "must be a Kueue object name (DNS subdomain, ≤ 63)"))
        else:
            all_labels[label] = value
    exec_limit = _optional_integer(problems, "max_exec_time_seconds", max_exec_time_seconds, minimum=1, maximum=MAX_INT32)
    if exec_limit is not None and queue_name is None:
        problems.append(SpecProblem("max_exec_time_seconds", max_exec_time_seconds, "is enforced by Kueue: set queue_name too"))
    elif exec_limit is not None:  # Kueue parses it as a positive int32 (pkg/controller/jobframework/utils.go)
        all_labels[well_known.MAX_EXEC_TIME] = str(exec_limit)
    all_annotations = dict(string_mapping(problems, "annotations", annotations or {}, labels_like=False))

    raise_if_any(problems)
    assert shape is not None and slices is not None and restarts is not None
    return Workload(
        shape=shape,
        num_slices=slices,
        pathways_dir=pathways_dir,
        main=main,
        deployment_mode=deployment_mode,
        max_restarts=restarts,
        max_slice_restarts=slice_restarts,
        elastic_slices=elastic,
        pathways_version=pathways_version,
        custom_components=components,
        node_selector=selector,
        pod_priority_class_name=pod_priority_class_name,
        termination_grace_period_seconds=grace,
        service_account_name=service_account_name,
        enable_metrics_collection=metrics,
        labels=all_labels,
        annotations=all_annotations,
    )


def rendered_literal(text: str) -> Any:
    """What a rendered template stood for: JSON (``{"a": 1}``) or a Python literal (``{'a': 1}``).

    Without ``render_template_as_native_obj``, an XCom dict pulled through Jinja arrives as its
    ``repr``; this reads it back. Text that is neither is returned unchanged.
    """
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text


def optional_text(value: Any) -> Any:
    """``""`` and ``"None"`` (what templates render an absent value to) mean unset: ``None``."""
    return None if value is None or (isinstance(value, str) and value.strip() in ("", "None")) else value


def _collect(problems: list[SpecProblem], build: Any) -> Any:
    try:
        return build()
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
        return None


def checked_integer(
    problems: list[SpecProblem], name: str, value: Any, *, minimum: int, maximum: int | None = None
) -> int | None:
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value) and len(value) <= 100:
        number = int(value)
    bounds = f"≥ {minimum}" if maximum is None else f"between {minimum} and {maximum}"
    if number is None or number < minimum or (maximum is not None and number > maximum):
        problems.append(SpecProblem(name, value, f"must be an integer {bounds}"))
        return None
    return number


def _optional_integer(
    problems: list[SpecProblem], name: str, value: Any, *, minimum: int, maximum: int | None = None
) -> int | None:
    return None if value is None else checked_integer(problems, name, value, minimum=minimum, maximum=maximum)


def checked_flag(problems: list[SpecProblem], name: str, value: Any) -> bool | None:
    """A bool, or the ``"True"``/``"False"`` a template renders one to (never "any non-empty string")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    problems.append(SpecProblem(name, value, "must be True or False"))
    return None


def _string_list(problems: list[SpecProblem], name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        problems.append(
            SpecProblem(
                name,
                value,
                "must be a list of strings, not one string (e.g. ['bash', '-c', 'python train.py'])",
            )
        )
        return ()
    if not isinstance(value, (list, tuple)):
        problems.append(SpecProblem(name, value, "must be a list of strings"))
        return ()
    items = tuple(value)
    bad = [item for item in items if not isinstance(item, str)]
    if bad:
        problems.append(SpecProblem(name, value, f"every item must be a string; got {bad[0]!r}"))
        return ()
    if any("\x00" in item for item in items):
        problems.append(SpecProblem(name, value, "a NUL character cannot be passed to a program"))
        return ()
    return items


def env_vars_from(problems: list[SpecProblem], name: str, env: Any) -> tuple[EnvVar, ...]:
    """Accept ``{"NAME": "value" | {"valueFrom": ...}}`` or a list of Kubernetes ``EnvVar`` dicts."""
    if not env:
        return ()
    entries: list[EnvVar] = []
    if isinstance(env, Mapping):
        for key, value in env.items():
            if isinstance(value, Mapping) and set(value) == {"valueFrom"}:
                source = value["valueFrom"]
                entries.append({"name": key, "valueFrom": dict(source) if isinstance(source, Mapping) else source})
            else:
                entries.append({"name": key, "value": value})
    elif isinstance(env, (list, tuple)):
        entries = [dict(item) if isinstance(item, Mapping) else {"name": item} for item in env]
    else:
        problems.append(SpecProblem(name, env, "must be a mapping of names to values or a list of EnvVar"))
        return ()
    seen: set[str] = set()
    for entry in entries:
        var = entry.get("name")
        if not isinstance(var, str) or not _ENV_NAME.match(var):
            problems.append(
                SpecProblem(f"{name}", var, "not a valid environment variable name ([-._a-zA-Z][-._a-zA-Z0-9]*)")
            )
            continue
        if var in seen:
            problems.append(SpecProblem(f"{name}.{var}", var, "defined twice"))
        seen.add(var)
        extra = set(entry) - {"name", "value", "valueFrom"}
        if extra or ("value" in entry) == ("valueFrom" in entry):
            problems.append(
                SpecProblem(f"{name}.{var}", dict(entry), "needs exactly one of 'value' or 'valueFrom'")
            )
        elif "value" in entry and not isinstance(entry["value"], str):
            problems.append(
                SpecProblem(
                    f"{name}.{var}",
                    entry["value"],
                    "must be a string (quote numbers and booleans: Kubernetes env values are strings)",
                )
            )
        elif "value" in entry and "\x00" in entry["value"]:
            problems.append(SpecProblem(f"{name}.{var}", entry["value"], "a NUL character cannot be in an environment value"))
        elif "valueFrom" in entry and not isinstance(entry["valueFrom"], Mapping):
            problems.append(SpecProblem(f"{name}.{var}", entry["valueFrom"], "valueFrom must be a mapping"))
    return tuple(entries)


def checked_main_container(
    problems: list[SpecProblem],
    image: Any,
    name: Any,
    command: Any,
    arguments: Any,
    env: Any,
    resources: Any,
    image_pull_policy: Any,
    resources_field: str = "resources",
) -> MainContainer | None:
    """The main container, checked; ``resources_field`` is the caller's name for ``resources``."""
    before = len(problems)
    if not isinstance(image, str) or not image.strip() or not IMAGE_REFERENCE.match(image):
        problems.append(SpecProblem("image", image, "must be a non-empty container image reference"))
    if not isinstance(name, str) or not is_dns_label(name):
        problems.append(SpecProblem("container_name", name, "must be a DNS label"))
    elif name in RESERVED_CONTAINER_NAMES:
        problems.append(
            SpecProblem("container_name", name, "is used by a Pathways container; choose another")
        )
    if image_pull_policy is not None and image_pull_policy not in IMAGE_PULL_POLICIES:
        problems.append(
            SpecProblem("image_pull_policy", image_pull_policy, "unknown policy", IMAGE_PULL_POLICIES)
        )
    resources_ok = resources is None
    if resources is not None:
        if not isinstance(resources, Mapping) or set(resources) - {"requests", "limits"}:
            problems.append(
                SpecProblem(resources_field, resources, "must be a mapping with keys among requests, limits")
            )
        else:
            resources_ok = True
            for kind, amounts in resources.items():
                if not isinstance(amounts, Mapping) or not all(
                    _label_key_ok(k) and _quantity_ok(v) for k, v in amounts.items()
                ):
                    resources_ok = False
                    problems.append(
                        SpecProblem(
                            f"{resources_field}.{kind}",
                            amounts,
                            "must map resource names to quantities such as 4, '500m' or '16Gi'",
                        )
                    )
    container = MainContainer(
        image=image if isinstance(image, str) else "",
        name=name if isinstance(name, str) else "main",
        command=_string_list(problems, "command", command),
        args=_string_list(problems, "arguments", arguments),
        env=env_vars_from(problems, "env", env),
        resources={k: dict(v) for k, v in resources.items()} if resources_ok and resources is not None else None,
        image_pull_policy=image_pull_policy,
    )
    return container if len(problems) == before else None


def _custom_components(problems: list[SpecProblem], components: Any) -> Iterator[CustomComponent]:
    if not isinstance(components, (list, tuple)):
        problems.append(SpecProblem("custom_components", components, "must be a list"))
        return
    items = list(components)
    if len(items) > MAX_CUSTOM_COMPONENTS:
        problems.append(
            SpecProblem("custom_components", len(items), f"at most {MAX_CUSTOM_COMPONENTS} (one per type)")
        )
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"custom_components[{index}]"
        if isinstance(item, CustomComponent):
            item = {
                "component_type": item.component_type,
                "image": item.image,
                "flags": item.flags,
                "env": item.env,
            }
        if not isinstance(item, Mapping):
            problems.append(SpecProblem(where, item, "must be a CustomComponent or a mapping"))
            continue
        unknown = set(item) - {"component_type", "image", "flags", "env"}
        if unknown:
            problems.append(
                SpecProblem(where, sorted(unknown, key=repr), "unknown keys", ("component_type", "image", "flags", "env"))
            )
        kind = item.get("component_type")
        if kind not in COMPONENT_TYPES:
            problems.append(SpecProblem(f"{where}.component_type", kind, "unknown component", COMPONENT_TYPES))
        elif kind in seen:
            problems.append(
                SpecProblem(f"{where}.component_type", kind, "given twice; one entry per component type")
            )
        seen.add(str(kind))
        image = item.get("image")
        if image is not None and (not isinstance(image, str) or not image or not IMAGE_REFERENCE.match(image)):
            problems.append(SpecProblem(f"{where}.image", image, "must be a non-empty image reference"))
        yield CustomComponent(
            component_type=str(kind),
            image=image,
            flags=_string_list(problems, f"{where}.flags", item.get("flags")),
            env=env_vars_from(problems, f"{where}.env", item.get("env")),
        )


def _quantity_ok(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= MAX_INT64
    return isinstance(value, str) and bool(QUANTITY.match(value))


def _label_value_ok(value: Any) -> bool:
    return isinstance(value, str) and bool(_LABEL_VALUE.match(value))


def is_dns_subdomain(value: str) -> bool:
    return len(value) <= 253 and bool(_DNS_SUBDOMAIN.match(value))


def _label_key_ok(key: Any) -> bool:
    if not isinstance(key, str) or not key:
        return False
    prefix, _, name = key.rpartition("/")
    return bool(_LABEL_NAME.match(name)) and (not prefix or is_dns_subdomain(prefix))


def string_mapping(
    problems: list[SpecProblem], name: str, value: Any, *, labels_like: bool
) -> Iterator[tuple[str, str]]:
    if not isinstance(value, Mapping):
        problems.append(SpecProblem(name, value, "must be a mapping of strings to strings"))
        return
    for key, item in value.items():
        if not _label_key_ok(key):
            problems.append(SpecProblem(f"{name}", key, "not a valid key ([prefix/]name, name ≤ 63)"))
        elif not isinstance(item, str):
            problems.append(SpecProblem(f"{name}.{key}", item, "must be a string"))
        elif labels_like and not _label_value_ok(item):
            problems.append(
                SpecProblem(f"{name}.{key}", item, "not a valid label value (≤ 63 of [-A-Za-z0-9_.])")
            )
        else:
            yield key, item


def with_resume_env(env: Any, checkpoint: Checkpoint) -> Any:
    """The user's env plus ``PATHWAYS_RESUME_STEP`` / ``PATHWAYS_RESUME_CHECKPOINT``.

    Kubernetes expands ``$(PATHWAYS_RESUME_CHECKPOINT)`` in the command line from these, so a
    MaxText command can say ``load_full_state_path=$(PATHWAYS_RESUME_CHECKPOINT)/items``.
    """
    resume = {"PATHWAYS_RESUME_STEP": str(checkpoint.step), "PATHWAYS_RESUME_CHECKPOINT": checkpoint.uri}
    if env is None:
        return resume
    if isinstance(env, Mapping):
        return {**env, **resume}
    return [*(e for e in env if not (isinstance(e, Mapping) and e.get("name") in resume)), *({"name": k, "value": v} for k, v in resume.items())]

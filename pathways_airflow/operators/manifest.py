"""``manifest=``: supervise a workload the user already has — a PathwaysJob or JobSet for
:class:`~pathways_airflow.operators.PathwaysJobOperator`, a LeaderWorkerSet for the inference operators.

The manifest is a dict, YAML or JSON text, or the path of a ``.yaml``/``.yml``/``.json`` file,
found and rendered as Airflow template files are (Jinja, the DAG folder and its
``template_searchpath``), as ``KubernetesPodOperator(pod_template_file=...)`` does. Reading it,
and what the provider adds to it, are :mod:`pathways_airflow.spec.manifest`'s rules; these mixins
only load the file, keep the operator's other parameters out of the way, and report the diff.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathways_airflow.run.outcome import restarts_in_place
from pathways_airflow.run.result import tpu_of
from pathways_airflow.spec.arguments import kueue_max_exec_time, looks_templated
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.manifest import (
    UserServer, UserWorkload, is_manifest_file, read_manifest, read_server_manifest, supervise, supervise_server,
)
from pathways_airflow.spec.names import slugify
from pathways_airflow.spec.render import JobSetFailurePolicy, render
from pathways_airflow.spec.serving import InferenceServer, ServingNames, positive_int
from pathways_airflow.state.slices import SliceRequest, slice_request

if TYPE_CHECKING:
    from airflow.sdk import Context

    from pathways_airflow.checkpoints import Checkpoint
    from pathways_airflow.spec.engine import Engine
    from pathways_airflow.spec.workload import Workload

SUPERVISION_PARAMETERS = frozenset({"queue_name"})
"""Spec parameters that still apply to a supplied manifest (the Kueue queue label)."""


class ManifestSource:
    """``manifest=`` read as Airflow reads template files, once per task context, and exclusive with the spec parameters."""

    manifest: Any
    main_container: str | None
    namespace: str
    name_prefix: str | None
    set_from_manifest: frozenset[str] = frozenset()
    """Parameters the manifest itself set (a workload's ``backend`` from its kind), not the user."""
    _understood: Any = None
    _read_with: Any = None

    def spec_parameters_given(self, names: tuple[str, ...]) -> list[str]:
        """The spec parameters set to something other than their default: a manifest excludes them."""
        declared = next(  # the operator class that declares them (a subclass may take **kwargs)
            inspect.signature(k.__init__).parameters for k in type(self).__mro__ if set(names) <= set(inspect.signature(k.__init__).parameters)
        )
        return [n for n in names if n not in SUPERVISION_PARAMETERS | self.set_from_manifest and getattr(self, n) != declared[n].default]

    def manifest_problems(self, spec_names: tuple[str, ...], *, only_known: bool, context: Context | None = None) -> list[SpecProblem]:
        """Why the manifest cannot be supervised (a mix with spec parameters, or the manifest itself)."""
        mixed = self.spec_parameters_given(spec_names)
        if mixed:
            return [SpecProblem("manifest", "given", f"is exclusive with the spec parameters; also given: {', '.join(mixed)}")]
        if only_known and (looks_templated(self.manifest) or is_manifest_file(self.manifest)):
            return []
        try:
            self.understood(context)
        except InvalidWorkloadSpec as error:
            return list(error.problems)
        return []

    def understood(self, context: Context | None = None) -> Any:
        """The manifest as understood; the operator takes its namespace and name from it.
        Read (and a file rendered) once per task context, then kept: a task asks several times."""
        if self._understood is not None and (context is None or context is self._read_with):
            return self._understood
        source = self.manifest_text(self.manifest, context) if is_manifest_file(self.manifest) else self.manifest
        user = self.read(source)
        self.namespace = user.namespace_for(self.namespace)
        if self.name_prefix is None:  # the workload keeps the user's name as its prefix
            self.name_prefix = slugify(user.name)
        if context is not None:
            self._understood, self._read_with = user, context
        return user

    def read(self, source: Any) -> Any:
        """The manifest's text or mapping, understood (each operator's kind of manifest)."""
        raise NotImplementedError

    def log_changes(self, name: str, changes: tuple[Any, ...]) -> None:
        self.log.info("%s, supervised:\n%s", name, "\n".join(f"  {c.line()}" for c in changes))  # type: ignore[attr-defined]

    def manifest_text(self, path: str, context: Context | None) -> str:
        """The file, found as Airflow finds template files, rendered with the task's context."""
        import jinja2

        env = self.get_template_env(dag=self.dag if self.has_dag() else None)  # type: ignore[attr-defined]
        try:
            template = env.get_template(path)
        except (jinja2.TemplateNotFound, TypeError):  # no DAG folder to look in (a bare task): a path
            if not Path(path).is_file():
                raise InvalidWorkloadSpec([SpecProblem("manifest", path, "no such file in the DAG folder or template_searchpath")]) from None
            template = env.from_string(Path(path).read_text())
        try:
            return template.render(**(context or {}))
        except jinja2.UndefinedError as error:  # a dry run without the task's context
            raise InvalidWorkloadSpec([SpecProblem("manifest", path, f"needs the task's context to render: {error}")]) from None



class SuppliedManifest(ManifestSource):
    """What the training operator does with ``manifest=`` (mixed into :class:`PathwaysJobOperator`)."""

    backend: str

    def read(self, source: Any) -> UserWorkload:
        user = read_manifest(source, main_container=self.main_container)
        self.backend, self.set_from_manifest = user.backend, frozenset({"backend"})
        return user

    def user_workload(self, context: Context | None = None) -> UserWorkload:
        """The PathwaysJob or JobSet as understood; the operator takes its kind from it too."""
        return self.understood(context)

    def rendered(self, context: Context | None, attempt: int, resume_from: Checkpoint | None) -> dict[str, Any]:
        """The manifest to submit: the user's with what the provider's guarantees need (the changes
        logged), or the one rendered from the spec parameters."""
        identity, ttl = self.task_identity(context), self.ttl_seconds_after_finished  # type: ignore[attr-defined]
        ttl = None if ttl is None else int(ttl)
        if self.manifest is None:
            return render(
                self.workload(resume_from), backend=self.backend, name=identity.workload_name(attempt, self.name_prefix),  # type: ignore[attr-defined]
                namespace=self.namespace, labels=identity.labels(attempt), annotations=identity.annotations(),
                failure_policy=JobSetFailurePolicy(system_exit_codes=tuple(self.system_exit_codes)),  # type: ignore[attr-defined]
                ttl_seconds_after_finished=ttl,
            )
        user = self.user_workload(context)
        manifest, changes = supervise(
            user, name=identity.workload_name(attempt, self.name_prefix), namespace=self.namespace, labels=identity.labels(attempt),
            annotations=identity.annotations(), queue_name=self.queue_name, ttl_seconds_after_finished=ttl,  # type: ignore[attr-defined]
            system_exit_codes=tuple(self.system_exit_codes), resume_from=resume_from,  # type: ignore[attr-defined]
            max_exec_time_seconds=kueue_max_exec_time(None, self.execution_timeout, self.queue_name or user.queue_name),  # type: ignore[attr-defined]
        )
        self.log_changes(user.name, changes)
        return manifest

    def restarts_allowed(self) -> int:
        """``max_restarts``: the manifest's own, or the parameter's (a number once validated)."""
        return self.user_workload().max_restarts if self.manifest is not None else int(self.max_restarts)  # type: ignore[attr-defined]

    def restarting_in_place(self, workload: Workload) -> Workload:
        """The workload as submitted: restarting in place only as far as its backend tells a bug
        from a lost slice (:func:`~pathways_airflow.run.outcome.restarts_in_place`)."""
        return dataclasses.replace(workload, max_restarts=restarts_in_place(self.backend, workload.max_restarts))

    def tpu_held(self) -> dict[str, Any]:
        """The TPU shape the task holds, as its result reports it."""
        return self.user_workload().tpu() if self.manifest is not None else tpu_of(self.workload())  # type: ignore[attr-defined]

    def slices_wanted(self) -> SliceRequest:
        """What a slice readiness check asks for: the manifest's shape, or the spec parameters'."""
        tpu = self.tpu_held()
        return slice_request(topology=tpu["topology"], machine_type=tpu["machine_type"], num_slices=tpu["slices"])

    def main_container_name(self) -> str | None:
        """The container whose log a success quotes: the manifest's program, or ``container_name``."""
        if self.manifest is not None:
            return self.user_workload().main_container
        return self.container_name if self.image else None  # type: ignore[attr-defined]


class SuppliedServer(ManifestSource):
    """What the inference operators do with ``manifest=``: a LeaderWorkerSet the user already has."""

    engine: str
    model_name: str | None
    hf_model: str | None
    startup_timeout: Any

    def read(self, source: Any) -> UserServer:
        from pathways_airflow.spec.engines import engine_named

        return read_server_manifest(source, engine=engine_named(self.engine), main_container=self.main_container)

    def user_server(self, context: Context | None = None) -> UserServer:
        return self.understood(context)

    def supplied_server(self) -> InferenceServer:
        """The server as the waits and the benchmark see it: the engine as the manifest runs it."""
        user, problems = self.user_server(), []
        startup = positive_int(problems, "startup_timeout", self.startup_timeout)
        if startup is None:
            raise InvalidWorkloadSpec(problems)
        return InferenceServer(
            engine=user.engine, shape=user.shape, image=user.image, model_name=self.model_name, hf_model=self.hf_model,
            on_pathways=user.on_pathways, startup_seconds=startup,
        )

    def supplied_server_objects(self, context: Context | None, names: ServingNames, labels: dict[str, str], annotations: dict[str, str]) -> list[dict[str, Any]]:
        """The user's LeaderWorkerSet and the task's Service for it, the changes logged."""
        user = self.user_server(context)
        objects, changes = supervise_server(user, name=names.lws, service=names.service, namespace=self.namespace, labels=labels, annotations=annotations)
        self.log_changes(user.name, changes)
        return objects

    def supplied_engine(self) -> Engine:
        return self.user_server().engine


__all__ = ["SUPERVISION_PARAMETERS", "ManifestSource", "SuppliedManifest", "SuppliedServer"]

"""Inference benchmarks on TPU slices: a serving engine (vLLM or JetStream) as a LeaderWorkerSet, and its benchmark.

``InferenceBenchmarkOperator`` deploys the server, waits until it serves, runs the benchmark Job,
reads the result JSON from GCS and returns the metrics, and deletes everything it created however
the task ends. ``DeployInferenceServerOperator`` and ``TeardownInferenceServerOperator``
(:mod:`pathways_airflow.operators.teardown`) split the same work into Airflow setup and teardown
tasks, for DAGs that do their own work against the server in between.

What is run comes from the pure :mod:`pathways_airflow.spec.serving` and
:mod:`pathways_airflow.spec.benchmark`, with the engine's own module
(:mod:`pathways_airflow.spec.engines`) answering every engine-specific question; how the cluster is read is
the pure :mod:`pathways_airflow.state.serving` and :mod:`pathways_airflow.state.jobs`, and what a
Job's end means for the task :func:`pathways_airflow.run.outcome.job_end_exception`. The server's
start-up is waited for in the worker, by :class:`pathways_airflow.hooks.serving.ServingHook`;
the operators only fetch, ask and act. A deferrable benchmark then waits for its Job in the
triggerer (``BatchJobTrigger``), which deletes the Job and the server if the task is killed
meanwhile; ``execute_complete`` reads the result and deletes them otherwise. What a kill deletes
is what the task holds (:class:`~pathways_airflow.operators.base.ClusterOperator`).

Before a slice is requested, the checkpoint is checked to be committed and the results bucket to
exist: either mistake would otherwise be found after a restore of up to 20 minutes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import TaskDeferred, conf

from pathways_airflow.checkpoints import commit_marker_uri, split_gcs_uri, step_dir_of
from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS
from pathways_airflow.exceptions import BadSpecError, UserCodeError
from pathways_airflow.hooks.serving import ServingHook
from pathways_airflow.hooks.storage import bucket_exists_if_permitted, object_exists_if_permitted, opened_storage, read_object
from pathways_airflow.operators.base import ClusterOperator
from pathways_airflow.operators.lineage import ReportsLineage, benchmark_rule
from pathways_airflow.operators.manifest import SuppliedServer
from pathways_airflow.resources import JOB, LEADERWORKERSET, SERVICE
from pathways_airflow.run.outcome import job_end_exception
from pathways_airflow.spec.arguments import (
    POLL_INTERVAL_SECONDS, TASK_LIMIT, deletion_poll, known_problems, looks_templated, namespace_problem, poll_interval_problem,
)
from pathways_airflow.spec.benchmark import (
    BenchmarkRun, build_benchmark, job_deadline, render_benchmark_job, result_metrics, result_object_uri,
    results_uri_problem,
)
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.engines import DEFAULT_ENGINE, engine_named
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem
from pathways_airflow.spec.manifest import is_manifest_file
from pathways_airflow.spec.names import check_name_prefix
from pathways_airflow.spec.serving import (
    DEFAULT_STARTUP_SECONDS, InferenceServer, ServingNames, build_server, render_leaderworkerset, render_service, serving_names,
)
from pathways_airflow.state.jobs import FAILED, JobEvent

if TYPE_CHECKING:
    from airflow.sdk import Context

# --- pure: where the task's objects go ------------------------------------------------------------


def _placement_problems(namespace: Any, name_prefix: Any) -> list[SpecProblem]:
    problems = list(filter(None, [namespace_problem(namespace)]))
    try:
        check_name_prefix(name_prefix)
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
    return problems


# --- the shared imperative shell ---------------------------------------------------------------

_SERVER_FIELDS = (
    "checkpoint", "model_name", "topology", "pathways_dir", "tpu", "machine_type", "hf_model", "pathways", "image",
    "http_image", "pathways_version", "config", "server_args", "env", "image_pull_policy", "node_selector",
    "service_account_name",
)
"""What :meth:`_InferenceServerOperator.server` is built from."""
_SERVER_SPEC_FIELDS = tuple(f for f in _SERVER_FIELDS if f not in ("model_name", "hf_model", "image_pull_policy", "service_account_name"))
"""What ``manifest=`` replaces: the server's own parameters (the benchmark still asks for its model,
and its Job still takes the pull policy and service account)."""
_SERVING_TEMPLATE_FIELDS = (
    "engine", *_SERVER_FIELDS, "startup_timeout", "namespace", "name_prefix", "manifest", "main_container", *CLUSTER_TEMPLATE_FIELDS,
)


class _InferenceServerOperator(SuppliedServer, ClusterOperator):
    """Deploying, watching and deleting one task's server, whatever its engine (shared by the operators below)."""

    template_fields_renderers = {"env": "json", "server_args": "py", "node_selector": "json", "checkpoint": "json", "manifest": "yaml"}
    ui_color = "#b3e5fc"

    def __init__(
        self,
        *,
        topology: str | None = None,
        manifest: Mapping[str, Any] | str | None = None,
        main_container: str | None = None,
        engine: str = DEFAULT_ENGINE,
        checkpoint: Mapping[str, Any] | str | None = None,
        model_name: str | None = None,
        hf_model: str | None = None,
        pathways_dir: str | None = None,
        pathways: bool = True,
        tpu: str | None = None,
        machine_type: str | None = None,
        image: str | None = None,
        http_image: str | None = None,
        pathways_version: str = "latest",
        config: str | None = None,
        server_args: Sequence[str] | None = None,
        env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        image_pull_policy: str = "Always",
        node_selector: Mapping[str, str] | None = None,
        service_account_name: str | None = None,
        startup_timeout: int | str = DEFAULT_STARTUP_SECONDS,
        verify_checkpoint: bool = True,
        namespace: str = "default",
        name_prefix: str | None = None,
        poll_interval: float = POLL_INTERVAL_SECONDS["server"],
        cleanup_timeout: float = 300.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest
        self.main_container = main_container
        self.engine = engine
        self.checkpoint = checkpoint
        self.model_name = model_name
        self.hf_model = hf_model
        self.topology = topology
        self.pathways_dir = pathways_dir
        self.pathways = pathways
        self.tpu = tpu
        self.machine_type = machine_type
        self.image = image
        self.http_image = http_image
        self.pathways_version = pathways_version
        self.config = config
        self.server_args = server_args
        self.env = env
        self.image_pull_policy = image_pull_policy
        self.node_selector = node_selector
        self.service_account_name = service_account_name
        self.startup_timeout = startup_timeout
        self.verify_checkpoint = verify_checkpoint
        self.namespace = namespace
        self.name_prefix = name_prefix
        self.poll_interval = poll_interval
        self.cleanup_timeout = cleanup_timeout

    # --- pure questions ------------------------------------------------------------------------

    def serving_engine(self) -> Engine:
        """The engine; with ``manifest=``, as that manifest runs it (its container, health check, ports)."""
        return self.supplied_engine() if self.manifest is not None else engine_named(self.engine)

    def server(self) -> InferenceServer:
        if self.manifest is not None:
            return self.supplied_server()
        return build_server(
            engine=self.serving_engine(),
            **{name: getattr(self, name) for name in _SERVER_FIELDS},
            startup_seconds=self.startup_timeout,
        )

    def _problems(self, only_known: bool, context: Context | None = None) -> list[SpecProblem]:
        problems: list[SpecProblem] = []
        if self.manifest is not None:  # read first: it names the namespace and the name prefix
            problems.extend(self.manifest_problems(_SERVER_SPEC_FIELDS, only_known=only_known, context=context))
        placement = (self.namespace, self.name_prefix)
        if not (only_known and looks_templated(placement)):
            problems.extend(_placement_problems(*placement))
        arguments = {name: getattr(self, name) for name in ("engine", *_SERVER_FIELDS, "startup_timeout")}
        if not problems and not (only_known and self.manifest is not None and self.understood_later()):
            try:
                self.server()
            except InvalidWorkloadSpec as error:  # at parse time: every problem not about a template, at once
                problems.extend(known_problems(error.problems, arguments) if only_known else error.problems)
        return [*problems, *filter(None, [poll_interval_problem(self.poll_interval)])]

    def understood_later(self) -> bool:
        """A manifest file or template is read with the task's context, not at parse time."""
        return looks_templated(self.manifest) or is_manifest_file(self.manifest)

    def validate(self, *, only_known: bool = False, context: Context | None = None) -> None:
        """Raise ``InvalidWorkloadSpec`` (a ``ValueError``) for anything that must not be deployed."""
        problems = self._problems(only_known, context)
        if problems:
            raise InvalidWorkloadSpec(problems)

    def names(self, context: Context | None = None) -> ServingNames:
        return serving_names(self.task_identity(context), self.name_prefix)

    def _labels(self, context: Context | None) -> tuple[dict[str, str], dict[str, str]]:
        identity = self.task_identity(context)
        labels = identity.labels()
        labels.pop("pathways-airflow/attempt", None)
        return labels, identity.annotations()

    def server_manifests(self, context: Context | None = None) -> list[dict[str, Any]]:
        """The LeaderWorkerSet and Service exactly as they would be applied (a dry run)."""
        self.validate(context=context)
        return self._server_objects(context, self.server(), self.names(context))

    def _server_objects(
        self, context: Context | None, server: InferenceServer, names: ServingNames
    ) -> list[dict[str, Any]]:
        labels, annotations = self._labels(context)
        if self.manifest is not None:
            return self.supplied_server_objects(context, names, labels, annotations)
        return [
            render_leaderworkerset(
                server, name=names.lws, namespace=self.namespace, labels=labels, annotations=annotations
            ),
            render_service(
                engine=server.engine,
                name=names.service,
                namespace=self.namespace,
                lws_name=names.lws,
                labels=labels,
                annotations=annotations,
            ),
        ]

    # --- acting --------------------------------------------------------------------------------

    @property
    def serving(self) -> ServingHook:
        return ServingHook(self.hook, self.namespace, log=self.log, on_gke=bool(self.cluster_name))

    def _create(self, manifest: Mapping[str, Any], context: Context) -> dict[str, Any]:
        """Create (or adopt this task's own earlier) object, held for deletion from then on."""
        self.raise_if_stopped()
        resource, obj = self.serving.create_or_adopt(manifest, self.task_identity(context).key)
        self.holding(resource, self.namespace, manifest["metadata"]["name"])
        return obj

    def _preflight(self, server: InferenceServer, results_uri: str | None = None) -> None:
        """Refuse before any TPU is requested: an uncommitted checkpoint, a missing results bucket.

        Only what is known to be missing refuses; a look the Google connection is not permitted
        to make is warned about and skipped (the server's own identity may read what it cannot).
        """
        with opened_storage(self.gcp_conn_id) as client:
            if self.verify_checkpoint and server.load_parameters_path:
                marker = commit_marker_uri(step_dir_of(server.load_parameters_path))
                committed = object_exists_if_permitted(client, marker)
                if committed is None:
                    self.log.warning(
                        "cannot read %s (permission denied); not checking that the checkpoint is committed", marker
                    )
                elif not committed:
                    raise BadSpecError(
                        f"checkpoint {server.load_parameters_path!r} is not committed: {marker} does not exist "
                        "(a conversion still running, cut off, or a wrong path). The server would refuse it after "
                        "the slice was provisioned. Set verify_checkpoint=False for a checkpoint without "
                        "Orbax's marker."
                    )
            if results_uri is not None:
                bucket, _ = split_gcs_uri(results_uri)
                found = bucket_exists_if_permitted(client, bucket)
                if found is None:
                    self.log.warning("cannot list gs://%s (permission denied); not checking that it exists", bucket)
                elif not found:
                    raise BadSpecError(
                        f"results_uri={results_uri!r}: bucket {bucket!r} does not exist (or is not visible to "
                        f"gcp_conn_id={self.gcp_conn_id!r}); the benchmark could not save its result"
                    )

    def _serve(self, context: Context, server: InferenceServer, names: ServingNames) -> None:
        """Create or adopt the server's objects, and wait until it serves."""
        for manifest in self._server_objects(context, server, names):
            self._create(manifest, context)
        self.serving.wait_until_serving(names, server, interval=self.poll_interval, before_look=self.raise_if_stopped)

    @contextlib.contextmanager
    def _torn_down(self, *, keep_on_success: bool = False) -> Iterator[None]:
        """Delete what the task holds when the block ends, and wait for the pods to go: always
        after a failure, after success unless ``keep_on_success`` (a setup task's server). Not when
        the task defers: the trigger then holds the objects until ``execute_complete``."""
        try:
            yield
        except TaskDeferred:
            self.released()
            raise
        except BaseException:
            try:
                self._tear_down()
            except Exception:
                self.log.exception("cleanup after the failure did not finish")
            raise
        if keep_on_success:
            self.released()
        else:
            self._tear_down()

    def _tear_down(self) -> None:
        """Delete every object the task holds, the newest first, and wait until their pods are gone."""
        held = self.released()
        try:
            self.delete_each(reversed(held))
        finally:
            if held:
                objects = [(resource, name) for resource, _, name in reversed(held)]
                self.serving.wait_gone(objects, timeout=self.cleanup_timeout, poll=deletion_poll(self.poll_interval))


# --- the operators -------------------------------------------------------------------------------


_BENCHMARK_FIELDS = (
    "engine", "model_name", "hf_model", "dataset", "num_prompts", "request_rate", "max_output_length", "dataset_path",
    "tokenizer", "max_concurrency", "benchmark_args", "benchmark_image", "benchmark_script", "benchmark_env",
    "benchmark_timeout", "image", "image_pull_policy", "service_account_name",
)
"""What :meth:`InferenceBenchmarkOperator.benchmark` is built from."""


class InferenceBenchmarkOperator(ReportsLineage, _InferenceServerOperator):
    """Benchmark a model with a serving engine on a TPU slice, then tear everything down.

    Deploys a LeaderWorkerSet (on Pathways: a leader with the Pathways proxy, resource manager and
    the engine's server, and one Pathways worker per TPU VM of one slice) and a Service, waits
    until the LeaderWorkerSet is Available and the engine's health check answers 200, runs the
    engine's benchmark as a Job against the Service, reads the result JSON it uploaded to
    ``results_uri`` and returns the metrics with ``engine`` and ``result_uri``. A run in which
    requests failed is refused: it measured another load. The LeaderWorkerSet, Service and Job
    are deleted whatever happens (success, failure, kill, timeout), and the task waits until
    their pods are gone so the slice is free when it ends.

    :param engine: ``"vllm"`` (default: ``vllm serve`` and ``vllm bench serve``) or
        ``"jetstream"`` (JetStream with MaxText, and ``benchmark_serving.py``).
    :param checkpoint: the ``{"uri", "items_uri"}`` that ``CheckpointConversionOperator`` returns,
        or the ``gs://`` URI of a serving checkpoint's ``items`` directory. Required for JetStream;
        vLLM serves it through MaxText's model plugin, or ``hf_model``'s own weights without one.
    :param model_name: MaxText model name (``"llama2-70b"``) of the checkpoint.
    :param hf_model: vLLM only: the Hugging Face model id served (architecture, tokenizer, and
        the model the benchmark asks for).
    :param tpu: TPU generation (``"v6e"``) or set ``machine_type``; :param topology: slice topology.
    :param pathways_dir: ``gs://`` scratch location for Pathways. :param pathways: ``False`` (vLLM
        on a one-VM slice) runs the server alone in one pod that holds the chips.
    :param image: server image (default: the engine's); :param http_image: JetStream's HTTP front
        end; :param pathways_version: tag of the Pathways server and proxy images.
    :param config: JetStream's MaxText config file; :param server_args: more MaxText ``key=value``
        settings (JetStream) or ``vllm serve`` arguments, one list item each (vLLM).
    :param env: environment of the server container (``{"NAME": "value"}`` or EnvVar dicts).
    :param num_prompts: :param request_rate: requests per second or ``"inf"``;
        :param max_output_length: output tokens per request; :param max_concurrency: vLLM only:
        at most this many requests in flight.
    :param dataset: the engine's dataset, by default its generated prompts (vLLM: ``random``, ``sharegpt``, ``sonnet``, ``burstgpt``,
        ``hf``, ``custom``, ``prefix_repetition``; JetStream: ``test``, ``sharegpt``, ``openorca``,
        ``mmlu``, ``math500``, ``longcontext``, ``prefix_cache_test``); :param dataset_path: its
        file (not for ``random``, ``prefix_repetition``, ``test``); :param tokenizer:
        ``--tokenizer``; :param benchmark_args: more flags, each a list item.
    :param results_uri: ``gs://`` object (``….json``) or directory for the result JSON; a
        directory gets ``<server name>.json``, one object per task instance.
    :param benchmark_image: image with the benchmark (default: ``image``); :param
        benchmark_script: its entry point (``vllm``; JetStream's ``benchmark_serving.py`` path).
    :param startup_timeout: seconds to wait for the server (scheduling, restore, warm-up);
        default 1800, sized for a 405B restore. :param benchmark_timeout: seconds for the Job.
    :param verify_checkpoint: check ``<step>/commit_success.txt`` before requesting a slice.
    :param deferrable: wait for the benchmark Job in the triggerer (default: ``[operators]
        default_deferrable``). The server's start-up is waited for in the worker either way: it
        ends with a health check through the service proxy, and a crash must be read from logs.
    :param poll_interval: seconds between looks; :param cleanup_timeout: seconds to wait for the
        deleted pods to go.
    :param manifest: instead of the server parameters, a LeaderWorkerSet the user already has (a
        dict, YAML/JSON text or a ``.yaml``/``.yml``/``.json`` file in the DAG folder), with at most
        a Service beside it; ``engine`` says what it runs (:func:`pathways_airflow.spec.manifest.read_server_manifest`).
    :param main_container: with ``manifest``: the leader's container that runs the engine's server,
        when the rule cannot tell.
    """

    template_fields: Sequence[str] = (
        *_SERVING_TEMPLATE_FIELDS, "num_prompts", "request_rate", "max_output_length", "dataset", "dataset_path",
        "tokenizer", "max_concurrency", "benchmark_args", "results_uri", "benchmark_image", "benchmark_script",
        "benchmark_env", "benchmark_timeout",
    )
    template_fields_renderers = {
        **_InferenceServerOperator.template_fields_renderers, "benchmark_args": "py", "benchmark_env": "json"
    }
    lineage_rule = benchmark_rule

    def __init__(
        self,
        *,
        num_prompts: int | str,
        request_rate: float | str,
        max_output_length: int | str,
        results_uri: str,
        dataset: str | None = None,
        dataset_path: str | None = None,
        tokenizer: str | None = None,
        max_concurrency: int | str | None = None,
        benchmark_args: Sequence[str] | None = None,
        benchmark_image: str | None = None,
        benchmark_script: str | None = None,
        benchmark_env: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        benchmark_timeout: int | str = 3600,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_prompts = num_prompts
        self.request_rate = request_rate
        self.max_output_length = max_output_length
        self.dataset = dataset
        self.results_uri = results_uri
        self.dataset_path = dataset_path
        self.tokenizer = tokenizer
        self.max_concurrency = max_concurrency
        self.benchmark_args = benchmark_args
        self.benchmark_image = benchmark_image
        self.benchmark_script = benchmark_script
        self.benchmark_env = benchmark_env
        self.benchmark_timeout = benchmark_timeout
        self.deferrable = deferrable
        self.validate(only_known=True)

    def benchmark(self) -> BenchmarkRun:
        engine = self.serving_engine()
        return build_benchmark(
            engine=engine,
            model_name=getattr(self, engine.benchmark_model),
            dataset=self.dataset,
            num_prompts=self.num_prompts,
            request_rate=self.request_rate,
            max_output_length=self.max_output_length,
            dataset_path=self.dataset_path,
            tokenizer=self.tokenizer,
            max_concurrency=self.max_concurrency,
            extra_args=self.benchmark_args,
            image=self.benchmark_image, server_image=self.user_server().image if self.manifest is not None else self.image,
            script=self.benchmark_script,
            env=self.benchmark_env,
            image_pull_policy=self.image_pull_policy,
            timeout_seconds=self.benchmark_timeout,
            service_account_name=self.service_account_name,
        )

    def _problems(self, only_known: bool, context: Context | None = None) -> list[SpecProblem]:
        problems = super()._problems(only_known, context)
        if not isinstance(self.deferrable, bool):
            problems.append(SpecProblem("deferrable", self.deferrable, "must be True or False", ("True", "False")))
        if not (self.manifest is not None and (problems or only_known and self.understood_later())):
            try:
                self.benchmark()
            except InvalidWorkloadSpec as error:
                known = {(p.field, repr(p.value)) for p in problems}
                found = known_problems(error.problems, {f: getattr(self, f) for f in _BENCHMARK_FIELDS}) if only_known else error.problems
                problems.extend(p for p in found if (p.field, repr(p.value)) not in known)
        if not (only_known and looks_templated(self.results_uri)):
            problem = results_uri_problem(self.results_uri)
            if problem:
                problems.append(problem)
        return problems

    def result_uri(self, names: ServingNames) -> str:
        return result_object_uri(self.results_uri, names.lws)

    def render_manifests(self, context: Context | None = None) -> list[dict[str, Any]]:
        """The LeaderWorkerSet, Service and benchmark Job exactly as they would be applied (a dry run)."""
        manifests = self.server_manifests(context)
        return [*manifests, self._benchmark_job(context, self.benchmark(), self.names(context))]

    def _benchmark_job(self, context: Context | None, run: BenchmarkRun, names: ServingNames) -> dict[str, Any]:
        labels, annotations = self._labels(context)
        return render_benchmark_job(
            run,
            name=names.job,
            namespace=self.namespace,
            service=names.service,
            result_uri=self.result_uri(names),
            labels=labels,
            annotations=annotations,
        )

    def execute(self, context: Context) -> dict[str, Any]:
        self.validate(context=context)
        server, run, names = self.server(), self.benchmark(), self.names(context)
        self._preflight(server, self.result_uri(names))
        with self._torn_down():
            self._serve(context, server, names)
            self._start_benchmark(context, run, names)
            deadline, limit = job_deadline(
                time.time(), run.timeout_seconds, self.deadline(context), f"{TASK_LIMIT} ({self.execution_timeout})"
            )
            from pathways_airflow.triggers.job import BatchJobTrigger

            trigger = BatchJobTrigger(
                name=names.job,
                namespace=self.namespace,
                target=self.hook.resolved_target().to_dict(),
                poll_interval=self.poll_interval,
                deadline=deadline,
                also_delete=[{"kind": LEADERWORKERSET.kind, "name": names.lws}, {"kind": SERVICE.kind, "name": names.service}],
            )
            if self.deferrable:
                self.defer(trigger=trigger, method_name="execute_complete", kwargs={"limit": limit})
            event = self.wait_here(trigger)
            return self._benchmark_result(event, names, limit)

    def execute_complete(
        self, context: Context, event: dict[str, Any] | None = None, limit: str = ""
    ) -> dict[str, Any]:
        """Read how the benchmark Job ended and its result, then delete the server and the Job."""
        if event is None:  # resumed with no event (a task left deferred, run again by hand): look again
            return self.execute(context)
        if self.manifest is not None:  # its name prefix and namespace, read again in this process
            self.validate(context=context)
        names = self.names(context)
        for resource, name in ((LEADERWORKERSET, names.lws), (SERVICE, names.service), (JOB, names.job)):
            self.holding(resource, self.namespace, name)
        with self._torn_down():
            return self._benchmark_result(event, names, limit)

    def _start_benchmark(self, context: Context, run: BenchmarkRun, names: ServingNames) -> None:
        """Create the Job, or adopt this task's running or finished one; replace a failed one."""
        manifest = self._benchmark_job(context, run, names)
        self.raise_if_stopped()
        self.holding(JOB, self.namespace, names.job)
        poll = deletion_poll(self.poll_interval)
        self.hook.create_job_or_adopt(manifest, self.task_identity(context).key, timeout=self.cleanup_timeout, poll=poll)
        self.holding(JOB, self.namespace, names.job)  # again: a kill that raced the create deletes what it made
        self.log.info(
            "benchmarking %s:%d with %d prompts at %s requests/s, max output length %d",
            names.service, run.engine.benchmark_port, run.num_prompts, run.request_rate, run.max_output_length,
        )

    def _benchmark_result(self, payload: Mapping[str, Any], names: ServingNames, limit: str) -> dict[str, Any]:
        """The metrics of a Job that completed; the failure's exception for any other end."""
        event = JobEvent.from_payload(payload)
        failure = self.serving.benchmark_failure(names.job, event.outcome) if event.status == FAILED else None
        error = job_end_exception(event, f"benchmark Job {self.namespace}/{names.job}", limit=limit, failure=failure)
        if error is not None:
            raise error
        self.serving.log_benchmark_output(names.job)
        engine, result_uri = self.serving_engine(), self.result_uri(names)
        with opened_storage(self.gcp_conn_id) as client:
            data = read_object(client, result_uri)
        try:
            metrics = result_metrics(data, engine, result_uri)
        except ValueError as unreadable:
            raise UserCodeError(str(unreadable)) from None
        return self.reported({**metrics, "result_uri": result_uri, "engine": engine.name})


class DeployInferenceServerOperator(_InferenceServerOperator):
    """Deploy a serving engine's server and wait until it serves (an Airflow setup task).

    Takes the server parameters of :class:`InferenceBenchmarkOperator`, or its ``manifest=``. Returns ``name`` (the
    LeaderWorkerSet), ``service``, ``namespace``, ``engine``, ``http_port`` (8000: vLLM's OpenAI
    API and ``/health``; JetStream's ``/generate`` and ``/healthcheck``), ``benchmark_port``
    (vLLM 8000, JetStream's gRPC 9000) and ``task_key``. A teardown task cannot run when its
    setup failed, so if the server does not come up this task deletes it itself; once it serves,
    deleting it is :class:`~pathways_airflow.operators.teardown.TeardownInferenceServerOperator`'s job (or killing this task's retry).
    """

    template_fields: Sequence[str] = _SERVING_TEMPLATE_FIELDS

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validate(only_known=True)

    def execute(self, context: Context) -> dict[str, Any]:
        self.validate(context=context)
        server, names = self.server(), self.names(context)
        self._preflight(server)
        with self._torn_down(keep_on_success=True):
            self._serve(context, server, names)
        return {
            "name": names.lws,
            "service": names.service,
            "namespace": self.namespace,
            "engine": server.engine.name,
            "http_port": server.engine.http_port,
            "benchmark_port": server.engine.benchmark_port,
            "task_key": self.task_identity(context).key,
        }


__all__ = [
    "DeployInferenceServerOperator",
    "InferenceBenchmarkOperator",
]

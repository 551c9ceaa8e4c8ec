"""``LocalCluster``: a GKE cluster with TPU slices and the Pathways stack, on loopback, in-process.

The Kubernetes API (:mod:`.apiserver`) over HTTP on 127.0.0.1, the controllers a GKE cluster
with PathwaysJob, JobSet, Kueue and LeaderWorkerSet runs, kubelets that run stand-in programs
(:mod:`.programs`), and a real GCS emulator (fake-gcs-server). The real ``kubernetes`` and
``kubernetes_asyncio`` clients, ``kubectl`` and ``google-cloud-storage`` work against it
unchanged: point them at :attr:`LocalCluster.kubeconfig` and :attr:`LocalCluster.gcs_endpoint`.

It runs on its own event loop in a background thread, so synchronous code (pytest, ``airflow
dags test``) can use it; every public method is safe to call from any thread.

Scenarios inject what production throws at a workload — host maintenance with notice,
Spot preemption, slice loss, user-code failure, Kueue eviction, API errors, slow calls,
dropped watches and history compaction — as methods of this class, also reachable over HTTP
(``POST /_local/scenarios/<name>``) while ``pathways-airflow local-cluster`` runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import tempfile
import threading
import warnings
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import yaml
from aiohttp import web

from pathways_airflow_testing.crds import load_crds
from pathways_airflow_testing.scheduling import is_ready
from pathways_airflow_testing.apiserver import ApiServer
from pathways_airflow_testing.clock import VirtualClock
from pathways_airflow_testing.controllers.base import Controller
from pathways_airflow_testing.controllers.job import JobController
from pathways_airflow_testing.controllers.jobset import JobSetController, checked_feature_gates
from pathways_airflow_testing.controllers.kubelet import Kubelet
from pathways_airflow_testing.controllers.kueue import KueueController
from pathways_airflow_testing.controllers.lws import LeaderWorkerSetController
from pathways_airflow_testing.controllers.pathways_servers import PathwaysServers
from pathways_airflow_testing.controllers.pathwaysjob import PathwaysJobController
from pathways_airflow_testing.controllers.scheduler import Scheduler
from pathways_airflow_testing.faults import FaultRule, Faults
from pathways_airflow_testing.errors import ApiError
from pathways_airflow_testing.kinds import VISIBILITY_GROUP, KindRegistry, kind_from_resource_kind
from pathways_airflow_testing.logs import LogStore
from pathways_airflow_testing.nodes import (
    ACTIVE_MAINTENANCE_LABEL,
    IMPENDING_TERMINATION_TAINT,
    NODEPOOL_LABEL,
    OUT_OF_SERVICE_TAINT,
    PERFORM_MAINTENANCE_LABEL,
    SCHEDULED_MAINTENANCE_LABEL,
    NodePool,
    default_node_pools,
    node_manifests,
)
from pathways_airflow_testing.rbac import Authorizer
from pathways_airflow_testing.store import Store, copy_of

log = logging.getLogger(__name__)
T = TypeVar("T")

SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."


class SchemaChecksOff(UserWarning):
    """The local cluster has no CRD schemas: it accepts custom resources a real cluster refuses."""


_warned_schema_checks_off = False


def warn_schema_checks_off() -> None:
    """Say once per process that nothing checks custom resources, and how to turn the checks on."""
    global _warned_schema_checks_off
    if _warned_schema_checks_off:
        return
    _warned_schema_checks_off = True
    warnings.warn(
        "LocalCluster has no CRD schemas, so it accepts PathwaysJobs, JobSets, Kueue objects and "
        "LeaderWorkerSets that a real API server refuses (a misspelt field, an unknown machine type). "
        "Give it the CRDs your cluster runs: LocalCluster(crds=[DIR]), $PATHWAYS_AIRFLOW_CRDS=DIR or "
        "pytest --pathways-crds DIR, where DIR holds e.g. `kubectl get crd pathwaysjobs.pathways-job.pathways.domain "
        "jobsets.jobset.x-k8s.io -o yaml` from that cluster. crds=[] turns the checks off without this warning.",
        SchemaChecksOff,
        stacklevel=3,
    )


class LocalCluster:
    """A local GKE + Pathways cluster. Use as a context manager, or ``start()`` / ``stop()``.

    :param node_pools: the node pools (default: a CPU pool, 3 × v5e 2x4 and 2 × v6e 4x4 slices).
    :param crds: CRD YAML files or directories; objects of those kinds are validated against
        their schemas (422 Invalid, as on a real API server). Default: ``$PATHWAYS_AIRFLOW_CRDS``.
        With neither, custom resources are stored unchecked and the cluster says so once, as a
        ``SchemaChecksOff`` warning: pass ``crds=[]`` to turn the checks off without it.
    :param speed: how many simulated seconds pass per real second (3600: an hour a second).
    :param rbac: enforce RBAC for tokens other than the admin's (see :meth:`service_account_kubeconfig`).
    :param gcs: start the GCS emulator; ``buckets`` are created in it.
    :param kueue: create a ClusterQueue with every TPU chip as quota and a LocalQueue
        ``multislice-queue`` in ``default``.
    :param slice_loss_detection: simulated seconds after a Pathways worker is lost before the
        user's program on the head fails (as JAX notices an unavailable slice).
    :param jobset_feature_gates: the JobSet controller's feature gates to turn on, as its
        ``--feature-gates`` flag does; each is alpha and off by default, as upstream. Known:
        ``ExecutionAttemptsTracking`` (JobSet 0.13, KEP-1282: ``status.executionAttempts`` and the
        ``jobset.sigs.k8s.io/execution-attempt`` annotation; see :mod:`.controllers.jobset`).
    """

    def __init__(
        self,
        *,
        node_pools: Sequence[NodePool] | None = None,
        crds: Sequence[str | os.PathLike[str]] | None = None,
        speed: float = 1.0,
        rbac: bool = False,
        gcs: bool = True,
        buckets: Sequence[str] = ("pathways-demo",),
        kueue: bool = True,
        namespaces: Sequence[str] = ("default",),
        history: int = 100_000,
        bookmark_interval: float = 1.0,
        slice_loss_detection: float = 30.0,
        jobset_feature_gates: Sequence[str] = (),
    ):
        self.node_pools = list(node_pools) if node_pools is not None else default_node_pools()
        if crds is None and os.environ.get("PATHWAYS_AIRFLOW_CRDS"):
            crds = [os.environ["PATHWAYS_AIRFLOW_CRDS"]]
        if crds is None:
            warn_schema_checks_off()
        self._crd_paths = list(crds or ())
        self.clock = VirtualClock(speed)
        self.kinds = KindRegistry()
        self.store = Store(self.kinds, self.clock, history=history)
        self.logs = LogStore()
        self.faults = Faults()
        self.authorizer = Authorizer(enforce_rbac=rbac)
        self.authorizer.store = self.store
        self._buckets = list(buckets)
        self._use_gcs = gcs
        self._use_kueue = kueue
        self._namespaces = list(namespaces)
        self._bookmark_interval = bookmark_interval
        self._slice_loss_detection = slice_loss_detection
        self._jobset_feature_gates = tuple(jobset_feature_gates)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._controllers: list[Controller] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self.gcs_emulator: Any = None
        self.gcs_access: Any = None
        self.api: ApiServer | None = None
        self.kubelet: Kubelet | None = None
        self.server = ""
        self.kubeconfig = ""
        self.gcs_endpoint = ""

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def token(self) -> str:
        """The admin bearer token the kubeconfig carries."""
        return self.authorizer.admin_token

    def start(self) -> "LocalCluster":
        if self._thread is not None:
            return self
        self._tmpdir = tempfile.TemporaryDirectory(prefix="pathways-local-cluster-")
        if self._use_gcs:
            from pathways_airflow_testing.gcs import GcsEmulator

            self.gcs_emulator = GcsEmulator(buckets=self._buckets)
            self.gcs_emulator.start()
            self.gcs_endpoint = self.gcs_emulator.endpoint
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, args=(ready,), name="pathways-local-cluster", daemon=True)
        self._thread.start()
        ready.wait()
        try:
            self.call(self._astart())
        except BaseException:
            self.stop()
            raise
        self.kubeconfig = self._write_kubeconfig(self.token, "admin")
        return self

    def _run_loop(self, ready: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(ready.set)
        self._loop.run_forever()

    async def _astart(self) -> None:
        for kind in load_crds(self._crd_paths).values():
            self.kinds.add(kind_from_resource_kind(kind))
        if self.gcs_emulator is not None:
            from pathways_airflow_testing.gcs import AsyncGcs

            self.gcs_access = AsyncGcs(self.gcs_endpoint)
        self._seed()
        self.api = ApiServer(
            self.store,
            self.logs,
            faults=self.faults,
            authorizer=self.authorizer,
            port_lookup=self.port_lookup,
            bookmark_interval=self._bookmark_interval,
            local_handler=self._local_request,
            subresource_handlers={"pendingworkloads": self._pending_workloads},
        )
        self.kubelet = Kubelet(self)
        self._controllers = [
            Scheduler(self),
            self.kubelet,
            JobController(self),
            JobSetController(self, feature_gates=self._jobset_feature_gates),
            PathwaysJobController(self),
            PathwaysServers(self, detection_seconds=self._slice_loss_detection),
            KueueController(self),
            LeaderWorkerSetController(self),
        ]
        for controller in self._controllers:
            controller.start()
        for controller in self._controllers:
            controller.enqueue(("", "*"))
        self._runner = web.AppRunner(self.api.app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.server = f"http://127.0.0.1:{port}"

    def _seed(self) -> None:
        namespaces = self.kinds.lookup("", "v1", "namespaces")
        nodes = self.kinds.lookup("", "v1", "nodes")
        crds = self.kinds.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert namespaces and nodes and crds
        for name in dict.fromkeys(["default", "kube-system", "kube-public", *self._namespaces]):
            self.store.create(namespaces, {"metadata": {"name": name}})
        for pool in self.node_pools:
            for node in node_manifests(pool):
                self.store.create(nodes, node)
        for path in self._crd_paths:
            files = sorted(Path(path).glob("*.yaml")) if Path(path).is_dir() else [Path(path)]
            for file in files:
                for document in yaml.load_all(file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                    if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                        if self.store.find(crds, None, document["metadata"]["name"]) is None:
                            self.store.create(crds, document)
        if self._use_kueue:
            from pathways_airflow_testing.kueue_setup import default_queue_objects

            for manifest in default_queue_objects(self.node_pools):
                kind = self.kinds.by_kind(manifest["apiVersion"], manifest["kind"])
                if kind is not None:
                    self.store.create(kind, manifest)

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            try:
                self.call(self._astop(), timeout=30)
            except Exception:
                log.exception("local cluster: error while stopping")
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
        self._loop = None
        self._thread = None
        if self.gcs_emulator is not None:
            self.gcs_emulator.stop()
            self.gcs_emulator = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    async def _astop(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self.api is not None:
            self.api.drop_watches()
        for controller in reversed(self._controllers):
            await controller.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.gcs_access is not None:
            await self.gcs_access.close()

    # --- running things on the cluster's loop ------------------------------------------------

    def call(self, work: Coroutine[Any, Any, T] | Callable[[], T], timeout: float | None = 60) -> T:
        """Run a coroutine or a function on the cluster's loop and return its result."""
        assert self._loop is not None, "the cluster is not running"
        if threading.current_thread() is self._thread:
            raise RuntimeError("LocalCluster.call() from the cluster's own loop would deadlock; await instead")
        if asyncio.iscoroutine(work):
            return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

        async def run() -> T:
            return work()  # type: ignore[operator]

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # --- kubeconfig --------------------------------------------------------------------------

    def _write_kubeconfig(self, token: str, user: str) -> str:
        assert self._tmpdir is not None
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local-gke", "cluster": {"server": self.server}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "local-gke", "context": {"cluster": "local-gke", "user": user, "namespace": "default"}}],
            "current-context": "local-gke",
            "preferences": {},
        }
        path = Path(self._tmpdir.name) / f"kubeconfig-{user.replace(':', '-')}-{secrets.token_hex(3)}"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return str(path)

    def client_environment(self, kubeconfig: str | None = None) -> dict[str, str]:
        """What clients need to find this cluster, as environment variables: ``KUBECONFIG``,
        ``STORAGE_EMULATOR_HOST``, and the Airflow connections the provider uses by default
        (``kubernetes_default`` for the cluster; ``google_cloud_default``, anonymous, for the GCS
        emulator), so ``airflow dags test`` and in-process tasks work with no other setup.

        ``kubeconfig``: authenticate with it instead of the admin's (a service account's, say)."""
        kubeconfig = kubeconfig or self.kubeconfig
        env = {
            "KUBECONFIG": kubeconfig,
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig}}),
        }
        if self.gcs_endpoint:
            env["STORAGE_EMULATOR_HOST"] = self.gcs_endpoint
            env["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = json.dumps(
                {"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "local"}}
            )
        return env

    @contextlib.contextmanager
    def client_environment_set(self, kubeconfig: str | None = None) -> Iterator[dict[str, str]]:
        """:meth:`client_environment` in ``os.environ`` for the block; what was there before comes back after."""
        environment = self.client_environment(kubeconfig)
        saved = {key: os.environ.get(key) for key in environment}
        os.environ.update(environment)
        try:
            yield environment
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def service_account_kubeconfig(self, namespace: str, name: str) -> str:
        """A kubeconfig that authenticates as ``system:serviceaccount:<namespace>:<name>``."""
        token = self.authorizer.add_service_account_token(namespace, name)
        return self._write_kubeconfig(token, f"system:serviceaccount:{namespace}:{name}")

    # --- what tests and stand-ins ask ----------------------------------------------------------

    def record_event(self, involved: dict[str, Any], reason: str, message: str, *, type_: str = "Normal", component: str = "") -> None:
        events = self.kinds.lookup("", "v1", "events")
        assert events is not None
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        now = self.clock.timestamp()
        self.store.create(
            events,
            {
                "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": namespace},
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion"),
                    "kind": involved.get("kind"),
                    "name": meta["name"],
                    "namespace": meta.get("namespace", ""),
                    "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": {"component": component},
                "reportingComponent": component,
            },
        )

    def port_lookup(self, plural: str, namespace: str, name: str, port: int | str | None) -> tuple[str, int] | None:
        """The loopback address behind a pod's or a service's port (for the API's proxy)."""
        assert self.kubelet is not None
        if plural == "pods":
            runtime = self.kubelet.runtimes.get((namespace, name))
            local = runtime.container_port(port) if runtime else None
            return ("127.0.0.1", local) if local else None
        services = self.kinds.lookup("", "v1", "services")
        assert services is not None
        service = self.store.find(services, namespace, name)
        if service is None:
            return None
        target: int | str | None = port
        for item in service["spec"].get("ports") or ():
            if port in (None, "") or str(item.get("port")) == str(port) or item.get("name") == port:
                target = item.get("targetPort", item.get("port"))
                break
        selector = service["spec"].get("selector") or {}
        for (pod_namespace, _), runtime in sorted(self.kubelet.runtimes.items()):
            pod = self.store.find(self.kinds.lookup("", "v1", "pods"), pod_namespace, runtime.name)  # type: ignore[arg-type]
            if pod is None or pod_namespace != namespace or runtime.phase != "Running":
                continue
            labels = pod["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in selector.items()):
                local = runtime.container_port(target)
                if local:
                    return ("127.0.0.1", local)
        return None

    async def resolve(self, host: str, port: int) -> tuple[str, int] | None:
        """A cluster DNS name (service or pod hostname) and port → the loopback address serving it."""
        if host in ("localhost", "127.0.0.1", "0.0.0.0"):
            return ("127.0.0.1", port)
        parts = host.split(".")
        name = parts[0]
        namespace = parts[1] if len(parts) > 1 and parts[1] != "svc" else None
        for ns in ([namespace] if namespace else self._known_namespaces()):
            address = self.port_lookup("services", ns, name, port)
            if address:
                return address
        assert self.kubelet is not None
        for runtime in self.kubelet.runtimes.values():
            pod = self.store.find(self.kinds.lookup("", "v1", "pods"), runtime.namespace, runtime.name)  # type: ignore[arg-type]
            if pod and (pod["spec"].get("hostname") == name or runtime.name == name):
                local = runtime.container_port(port)
                if local:
                    return ("127.0.0.1", local)
        return None

    def _known_namespaces(self) -> list[str]:
        namespaces = self.kinds.lookup("", "v1", "namespaces")
        assert namespaces is not None
        names = [n["metadata"]["name"] for n in self.store.list(namespaces)]
        return sorted(names, key=lambda n: n != "default")

    # --- object access for tests -------------------------------------------------------------

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = "default") -> dict[str, Any] | None:
        """A copy of an object, or ``None``."""

        def read() -> dict[str, Any] | None:
            found = self.kinds.by_kind(api_version, kind)
            assert found is not None, f"unknown kind {api_version} {kind}"
            obj = self.store.find(found, namespace if found.namespaced else None, name)
            return copy_of(obj) if obj else None

        return self.call(read)

    def list(self, api_version: str, kind: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Copies of the objects of a kind (in a namespace, with labels)."""

        def read() -> list[dict[str, Any]]:
            found = self.kinds.by_kind(api_version, kind)
            assert found is not None, f"unknown kind {api_version} {kind}"
            items = self.store.list(found, namespace)
            wanted = labels or {}
            return [copy_of(o) for o in items if all((o["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]

        return self.call(read)

    def apply(self, manifest: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
        """Create an object (admission and schema checks as through the API)."""

        def create() -> dict[str, Any]:
            kind = self.kinds.by_kind(manifest["apiVersion"], manifest["kind"])
            assert kind is not None, f"unknown kind {manifest['apiVersion']} {manifest['kind']}"
            assert self.api is not None
            self.api._check_schema(kind, manifest, strict=False)
            return copy_of(self.store.create(kind, manifest, namespace=namespace if kind.namespaced else None))

        return self.call(create)

    def read_log(self, namespace: str, pod: str, container: str) -> list[str]:
        def read() -> list[str]:
            found = self.logs.find(namespace, pod, container)
            return [line for _, line in found.lines] if found else []

        return self.call(read)

    @property
    def request_counts(self) -> dict[str, int]:
        assert self.api is not None
        return dict(self.api.request_counts)

    # --- scenarios: API faults ----------------------------------------------------------------

    def inject_fault(
        self,
        path_pattern: str = ".*",
        *,
        status: int | None = 500,
        count: int = 1,
        methods: Iterable[str] = (),
        retry_after: int | None = None,
        latency: float = 0.0,
        watch: bool | None = None,
    ) -> FaultRule:
        """The next ``count`` requests matching answer ``status`` (or wait ``latency`` real seconds)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        return self.faults.add(
            FaultRule(path_pattern, status, count, tuple(m.upper() for m in methods), retry_after, latency, watch)
        )

    def clear_faults(self) -> None:
        self.faults.clear()

    def drop_watches(self) -> int:
        """Cut every open watch; clients must notice and re-watch."""
        assert self.api is not None
        return self.call(self.api.drop_watches)

    def slow_garbage_collector(self, seconds: float) -> None:
        """From now on the garbage collector reaches each level of a deleted owner's dependents
        ``seconds`` (simulated) late, as a busy one on GKE does; 0 puts it back, and it catches up
        on what it owes at once."""
        self.call(lambda: self.store.set_collector_delay(seconds))

    def set_jobset_feature_gates(self, gates: Sequence[str]) -> None:
        """From now on the JobSet controller runs with these gates on (and the others off), as it
        would restarted with another ``--feature-gates``: what it counted stays on the JobSets."""
        controller = next(c for c in self._controllers if isinstance(c, JobSetController))
        checked = checked_feature_gates(gates)
        self.call(lambda: setattr(controller, "feature_gates", checked))

    def compact(self) -> int:
        """Forget the event history: a watch from any earlier resourceVersion gets 410 Gone."""
        return self.call(self.store.compact)

    # --- scenarios: nodes ---------------------------------------------------------------------

    def _pool_nodes(self, node_pool: str) -> list[dict[str, Any]]:
        nodes = self.kinds.lookup("", "v1", "nodes")
        assert nodes is not None
        found = [n for n in self.store.list(nodes) if (n["metadata"].get("labels") or {}).get(NODEPOOL_LABEL) == node_pool]
        if not found:
            pools = sorted({(n["metadata"].get("labels") or {}).get(NODEPOOL_LABEL, "") for n in self.store.list(nodes)})
            raise ValueError(f"node_pool={node_pool!r}: no such node pool; valid: {', '.join(pools)}")
        return found

    def _update_nodes(self, node_pool: str, change: Callable[[dict[str, Any]], None]) -> None:
        nodes = self.kinds.lookup("", "v1", "nodes")
        assert nodes is not None
        for node in self._pool_nodes(node_pool):
            updated = copy_of(node)
            change(updated)
            updated["metadata"].pop("resourceVersion", None)
            stored = self.store.replace(nodes, updated)
            if updated.get("status") != stored.get("status"):
                self.store.write_status(nodes, updated)
            if is_ready(node) and not is_ready(updated):
                # The node lifecycle controller's record of the change (kubernetes
                # pkg/controller/util/node/controller_utils.go, RecordNodeStatusChange): it outlives
                # the condition, which a node that comes back overwrites.
                name = node["metadata"]["name"]
                self.record_event(
                    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": node["metadata"].get("uid")}},
                    "NodeNotReady", f"Node {name} status is now: NodeNotReady", component="node-controller",
                )

    async def _terminate_pods_on(self, node_pool: str, disruption_reason: str, *, grace: float | None, delete: bool = False) -> list[str]:
        assert self.kubelet is not None
        pods = self.kinds.lookup("", "v1", "pods")
        assert pods is not None
        node_names = {n["metadata"]["name"] for n in self._pool_nodes(node_pool)}
        victims = [p for p in self.store.list(pods) if p["spec"].get("nodeName") in node_names]
        stopped = await asyncio.gather(
            *(
                self.kubelet.terminate_pod(
                    p["metadata"]["namespace"],
                    p["metadata"]["name"],
                    disruption_reason=disruption_reason,
                    pod_reason="Terminated",
                    message=SHUTDOWN_MESSAGE,
                    grace=grace,
                )
                for p in victims
            )
        )
        names = [p["metadata"]["name"] for p, done in zip(victims, stopped) if done]
        if delete:
            for pod in victims:
                meta = pod["metadata"]
                if self.store.find(pods, meta["namespace"], meta["name"]) is not None:
                    self.store.delete(pods, meta["namespace"], meta["name"])
        return names

    def maintenance(
        self,
        node_pool: str,
        *,
        notice: float = 0.0,
        duration: float = 600.0,
        grace: float | None = None,
        wait: bool = True,
    ) -> None:
        """Host maintenance on a node pool (a whole TPU slice), as GKE runs it.

        ``cloud.google.com/scheduled-maintenance-time`` appears ``notice`` simulated seconds
        ahead, or less if someone starts it sooner (GKE's manual start: any node of the pool
        labelled ``cloud.google.com/perform-maintenance=true``, noticed within
        ``MANUAL_START_POLL`` simulated seconds); then the nodes get ``cloud.google.com/active-node-maintenance`` and the
        ``impending-node-termination`` taint, their pods are shut down (``DisruptionTarget``,
        ``Failed``/``Terminated``, exit 143 after their grace period), the stopped VMs' nodes go
        ``Ready=Unknown``, and after ``duration`` the nodes come back clean and Ready. With ``wait`` this returns once the pods are down.
        """
        self._pool_nodes(node_pool)
        started = threading.Event()

        async def run() -> None:
            when = int(self.clock.now() + notice)
            self._update_nodes(node_pool, lambda n: n["metadata"]["labels"].__setitem__(SCHEDULED_MAINTENANCE_LABEL, str(when)))
            while self.clock.now() < when and not self._maintenance_asked_for(node_pool):
                await self.clock.sleep(min(self.MANUAL_START_POLL, when - self.clock.now()))

            def begin(node: dict[str, Any]) -> None:
                node["metadata"]["labels"][ACTIVE_MAINTENANCE_LABEL] = "ONGOING"
                node["spec"]["unschedulable"] = True
                _taint(node, IMPENDING_TERMINATION_TAINT, "true", "NoSchedule")

            self._update_nodes(node_pool, begin)
            await self._terminate_pods_on(node_pool, "TerminationByKubelet", grace=grace)
            # The TPU VMs stop for the maintenance: their kubelets stop posting status.
            self._update_nodes(node_pool, lambda n: _set_ready(n, False, "NodeStatusUnknown", self.clock.timestamp()))
            started.set()
            await self.clock.sleep(duration)
            self._update_nodes(node_pool, lambda n: (_clear_maintenance(n), _set_ready(n, True, "KubeletReady", self.clock.timestamp())))

        self.call(lambda: self._spawn(run()))
        if wait:
            started.wait(timeout=max(30.0, self.clock.real_seconds(notice) + 30))

    MANUAL_START_POLL = 30.0
    """Simulated seconds between looks for a manual start (GKE takes tens of seconds to begin one)."""

    def slices_of(self, pod: dict[str, Any]) -> Any:
        """What a pod's program learns of its TPU slices: a Pathways head's elastic slices, or ``None``."""
        servers = next((c for c in self._controllers if isinstance(c, PathwaysServers)), None)
        return servers.slices_of(pod) if servers is not None else None

    def _maintenance_asked_for(self, node_pool: str) -> bool:
        return any((n["metadata"].get("labels") or {}).get(PERFORM_MAINTENANCE_LABEL) == "true" for n in self._pool_nodes(node_pool))

    def preempt_spot(self, node_pool: str, *, downtime: float = 300.0, wait: bool = True) -> None:
        """Spot preemption of a node pool: 30 s notice, pods shut down with a 15 s grace."""
        self._pool_nodes(node_pool)
        started = threading.Event()

        async def run() -> None:
            self._update_nodes(node_pool, lambda n: _taint(n, IMPENDING_TERMINATION_TAINT, "true", "NoSchedule"))
            await self._terminate_pods_on(node_pool, "TerminationByKubelet", grace=15.0)
            self._update_nodes(node_pool, lambda n: _set_ready(n, False, "NodeShutdown", self.clock.timestamp()))
            started.set()
            await self.clock.sleep(downtime)
            self._update_nodes(node_pool, lambda n: (_lift_spot_termination(n), _set_ready(n, True, "KubeletReady", self.clock.timestamp())))

        self.call(lambda: self._spawn(run()))
        if wait:
            started.wait(timeout=60)

    def lose_slice(self, node_pool: str, *, downtime: float = 600.0, wait: bool = True, out_of_service: bool = False) -> None:
        """A slice's hosts stop responding: nodes NotReady, pods evicted by the taint manager.

        With ``out_of_service``, the nodes shut down without notice and are marked as such (the
        ``node.kubernetes.io/out-of-service:NoExecute`` taint of a non-graceful node shutdown,
        kubernetes/api core/v1/well_known_taints.go): the pod garbage collector deletes their pods
        (``DisruptionTarget`` reason ``DeletionByPodGC``) until the taint is lifted after ``downtime``."""
        self._pool_nodes(node_pool)
        started = threading.Event()

        def shut_down(node: dict[str, Any]) -> None:
            _set_ready(node, False, "NodeStatusUnknown", self.clock.timestamp())
            if out_of_service:
                _taint(node, OUT_OF_SERVICE_TAINT, "nodeshutdown", "NoExecute")

        def back(node: dict[str, Any]) -> None:
            _untaint(node, OUT_OF_SERVICE_TAINT)
            _set_ready(node, True, "KubeletReady", self.clock.timestamp())

        async def run() -> None:
            self._update_nodes(node_pool, shut_down)
            await self._terminate_pods_on(node_pool, "DeletionByPodGC" if out_of_service else "DeletionByTaintManager", grace=0.0, delete=True)
            started.set()
            await self.clock.sleep(downtime)
            self._update_nodes(node_pool, back)

        self.call(lambda: self._spawn(run()))
        if wait:
            started.wait(timeout=60)

    def fail_pod(self, namespace: str, pod: str, exit_code: int = 1, container: str | None = None) -> bool:
        """The program in ``pod`` exits with ``exit_code`` now (a user-code failure)."""
        assert self.kubelet is not None
        return self.call(self.kubelet.fail_container(namespace, pod, container, exit_code))

    # --- scenarios: Kueue ----------------------------------------------------------------------

    def _kueue(self) -> KueueController:
        found = next((c for c in self._controllers if isinstance(c, KueueController)), None)
        if found is None:
            raise RuntimeError("this local cluster runs no Kueue controller")
        return found

    def workload_for(self, namespace: str, name: str, kind: str = "JobSet") -> str | None:
        """The name of the Kueue Workload of a queued JobSet (or ``kind="Job"``), or ``None``."""
        kueue = self._kueue()
        return self.call(lambda: kueue.workload_name_for(namespace, name, kind))

    def evict_workload(
        self,
        namespace: str,
        workload: str | None = None,
        *,
        jobset: str | None = None,
        reason: str = "Preempted",
        message: str | None = None,
        requeue_after: float | None = None,
    ) -> str:
        """Kueue evicts a Workload (by name, or the one of ``jobset``): the JobSet is suspended,
        its pods stop, the quota is released, and the Workload is requeued and admitted again
        after ``requeue_after`` simulated seconds once quota allows. Returns the Workload name."""
        kueue = self._kueue()

        def run() -> str:
            name = workload or (kueue.workload_name_for(namespace, jobset) if jobset else None)
            if not name:
                raise ValueError(f"jobset={jobset!r} workload={workload!r}: name a Workload, or a JobSet that has one")
            return kueue.evict(namespace, name, reason, message, requeue_after=requeue_after)

        return self.call(run)

    def set_quota(self, cluster_queue: str, flavor: str, chips: int) -> None:
        """Set a ClusterQueue's ``google.com/tpu`` quota for one flavor (0 makes the queue full)."""
        kueue = self._kueue()
        self.call(lambda: kueue.set_quota(cluster_queue, flavor, chips))

    # --- the private HTTP path ----------------------------------------------------------------

    SCENARIOS = (
        "maintenance",
        "preempt_spot",
        "lose_slice",
        "fail_pod",
        "inject_fault",
        "clear_faults",
        "drop_watches",
        "compact",
        "evict_workload",
        "set_quota",
    )

    def _pending_workloads(self, kind: Any, target: Any, query: Mapping[str, str]) -> dict[str, Any]:
        """``GET /apis/visibility.kueue.x-k8s.io/v1beta2/[namespaces/<ns>/]{localqueues,clusterqueues}/<name>/pendingworkloads``."""
        kueue = next((c for c in self._controllers if isinstance(c, KueueController)), None)
        if kind.group != VISIBILITY_GROUP or kueue is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        try:
            limit, offset = int(query.get("limit", 1000)), int(query.get("offset", 0))
        except ValueError:
            raise ApiError(400, "BadRequest", "limit and offset must be integers") from None
        return kueue.pending_workloads(target.namespace, target.name, limit=min(max(limit, 0), 4000), offset=max(offset, 0))

    async def _local_request(self, request: web.Request) -> web.Response:
        """``POST /_local/scenarios/<name>`` with JSON keyword arguments runs a scenario."""
        parts = request.path.strip("/").split("/")
        if request.method != "POST" or len(parts) != 3 or parts[1] != "scenarios" or parts[2] not in self.SCENARIOS:
            return web.json_response({"error": f"POST /_local/scenarios/<name>; names: {', '.join(self.SCENARIOS)}"}, status=404)
        try:
            kwargs = await request.json() if request.can_read_body else {}
        except json.JSONDecodeError:
            return web.json_response({"error": "the body must be a JSON object of keyword arguments"}, status=400)
        method = getattr(self, parts[2])
        if parts[2] in ("maintenance", "preempt_spot", "lose_slice"):
            kwargs["wait"] = False
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, lambda: method(**kwargs))
        except (TypeError, ValueError) as error:
            return web.json_response({"error": str(error)}, status=400)
        return web.json_response({"ok": True, "result": result if isinstance(result, (int, str, bool, type(None))) else str(result)})


def _clear_maintenance(node: dict[str, Any]) -> None:
    labels = node["metadata"]["labels"]
    labels.pop(ACTIVE_MAINTENANCE_LABEL, None)
    labels.pop(SCHEDULED_MAINTENANCE_LABEL, None)
    labels.pop(PERFORM_MAINTENANCE_LABEL, None)
    node["spec"].pop("unschedulable", None)
    _untaint(node, IMPENDING_TERMINATION_TAINT)


def _lift_spot_termination(node: dict[str, Any]) -> None:
    """A Spot VM back from preemption: its termination taint goes (unless a maintenance under way
    holds it), while maintenance GKE announced for its pool stays announced."""
    if ACTIVE_MAINTENANCE_LABEL not in node["metadata"]["labels"]:
        _untaint(node, IMPENDING_TERMINATION_TAINT)


def _taint(node: dict[str, Any], key: str, value: str, effect: str) -> None:
    """Put taint ``key`` on the node, replacing one with the same key (a node holds a key once)."""
    _untaint(node, key)
    node["spec"]["taints"] = [*node["spec"]["taints"], {"key": key, "value": value, "effect": effect}]


def _untaint(node: dict[str, Any], key: str) -> None:
    node["spec"]["taints"] = [t for t in node["spec"].get("taints") or () if t["key"] != key]


def _set_ready(node: dict[str, Any], ready: bool, reason: str, now: str) -> None:
    """The node's ``Ready`` condition, its ``lastTransitionTime`` moved only when the status flips
    (as the node lifecycle controller and the kubelet write it): the trace a recovered node keeps."""
    status = node.setdefault("status", {})
    previous = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})
    value = "True" if ready else "Unknown"
    since = previous.get("lastTransitionTime") if previous.get("status") == value else now
    ready_condition = {"type": "Ready", "status": value, "reason": reason, "message": reason}
    if since:
        ready_condition["lastTransitionTime"] = since
    status["conditions"] = [ready_condition]

"""The kubelet of every node: runs bound pods' containers as stand-in programs and reports status.

Each container is an asyncio task running the stand-in :func:`choose_program` picks for it.
Native sidecars (init containers with ``restartPolicy: Always``) start first and are stopped
after the main containers end; plain init containers run to completion first. Restart policy,
restart counts, exit codes, readiness (with HTTP readiness probes against published ports),
logs and the pod phase behave as a kubelet's do.

Killing a pod's containers (pod deleted, node shut down, a fault injected) cancels their tasks:
a program sees ``asyncio.CancelledError`` as its SIGTERM and has the grace period to finish.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import aiohttp

from pathways_airflow_testing.controllers.base import Controller, Key, set_condition
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.programs import choose_program
from pathways_airflow_testing.programs.base import ProgramContext
from pathways_airflow_testing.store import StoreEvent, copy_of

log = logging.getLogger(__name__)

SIGTERM_EXIT = 143
STOPPING = ("Killing", "NodeShutdown")
"""Kill reasons of a pod on its way out (deleted, its node shut down): its containers never restart."""
SIGKILL_EXIT = 137
RESTART_BACKOFF_SECONDS = 10.0


class Killed(Exception):
    """Why a container was stopped from outside, and the exit code it dies with."""

    def __init__(self, exit_code: int, reason: str):
        super().__init__(reason)
        self.exit_code = exit_code
        self.reason = reason


@dataclass
class ContainerRuntime:
    name: str
    sidecar: bool
    init: bool
    spec: dict[str, Any]
    task: asyncio.Task[int] | None = None
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    restarts: int = 0
    ready: bool = False
    started: bool = False
    kill: Killed | None = None


@dataclass
class PodRuntime:
    """What the kubelet knows about one pod it runs."""

    namespace: str
    name: str
    uid: str
    node: str
    containers: dict[str, ContainerRuntime]
    ports: dict[int, int] = field(default_factory=dict)
    named_ports: dict[str, int] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None
    extra_conditions: list[dict[str, Any]] = field(default_factory=list)
    started_at: str | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    grace: float = 30.0
    """``spec.terminationGracePeriodSeconds``: what a deleted pod's containers get between SIGTERM and SIGKILL."""
    slices: Any = None
    """A Pathways head's elastic slices (:meth:`PathwaysServers.slices_of`), else ``None``."""

    def container_port(self, port: int | str | None) -> int | None:
        """The loopback port serving a container port (number or name; ``None`` = the first)."""
        if port in (None, ""):
            return next(iter(self.ports.values()), None)
        if isinstance(port, str) and not port.isdigit():
            number = self.named_ports.get(port)
            return self.ports.get(number) if number is not None else None
        return self.ports.get(int(port))


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command and args (``$$`` escapes, unknown stays)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR.sub(replace, text)


def field_value(pod: Mapping[str, Any], path: str) -> str:
    """A ``fieldRef.fieldPath`` of the downward API."""
    metadata = pod["metadata"]
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        return (metadata.get(match.group(1)) or {}).get(match.group(2), "")
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.nodeName": pod["spec"].get("nodeName"),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    return str(simple.get(path) or "")


class Kubelet(Controller):
    """Runs every bound pod; one instance stands for the kubelets of all nodes."""

    name = "kubelet"

    def __init__(self, cluster: Any):
        super().__init__(cluster)
        self.pods = self.kind("", "v1", "pods")
        self.secrets = self.kind("", "v1", "secrets")
        self.configmaps = self.kind("", "v1", "configmaps")
        self.runtimes: dict[Key, PodRuntime] = {}
        self._session: aiohttp.ClientSession | None = None

    def watched_kinds(self) -> Iterable[Kind]:
        return (self.pods,)

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        obj = event.obj
        if event.type == "DELETED" or obj["spec"].get("nodeName"):
            return ((event.namespace, event.name),)
        return ()

    async def stop(self) -> None:
        for runtime in list(self.runtimes.values()):
            await self._kill(runtime, Killed(SIGTERM_EXIT, "Killing"), grace=0)
        if self._session:
            await self._session.close()
        await super().stop()

    async def reconcile(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        pod = self.store.find(self.pods, namespace, name)
        runtime = self.runtimes.get(key)
        if runtime and (pod is None or pod["metadata"]["uid"] != runtime.uid):
            # A deleted pod is stopped as the kubelet stops one: SIGTERM, its grace period, SIGKILL
            # (the API server here drops the object at once instead of waiting for the kubelet).
            self.runtimes.pop(key, None)
            await self._kill(runtime, Killed(SIGTERM_EXIT, "Killing"), grace=runtime.grace)
            runtime = None
        if pod is None or not pod["spec"].get("nodeName") or runtime is not None:
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        self._start(pod)

    # --- running -----------------------------------------------------------------------------

    def _start(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        containers: dict[str, ContainerRuntime] = {}
        for c in spec.get("initContainers") or ():
            containers[c["name"]] = ContainerRuntime(c["name"], c.get("restartPolicy") == "Always", True, c)
        for c in spec.get("containers") or ():
            containers[c["name"]] = ContainerRuntime(c["name"], False, False, c)
        runtime = PodRuntime(meta["namespace"], meta["name"], meta["uid"], spec["nodeName"], containers)
        runtime.grace = float(spec.get("terminationGracePeriodSeconds", 30))
        runtime.slices = self.cluster.slices_of(pod)
        for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
            for port in c.get("ports") or ():
                if port.get("name"):
                    runtime.named_ports[port["name"]] = port["containerPort"]
        runtime.started_at = self.clock.timestamp()
        self.runtimes[(runtime.namespace, runtime.name)] = runtime
        runtime.task = asyncio.get_running_loop().create_task(self._run_pod(runtime), name=f"pod {meta['namespace']}/{meta['name']}")

    async def _run_pod(self, runtime: PodRuntime) -> None:
        pod = self.store.find(self.pods, runtime.namespace, runtime.name)
        if pod is None:
            return
        policy = pod["spec"].get("restartPolicy", "Always")
        try:
            self._publish(runtime)
            for container in [c for c in runtime.containers.values() if c.init]:
                if container.sidecar:
                    container.task = asyncio.create_task(self._run_container(runtime, pod, container, "Always"))
                    continue
                container.task = asyncio.create_task(self._run_container(runtime, pod, container, "OnFailure" if policy != "Never" else "Never"))
                code = await container.task
                if code != 0:
                    await self._finish(runtime, "Failed", None, None)
                    return
            runtime.phase = "Running"
            mains = [c for c in runtime.containers.values() if not c.init]
            for container in mains:
                container.task = asyncio.create_task(self._run_container(runtime, pod, container, policy))
            self._publish(runtime)
            codes = await asyncio.gather(*(c.task for c in mains if c.task))
            phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
            await self._finish(runtime, phase, None, None)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet: pod %s/%s crashed", runtime.namespace, runtime.name)
            await self._finish(runtime, "Failed", "Error", "the local kubelet failed to run the pod")

    async def _finish(self, runtime: PodRuntime, phase: str, reason: str | None, message: str | None) -> None:
        """Stop the sidecars, then report the pod's final phase."""
        for container in runtime.containers.values():
            if container.sidecar and container.task and not container.task.done():
                container.kill = Killed(0, "Completed")
                container.task.cancel()
                await asyncio.gather(container.task, return_exceptions=True)
        runtime.phase, runtime.reason, runtime.message = phase, reason, message
        self._publish(runtime)
        runtime.finished.set()
        for container in runtime.containers.values():
            self.cluster.logs.log(runtime.namespace, runtime.name, container.name).finish()

    async def _run_container(self, runtime: PodRuntime, pod: dict[str, Any], container: ContainerRuntime, policy: str) -> int:
        spec = container.spec
        while True:
            env = self._environment(pod, spec)
            argv = [expand(part, env) for part in [*(spec.get("command") or ()), *(spec.get("args") or ())]]
            program = choose_program(argv, env, spec.get("image", ""))
            logbook = self.cluster.logs.log(runtime.namespace, runtime.name, container.name)
            ctx = ProgramContext(
                namespace=runtime.namespace,
                pod_name=runtime.name,
                container_name=container.name,
                argv=argv,
                env=env,
                clock=self.clock,
                gcs=self.cluster.gcs_access,
                log=lambda line, _log=logbook: _log.append(self.clock.now(), line),
                publish_port=lambda cport, hport: self._on_publish(runtime, cport, hport),
                resolve=self.cluster.resolve,
                labels=dict(pod["metadata"].get("labels") or {}),
                annotations=dict(pod["metadata"].get("annotations") or {}),
                slices=runtime.slices,
            )
            started = self.clock.timestamp()
            container.state = {"running": {"startedAt": started}}
            container.started = True
            container.kill = None
            container.ready = "readinessProbe" not in spec
            self._publish(runtime)
            probe = asyncio.create_task(self._probe(runtime, container)) if "readinessProbe" in spec else None
            code: int
            reason: str
            try:
                code = int(await program(ctx))
                reason = "Completed" if code == 0 else "Error"
            except asyncio.CancelledError:
                if container.kill is None:
                    container.kill = Killed(SIGTERM_EXIT, "Error")
                code, reason = container.kill.exit_code, container.kill.reason
            except Exception as error:  # a stand-in crashing is a container crashing
                logbook.append(self.clock.now(), f"Traceback (most recent call last): {type(error).__name__}: {error}")
                code, reason = 1, "Error"
            finally:
                if probe:
                    probe.cancel()
            killed = container.kill
            container.ready = False
            container.state = {"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": self.clock.timestamp()}}
            restart = policy == "Always" or (policy == "OnFailure" and code != 0)
            if killed is not None and killed.reason in (*STOPPING, "Completed"):
                restart = False
            if not restart:
                self._publish(runtime)
                return code
            container.last_state = container.state
            container.restarts += 1
            container.state = {"waiting": {"reason": "CrashLoopBackOff" if code else "Completed"}}
            self._publish(runtime)
            await self.clock.sleep(RESTART_BACKOFF_SECONDS)

    def _on_publish(self, runtime: PodRuntime, container_port: int, host_port: int) -> None:
        runtime.ports[int(container_port)] = int(host_port)

    async def _probe(self, runtime: PodRuntime, container: ContainerRuntime) -> None:
        probe = container.spec["readinessProbe"]
        http = probe.get("httpGet")
        period = float(probe.get("periodSeconds", 10))
        await self.clock.sleep(float(probe.get("initialDelaySeconds", 0)))
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        while True:
            ready = True
            if http:
                port = runtime.container_port(http.get("port"))
                ready = False
                if port is not None:
                    try:
                        async with self._session.get(f"http://127.0.0.1:{port}{http.get('path', '/')}") as response:
                            ready = 200 <= response.status < 400
                    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                        ready = False
            if ready != container.ready:
                container.ready = ready
                self._publish(runtime)
            await asyncio.sleep(max(0.02, self.clock.real_seconds(period)))

    def _environment(self, pod: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
        namespace = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        index = (pod["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index")
        if index is not None:
            env["JOB_COMPLETION_INDEX"] = index
        env["HOSTNAME"] = pod["spec"].get("hostname") or pod["metadata"]["name"]
        for item in spec.get("env") or ():
            if "value" in item:
                env[item["name"]] = expand(str(item["value"]), env)
                continue
            source = item.get("valueFrom") or {}
            if "fieldRef" in source:
                env[item["name"]] = field_value(pod, source["fieldRef"].get("fieldPath", ""))
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret = self.store.find(self.secrets, namespace, ref.get("name", ""))
                raw = ((secret or {}).get("data") or {}).get(ref.get("key", ""))
                env[item["name"]] = base64.b64decode(raw).decode() if raw else ""
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                config = self.store.find(self.configmaps, namespace, ref.get("name", ""))
                env[item["name"]] = ((config or {}).get("data") or {}).get(ref.get("key", ""), "")
            else:
                env[item["name"]] = ""
        return env

    # --- status ------------------------------------------------------------------------------

    def _publish(self, runtime: PodRuntime) -> None:
        pod = self.store.find(self.pods, runtime.namespace, runtime.name)
        if pod is None or pod["metadata"]["uid"] != runtime.uid:
            return
        status = copy_of(pod.get("status") or {})
        now = self.clock.timestamp()
        status["phase"] = runtime.phase
        status["hostIP"] = status["podIP"] = "127.0.0.1"
        status["podIPs"] = [{"ip": "127.0.0.1"}]
        status["startTime"] = runtime.started_at
        for key, value in (("reason", runtime.reason), ("message", runtime.message)):
            if value:
                status[key] = value
            else:
                status.pop(key, None)

        def container_status(c: ContainerRuntime) -> dict[str, Any]:
            item: dict[str, Any] = {
                "name": c.name,
                "image": c.spec.get("image", ""),
                "imageID": "",
                "ready": c.ready,
                "restartCount": c.restarts,
                "started": c.started and "running" in c.state,
                "state": c.state,
            }
            if c.last_state:
                item["lastState"] = c.last_state
            return item

        status["containerStatuses"] = [container_status(c) for c in runtime.containers.values() if not c.init]
        inits = [container_status(c) for c in runtime.containers.values() if c.init]
        if inits:
            status["initContainerStatuses"] = inits
        mains = [c for c in runtime.containers.values() if not c.init]
        sidecars = [c for c in runtime.containers.values() if c.sidecar]
        initialized = runtime.phase != "Pending" or all(c.started for c in runtime.containers.values() if c.init)
        ready = runtime.phase == "Running" and all(c.ready for c in mains) and all(c.ready or "readinessProbe" not in c.spec for c in sidecars)
        conditions = status.get("conditions") or []
        for type_, value in (
            ("Initialized", initialized),
            ("ContainersReady", ready),
            ("Ready", ready),
            ("PodReadyToStartContainers", True),
        ):
            reason = "" if value else ("PodCompleted" if runtime.phase in ("Succeeded", "Failed") else "ContainersNotReady")
            conditions = set_condition(conditions, type_, "True" if value else "False", reason, "", now)
        for extra in runtime.extra_conditions:
            conditions = set_condition(conditions, extra["type"], extra["status"], extra["reason"], extra["message"], now)
        status["conditions"] = conditions
        self.set_status(self.pods, pod, status)

    # --- killing -------------------------------------------------------------------------------

    async def _kill(self, runtime: PodRuntime, why: Killed, grace: float) -> None:
        """Cancel every container (SIGTERM), give them ``grace`` simulated seconds, then stop."""
        tasks = []
        for container in runtime.containers.values():
            if container.task and not container.task.done():
                # SIGTERM once: a container already stopping (its pod deleted, its node shut down)
                # keeps its grace period; one that crashed and waits to restart is stopped for good.
                if container.kill is None or container.kill.reason not in STOPPING:
                    container.kill = why
                    container.task.cancel()
                tasks.append(container.task)
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=self.clock.real_seconds(grace) or 0.5)
            for task in pending:
                task.cancel()
        if runtime.task and not runtime.task.done():
            runtime.task.cancel()
            await asyncio.gather(runtime.task, return_exceptions=True)

    async def terminate_pod(
        self,
        namespace: str,
        name: str,
        *,
        exit_code: int = SIGTERM_EXIT,
        disruption_reason: str | None,
        pod_reason: str | None,
        message: str,
        grace: float | None = None,
    ) -> bool:
        """Stop a running pod as a node shutdown or eviction does; it ends ``Failed``.

        With ``disruption_reason`` the pod gets ``DisruptionTarget=True`` with that reason, the
        condition Kubernetes sets before it disrupts a pod (what a Job's pod failure policy and
        our classifier look for).
        """
        runtime = self.runtimes.get((namespace, name))
        pod = self.store.find(self.pods, namespace, name)
        if runtime is None or pod is None or runtime.phase in ("Succeeded", "Failed"):
            return False
        if disruption_reason:
            runtime.extra_conditions.append(
                {"type": "DisruptionTarget", "status": "True", "reason": disruption_reason, "message": message}
            )
        if grace is None:
            grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        await self._kill(runtime, Killed(exit_code, "NodeShutdown"), grace)
        for container in runtime.containers.values():
            if "running" in container.state or "waiting" in container.state:
                container.state = {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Error",
                        "startedAt": container.state.get("running", {}).get("startedAt", runtime.started_at),
                        "finishedAt": self.clock.timestamp(),
                    }
                }
            container.ready = False
        runtime.phase, runtime.reason, runtime.message = "Failed", pod_reason, message
        self._publish(runtime)
        runtime.finished.set()
        for container in runtime.containers.values():
            self.cluster.logs.log(namespace, name, container.name).finish()
        return True

    async def fail_container(self, namespace: str, name: str, container: str | None, exit_code: int) -> bool:
        """Make one container exit with ``exit_code`` now, as a crashing program would."""
        runtime = self.runtimes.get((namespace, name))
        if runtime is None:
            return False
        candidates = [c for c in runtime.containers.values() if not c.init and (container is None or c.name == container)]
        for target in candidates[:1]:
            if target.task and not target.task.done():
                target.kill = Killed(exit_code, "Error")
                target.task.cancel()
                return True
        return False

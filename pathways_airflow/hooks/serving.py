"""A serving engine's server on the cluster: its objects created or adopted, the wait until it
serves, what its benchmark left in its pods, and the wait until its pods are gone.

The I/O half of a server's life, shared by the deploy, benchmark and teardown operators. Every
decision is the pure core's: where a start-up stands and whether the server crashed
(:func:`pathways_airflow.state.serving.server_progress`), which failure that is and how it is
worded (:mod:`pathways_airflow.run.messages`). The start-up is waited for in the worker, not the
triggerer: it ends with the engine's health check through the API server's service proxy, and a
crash is read from the container's log. Each look comes as soon as the LeaderWorkerSet changes
(:func:`pathways_airflow.hooks.changes.look_until`), at the latest every ``poll_interval``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pathways_airflow import well_known
from pathways_airflow.exceptions import KubernetesApiError, WorkloadDeletedError
from pathways_airflow.hooks.changes import look_until
from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.resources import LEADERWORKERSET, POD, Resource, resource_of
from pathways_airflow.run.messages import benchmark_failed, quoted_container_log, server_crashed, server_timed_out
from pathways_airflow.spec.arguments import DELETE_POLL_SECONDS
from pathways_airflow.spec.benchmark import BENCHMARK_CONTAINER
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.serving import InferenceServer, ServingNames
from pathways_airflow.state.disruption import pod_disruption
from pathways_airflow.state.jobs import JobOutcome
from pathways_airflow.state.serving import ServerProgress, first_crash, pod_selectors, server_progress


class ServingHook:
    """The servers of one namespace, through the task's :class:`PathwaysHook`, logged in the task's log."""

    def __init__(self, hook: PathwaysHook, namespace: str, *, log: logging.Logger, on_gke: bool = False) -> None:
        self.hook = hook
        self.namespace = namespace
        self.log = log
        self.on_gke = on_gke  # a log that cannot be read is then found in Cloud Logging

    def create_or_adopt(self, manifest: Mapping[str, Any], task_key: str) -> tuple[Resource, dict[str, Any]]:
        """Create the object, or adopt this task's own from an earlier try: its resource, and the live object."""
        adoption = self.hook.create_or_adopt(manifest, task_key)
        meta = manifest["metadata"]
        verb = "created" if adoption.created else "adopted this task's existing"
        self.log.info("%s %s %s/%s", verb, manifest["kind"], meta["namespace"], meta["name"])
        return resource_of(dict(manifest)), adoption.obj

    def wait_until_serving(
        self, names: ServingNames, server: InferenceServer, *, interval: float, before_look: Callable[[], None]
    ) -> None:
        """Until the LeaderWorkerSet is Available and the engine's health check answers 200 through the Service.

        A crash of the engine's server container fails at once with its exit code and log; running
        out of ``startup_timeout`` fails with the leader's last log lines. ``before_look`` runs
        before each look (a killed task raises there).
        """
        started = time.monotonic()
        seen: dict[str, Any] = {"summary": None, "leaders": []}

        def step(lws: dict[str, Any] | None) -> ServerProgress | None:
            if lws is None:
                raise WorkloadDeletedError(f"LeaderWorkerSet {self.namespace}/{names.lws} was deleted while the server started")
            pods = self.hook.list(POD, self.namespace, label_selector=f"{well_known.LWS_NAME}={names.lws}")
            progress = server_progress(lws, pods, server.engine.container)
            if progress.summary != seen["summary"]:
                self.log.info("%s: %s (%.0fs)", names.lws, progress.summary, time.monotonic() - started)
                seen["summary"] = progress.summary
            if progress.leader_uid and progress.leader_uid not in seen["leaders"]:
                seen["leaders"].append(progress.leader_uid)
                if len(seen["leaders"]) > 1:
                    self.log.warning("%s: the group was recreated (%d leaders so far)", names.lws, len(seen["leaders"]))
            if progress.crash is not None:
                crash = progress.crash
                quoted = self.quoted(crash.pod, crash.container, previous=crash.restarted)
                raise server_crashed(self.namespace, names.lws, crash, quoted)
            return progress if progress.available and self.healthy(names.service, server.engine) else None

        deadline = started + server.startup_seconds
        serving = look_until(
            self.hook, LEADERWORKERSET, self.namespace, names.lws, step, deadline=deadline, interval=interval, before_look=before_look
        )
        if serving is None:
            quoted = self.quoted(f"{names.lws}-0", server.engine.container)
            raise server_timed_out(
                self.namespace, names.lws, server.startup_seconds, seen["summary"], len(seen["leaders"]), quoted
            )
        model, waited = server.hf_model or server.model_name, time.monotonic() - started
        self.log.info("%s serves %s with %s (after %.0fs)", names.service, model, server.engine.name, waited)

    def healthy(self, service: str, engine: Engine) -> bool:
        """Does the engine's health check answer 200 through the service proxy? "Still loading"
        answers are no; any other error status (403: no ``services/proxy``) is raised."""
        status, reason = self.hook.service_get_status(self.namespace, service, engine.http_port, engine.health_path)
        if status == 200:
            return True
        if status in engine.not_yet_serving:
            return False
        raise KubernetesApiError(f"GET {engine.health_path} of {self.namespace}/{service}: HTTP {status} {reason}")

    def quoted(self, pod: str, container: str, *, previous: bool = False) -> str:
        """The container's last log lines (of its run before the last restart with ``previous``, if any)."""
        lines = self.hook.read_log_tail(self.namespace, pod, container, previous=True) if previous else []
        lines = lines or self.hook.read_log_tail(self.namespace, pod, container)
        return quoted_container_log(lines, pod, container, on_gke=self.on_gke)

    def benchmark_failure(self, job: str, outcome: JobOutcome) -> Exception:
        """A failed benchmark Job's exception, from its pods: the crashed container's exit code and log, the disruption."""
        pods = self._pods_of(job)
        crash = first_crash(pods, BENCHMARK_CONTAINER)
        disruption = next((d for d in map(pod_disruption, pods) if d is not None), None)
        quoted = self.quoted(crash.pod, crash.container) if crash else ""
        return benchmark_failed(self.namespace, job, outcome, crash, disruption, quoted)

    def log_benchmark_output(self, job: str) -> None:
        for pod in self._pods_of(job):
            lines = self.hook.read_log_tail(self.namespace, pod["metadata"]["name"], BENCHMARK_CONTAINER)
            if lines:
                self.log.info("benchmark output:\n%s", "\n".join(lines))
                return

    def wait_gone(self, objects: Sequence[tuple[Resource, str]], *, timeout: float, poll: float = DELETE_POLL_SECONDS) -> None:
        """Until the deleted objects and their pods are gone (their TPUs are free), at most ``timeout`` seconds."""
        objects = list(objects)
        remaining = self.hook.wait_gone(self.namespace, objects, pod_selectors(objects), timeout=timeout, poll=poll)
        if remaining:
            self.log.warning("still terminating after %.0fs: %s", timeout, ", ".join(remaining))
        else:
            self.log.info("%s and their pods are gone", ", ".join(f"{r.kind}/{n}" for r, n in objects))

    def _pods_of(self, job: str) -> list[dict[str, Any]]:
        return self.hook.list(POD, self.namespace, label_selector=f"{well_known.JOB_NAME}={job}")


__all__ = ["ServingHook"]

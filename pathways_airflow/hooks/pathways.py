"""``PathwaysHook`` and ``AsyncPathwaysHook``: the Kubernetes API from the connections users have.

Connections come from the providers' hooks, so nothing new needs configuring: a Kubernetes
connection (``kubernetes_conn_id``: in-cluster, kubeconfig path or content, context) through
``KubernetesHook``, or a GKE cluster (``project_id`` + ``location`` + ``cluster_name`` +
``gcp_conn_id``, optionally ``impersonation_chain`` and ``use_dns_endpoint``) through the
google provider's GKE hooks.

Every resource is reached through one generic REST call on the resource's path
(:mod:`pathways_airflow.resources`) and comes back as the plain JSON dict the pure ``state``
core reads. One API client per hook (sync), or per event loop and cluster (async, shared while
in use and closed when idle): never a new client, connection pool or TLS context per call. Transient API
failures (429 — honouring ``Retry-After`` — 5xx, dropped connections) are retried with backoff.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, AsyncContextManager, AsyncIterator, Mapping, Sequence

from airflow.sdk import BaseHook
from tenacity import AsyncRetrying, Retrying

from pathways_airflow import well_known
from pathways_airflow.exceptions import BadSpecError, ForeignWorkloadError, InfrastructureError, KubernetesApiError, PermissionMissingError
from pathways_airflow.hooks import clients
from pathways_airflow.hooks.api import (
    JsonLines,
    LOG_START_BYTES,
    LOG_TAIL_BYTES,
    absent,
    an_object,
    api_error_message,
    call_options,
    describe,
    event_of,
    is_transient,
    json_body,
    list_of,
    log_query,
    object_path,
    retry_after_seconds,
    retry_options,
    status_of,
    tail_windows,
    whole_lines,
)
from pathways_airflow.hooks.clients import async_api_client, sync_api_client
from pathways_airflow.hooks.target import ClusterTarget
from pathways_airflow.resources import CLUSTER_QUEUE, JOB, LOCAL_QUEUE, NODE, PENDING_IN_LOCAL_QUEUE, POD, Resource, resource_of
from pathways_airflow.spec.names import TASK_KEY_LABEL
from pathways_airflow.state.jobs import job_outcome, run_again_on_retry

if TYPE_CHECKING:
    from pathways_airflow.state.model import Observation

LOG_TAIL_LINES = 30
"""How many log lines a failure quotes: enough for a traceback, few enough to read."""


@dataclass(frozen=True)
class Adoption:
    """The outcome of submitting a workload: the live object, and whether we created it now."""

    obj: dict[str, Any]
    created: bool


def ownership_problem(existing: Mapping[str, Any], task_key: str) -> str | None:
    """Why an existing object is not ours to adopt, or ``None`` if it carries our task key."""
    labels = (existing.get("metadata") or {}).get("labels") or {}
    if labels.get(TASK_KEY_LABEL) == task_key:
        return None
    owner = labels.get(TASK_KEY_LABEL)
    who = f"another task (task key {owner})" if owner else "something other than pathways-airflow"
    meta = existing.get("metadata") or {}
    return (
        f"{existing.get('kind')} {meta.get('namespace')}/{meta.get('name')} already exists and was created by {who}; "
        "refusing to adopt it. Delete it, or set name_prefix to choose another name."
    )


# --- the synchronous hook ------------------------------------------------------------------


class _ClusterHook(BaseHook):
    """What both hooks share: the cluster they talk to. Requests are prepared
    (:func:`~pathways_airflow.hooks.api.call_options`), retried
    (:func:`~pathways_airflow.hooks.api.retry_options`) and a 404 read
    (:func:`~pathways_airflow.hooks.api.absent`) by the same functions in both."""

    def __init__(self, target: ClusterTarget | None = None, *, outage_seconds: float | None = None, **target_fields: Any) -> None:
        super().__init__()
        self.target = target or ClusterTarget(**target_fields)
        self.outage_seconds = outage_seconds
        """How long a call rides out a failing API (:func:`~pathways_airflow.hooks.api.retry_options`;
        ``None``: the provider's limit): a wait given a shorter limit passes it on to its own calls."""


class PathwaysHook(_ClusterHook):
    """Synchronous access to PathwaysJobs, JobSets, Jobs, LeaderWorkerSets, pods, nodes and events."""

    conn_name_attr = "kubernetes_conn_id"
    hook_name = "Pathways on GKE"

    # connection ---------------------------------------------------------------------------

    def resolved_target(self) -> ClusterTarget:
        """The target with the GKE endpoint and CA resolved (one GKE API call, then cached)."""
        if not self.target.is_gke or self.target.cluster_url:
            return self.target
        from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
        from airflow.providers.google.cloud.operators.kubernetes_engine import GKEClusterAuthDetails

        cluster_hook = GKEHook(
            gcp_conn_id=self.target.gcp_conn_id,
            location=self.target.location,
            impersonation_chain=self.target.impersonation_chain,
        )
        url, ca = GKEClusterAuthDetails(
            cluster_name=self.target.cluster_name or "",
            project_id=self.target.project_id or "",
            use_internal_ip=False,
            use_dns_endpoint=self.target.use_dns_endpoint,
            cluster_hook=cluster_hook,
        ).fetch_cluster_info()
        self.target = replace(self.target, cluster_url=url, ssl_ca_cert=ca)
        return self.target

    @cached_property
    def api_client(self) -> Any:
        """One ``kubernetes`` ApiClient for the hook's life, with a configuration of its own; its
        thread pool and connections are closed with :meth:`close` or when the hook is collected."""
        client = sync_api_client(self.resolved_target() if self.target.is_gke else self.target)
        weakref.finalize(self, clients.close_sync_api_client, client)
        return client

    def close(self) -> None:
        """Close the API client's thread pool and connections (a later call builds a new client)."""
        client = self.__dict__.pop("api_client", None)
        if client is not None:
            clients.close_sync_api_client(client)

    def get_conn(self) -> Any:
        return self.api_client

    # the one REST call ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        raw: bool = False,
        attempts: int | None = None,
    ) -> Any:
        """Call the API with retries on transient failures (until it has failed for
        :attr:`outage_seconds`, or ``attempts`` tries in all); the JSON body as a dict (or raw text).
        A caller that polls anyway asks for one try: its own next look is the retry."""
        options = call_options(query, body, content_type)
        for attempt in Retrying(**retry_options(self.log, attempts, self.outage_seconds)):
            with attempt:
                data = self.api_client.call_api(path, method, **options).data
                return data.decode("utf-8", errors="replace") if raw else json_body(method, path, data)
        raise KubernetesApiError(f"{method} {path}: no attempt was made")  # pragma: no cover

    def get(self, resource: Resource, namespace: str | None, name: str, *, attempts: int | None = None) -> dict[str, Any] | None:
        path = object_path(resource, namespace, name)
        try:
            return an_object("GET", path, self.request("GET", path, attempts=attempts))
        except Exception as error:
            return absent(error)

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        attempts: int | None = None,
    ) -> list[dict[str, Any]]:
        body = self.request(
            "GET", resource.path(namespace), query={"labelSelector": label_selector, "fieldSelector": field_selector}, attempts=attempts
        )
        return list((body or {}).get("items") or [])

    def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        resource = resource_of(dict(manifest))
        namespace = manifest.get("metadata", {}).get("namespace")
        return self.request("POST", resource.path(namespace), body=dict(manifest))

    def delete(
        self, resource: Resource, namespace: str | None, name: str, *, propagation: str | None = None, attempts: int | None = None,
        uid: str | None = None,
    ) -> bool:
        """Delete with dependents (by default as :attr:`Resource.propagation` says); ``False`` if it
        was gone. With ``uid``, only that object: not one re-created under its name since it was read."""
        try:
            self.request("DELETE", object_path(resource, namespace, name), body=resource.delete_body(propagation, uid), attempts=attempts)
            return True
        except Exception as error:
            return absent(error, False, uid=uid)

    def create_or_adopt(self, manifest: Mapping[str, Any], task_key: str) -> Adoption:
        """Create the workload; if one with its name exists and is ours, adopt it instead.

        A 409 is not an error to retry but a question — who made the existing object? — answered
        by our task-key label. Someone else's object is never touched.
        """
        try:
            return Adoption(self.create(manifest), created=True)
        except Exception as error:
            if status_of(error) != 409:
                if status_of(error) in (400, 422):
                    raise BadSpecError(f"the cluster refused the {manifest.get('kind')}: {api_error_message(error)}") from None
                raise
        resource = resource_of(dict(manifest))
        meta = manifest["metadata"]
        existing = self.get(resource, meta.get("namespace"), meta["name"])
        if existing is None:  # deleted between our create and our read: create again
            return Adoption(self.create(manifest), created=True)
        problem = ownership_problem(existing, task_key)
        if problem:
            raise ForeignWorkloadError(problem)
        return Adoption(existing, created=False)

    def create_job_or_adopt(self, manifest: Mapping[str, Any], task_key: str, *, timeout: float, poll: float) -> Adoption:
        """Create a batch Job, or adopt this task's one from an earlier try, unless that one failed:
        then it is deleted and, once gone (at most ``timeout`` seconds), created again
        (:func:`~pathways_airflow.state.jobs.run_again_on_retry`)."""
        adoption = self.create_or_adopt(manifest, task_key)
        if adoption.created or not run_again_on_retry(adoption.obj):
            return adoption
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        self.log.info("Job %s/%s from an earlier try is %s; running it again", namespace, name, job_outcome(adoption.obj).summary())
        self.delete(JOB, namespace, name)
        if self.wait_gone(namespace, [(JOB, name)], timeout=timeout, poll=poll):
            raise InfrastructureError(f"Job {namespace}/{name} of an earlier try was still being deleted after {timeout:.0f} s")
        return self.create_or_adopt(manifest, task_key)

    # reads the operators and sensors need ---------------------------------------------------

    def task_workloads(self, resource: Resource, namespace: str, task_key: str) -> list[dict[str, Any]]:
        """Every workload a task created, in any attempt (found by its task-key label)."""
        return self.list(resource, namespace, label_selector=f"{TASK_KEY_LABEL}={task_key}")

    def observe(self, backend: str, name: str, namespace: str, *, submitted: bool = True) -> "Observation":
        """Everything the state core needs about one workload, read now."""
        from pathways_airflow.resources import JOBSET, KUEUE_WORKLOAD, PATHWAYSJOB
        from pathways_airflow.state.model import Observation, kueue_workload_of

        pathwaysjob = self.get(PATHWAYSJOB, namespace, name) if backend == "pathwaysjob" else None
        jobset = self.get(JOBSET, namespace, name)
        pods = self.list(POD, namespace, label_selector=well_known.jobset_selector(name)) if jobset else []
        kueue = None
        if jobset is not None:
            uid = jobset["metadata"].get("uid", "")
            try:
                found = self.list(KUEUE_WORKLOAD, namespace, label_selector=f"{well_known.KUEUE_JOB_UID}={uid}")
            except Exception as error:  # Kueue not installed: no Workload to read
                found = absent(error, [])
            kueue = kueue_workload_of(uid, found)
        return Observation(backend, name, namespace, pathwaysjob, jobset, tuple(pods), kueue, submitted)

    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.list(NODE, label_selector=label_selector)

    def nodes_if_permitted(self) -> list[dict[str, Any]] | None:
        """The cluster's nodes; ``None`` when this identity may not list them (no node then vouches
        for anything: the callers treat that as "cannot tell")."""
        try:
            return self.list_nodes()
        except Exception as error:
            if status_of(error) == 403:
                return None
            raise

    def pods_on_node_if_permitted(self, node: str) -> list[dict[str, Any]] | None:
        """Every pod bound to ``node``, in any namespace; ``None`` when this identity may not list
        pods cluster-wide (the callers then cannot tell an idle slice from a busy one)."""
        try:
            return self.list(POD, None, field_selector=f"spec.nodeName={node}")
        except Exception as error:
            if status_of(error) == 403:
                return None
            raise

    def start_node_maintenance(self, node: str) -> None:
        """Ask GKE to start the node's announced maintenance now (label ``perform-maintenance=true``)."""
        try:
            self.request(
                "PATCH",
                object_path(NODE, None, node),
                body={"metadata": {"labels": {well_known.PERFORM_MAINTENANCE: "true"}}},
                content_type="application/merge-patch+json",
            )
        except Exception as error:
            if status_of(error) == 403:
                raise PermissionMissingError(
                    f"may not label node {node} to start its maintenance: {api_error_message(error)}. "
                    "maintenance_window='start_now' needs patch on nodes (README, Permissions)"
                ) from None
            raise

    def wait_gone(
        self, namespace: str, objects: Sequence[tuple[Resource, str]], pod_selectors: Sequence[str] = (), *, timeout: float, poll: float = 2.0
    ) -> list[str]:
        """Until ``objects`` and the pods matching ``pod_selectors`` are gone, at most ``timeout`` seconds.

        A foreground delete returns while the pods still terminate, and the TPUs are free only
        once they are gone. Returns what is left when time ran out (``Kind/name``), else ``[]``.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = [f"{r.kind}/{n}" for r, n in objects if self.get(r, namespace, n) is not None]
            left += [f"Pod/{p['metadata']['name']}" for s in pod_selectors for p in self.list(POD, namespace, label_selector=s)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(max(0.0, min(poll, deadline - time.monotonic())))

    def service_get_status(self, namespace: str, service: str, port: int, path: str) -> tuple[int, str]:
        """``(HTTP status, reason)`` of one ``GET path`` on a Service's port through the API
        server's service proxy; ``(0, why)`` when no answer came.

        Sent once, not through :meth:`request`: its retries treat 500 and 503 as transient API
        failures and would back off for a minute on every poll, while a server's health check
        answers them while it loads.
        """
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = self.api_client.call_api(
                f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy{path}",
                "GET",
                header_params={"Accept": "*/*"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=30,
            )
            _ = response.data  # read to the end, so the pooled connection can carry the next request
            response.release_conn()
            return response.status, response.reason or ""
        except ApiException as error:
            return error.status or 0, f"{error.reason}: {error.body!r}"
        except (HTTPError, OSError) as error:
            return 0, describe(error)

    def read_log_tail(self, namespace: str, pod: str, container: str, lines: int = LOG_TAIL_LINES, *, previous: bool = False) -> list[str]:
        """The last ``lines`` lines a container wrote (of its run before the last restart with
        ``previous``), bounded in bytes as well as lines (:func:`bounded_tail`); empty if the log
        cannot be read."""
        windows = tail_windows(lines)
        asked = next(windows)
        try:
            while True:
                path, query = object_path(POD, namespace, pod, "log"), log_query(container, asked, LOG_TAIL_BYTES, previous)
                asked = windows.send(self.request("GET", path, query=query, raw=True))
        except StopIteration as done:
            return done.value
        except Exception as error:
            log_unread(self.log, error, namespace, pod, container)
            return []


def log_unread(log: Any, error: BaseException, namespace: str, pod: str, container: str) -> None:
    """Say why a log tail could not be read, unless the pod is gone (404): its log went with it,
    which is no news while a failed workload is being cleaned up."""
    if status_of(error) != 404:
        log.info("could not read the log of %s/%s (%s): %s", pod, container, namespace, describe(error))


# --- the asynchronous hook -----------------------------------------------------------------

def _import_client_modules(gke: bool) -> None:
    """Import what ``AsyncPathwaysHook._new_client`` needs (cached by ``sys.modules`` once done)."""
    import importlib

    importlib.import_module("kubernetes_asyncio.client")
    importlib.import_module("kubernetes_asyncio.config")
    if gke:
        importlib.import_module("airflow.providers.google.cloud.hooks.kubernetes_engine")
    else:
        importlib.import_module("airflow.providers.cncf.kubernetes.hooks.kubernetes")


class AsyncPathwaysHook(_ClusterHook):
    """Asynchronous API access for triggers: one client per (event loop, cluster), shared while used."""

    def api_client(self) -> AsyncContextManager[Any]:
        """``async with hook.api_client() as client``: the loop's client for this cluster, held for
        the block and closed when nobody holds it (:func:`~pathways_airflow.hooks.clients.shared_async_client`)."""
        return clients.shared_async_client(self.target.key, self._new_client)

    async def _new_client(self) -> Any:
        # Importing the Kubernetes client modules takes seconds. A triggerer runs every trigger
        # on one event loop: importing them there would stall all of its triggers (and its
        # watches' reconnects) that long, so the first client of a process imports them in a thread.
        await asyncio.to_thread(_import_client_modules, self.target.is_gke)
        return await async_api_client(self.target)

    @staticmethod
    async def close_all() -> None:
        """Close the clients of the running loop (at the end of a test or a process)."""
        await clients.close_shared_async_clients()

    async def _send(self, client: Any, method: str, path: str, options: Mapping[str, Any]) -> Any:
        """The raw response to one request (:func:`~pathways_airflow.hooks.api.call_options`); an
        ``ApiException`` for a non-2xx status.

        ``kubernetes_asyncio`` raises for error statuses only when it reads the body itself, so
        the check is made here, with the status, headers and body a caller needs.
        """
        response = await client.call_api(path, method, **options)
        if not 200 <= response.status <= 299:
            from kubernetes_asyncio.client.exceptions import ApiException

            try:
                text = (await response.read()).decode("utf-8", errors="replace")
            finally:
                response.release()
            error = ApiException(status=response.status, reason=response.reason)
            error.body = text
            error.headers = dict(response.headers)
            raise error
        return response

    async def request(
        self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None, content_type: str = "application/json",
        attempts: int | None = None, shape: type | None = None,
    ) -> Any:
        async for attempt in AsyncRetrying(**retry_options(self.log, attempts, self.outage_seconds)):
            with attempt:
                async with self.api_client() as client:
                    response = await self._send(client, method, path, call_options(query, body, content_type))
                    try:
                        data = await response.read()
                    finally:
                        response.release()
                return json_body(method, path, data, shape)
        raise KubernetesApiError(f"{method} {path}: no attempt was made")  # pragma: no cover

    async def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        path = object_path(resource, namespace, name)
        try:
            return an_object("GET", path, await self.request("GET", path))
        except Exception as error:
            return absent(error)

    async def list_page(
        self, resource: Resource, namespace: str | None = None, *, label_selector: str | None = None, field_selector: str | None = None,
        limit: int | None = None, continue_token: str | None = None, attempts: int | None = None, shape: type | None = None,
    ) -> dict[str, Any]:
        """One page of a list: its items (decoded to ``shape``: :func:`~pathways_airflow.hooks.api.decoded`),
        the list's resourceVersion (where a watch starts), and ``continue`` while a ``limit``ed list has more."""
        query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit, "continue": continue_token}
        return await self.request("GET", resource.path(namespace), query=query, attempts=attempts, shape=list_of(shape)) or {}

    async def list(
        self, resource: Resource, namespace: str | None = None, *, label_selector: str | None = None, field_selector: str | None = None,
        attempts: int | None = None,
    ) -> list[dict[str, Any]]:
        """The objects, as :meth:`PathwaysHook.list` returns them."""
        page = await self.list_page(resource, namespace, label_selector=label_selector, field_selector=field_selector, attempts=attempts)
        return list(page.get("items") or [])

    async def annotate(self, resource: Resource, namespace: str | None, name: str, annotations: Mapping[str, str]) -> bool:
        """Merge-patch annotations onto an object; ``False`` if it is gone."""
        try:
            await self.request(
                "PATCH",
                object_path(resource, namespace, name),
                body={"metadata": {"annotations": dict(annotations)}},
                content_type="application/merge-patch+json",
            )
            return True
        except Exception as error:
            return absent(error, False)

    async def delete(self, resource: Resource, namespace: str | None, name: str, *, propagation: str | None = None,
                     attempts: int | None = None, uid: str | None = None) -> bool:
        try:
            await self.request("DELETE", object_path(resource, namespace, name), body=resource.delete_body(propagation, uid), attempts=attempts)
            return True
        except Exception as error:
            return absent(error, False, uid=uid)

    async def watch(
        self,
        resource: Resource,
        namespace: str | None,
        resource_version: str,
        *,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        shape: type | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events from ``resource_version`` (with bookmarks) until the server closes the stream.

        Raises the API's error for a failed request; an ``ERROR`` event (e.g. 410 Gone) is yielded
        as it comes, for the caller to decide. Lines are read whole however long they are, objects decoded to ``shape``.
        """
        async with self.api_client() as client:
            query = {"watch": True, "resourceVersion": resource_version, "allowWatchBookmarks": True, "timeoutSeconds": timeout_seconds,
                     "labelSelector": label_selector}
            response = await self._send(client, "GET", resource.path(namespace), call_options(query, timeout=timeout_seconds + 30))
            lines = JsonLines(event_of(shape))
            try:
                async for chunk in response.content.iter_any():
                    for event in lines.feed(chunk):
                        yield event
            finally:
                response.release()

    async def queue_view(self, namespace: str, queue: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None] | None:
        """A LocalQueue, its pending workloads from Kueue's visibility API (a ``PendingWorkloadsSummary``)
        and its ClusterQueue: what :func:`~pathways_airflow.state.queue.queue_place` reads a
        workload's place from. ``None`` when the LocalQueue is gone, or the visibility API is not
        served (an older Kueue, or its visibility server off) or not permitted. The ClusterQueue is
        cluster-scoped: without leave to read it, it is ``None`` and the place comes without quota."""
        try:
            local = await self.get(LOCAL_QUEUE, namespace, queue)
            pending = await self.request("GET", PENDING_IN_LOCAL_QUEUE.path(namespace, queue, "pendingworkloads"), attempts=1) if local else None
        except Exception as error:
            if status_of(error) in (403, 404, 503):  # not served, or not ours to read: the wait says what Kueue's conditions say
                return None
            raise
        if local is None or not isinstance(pending, dict):
            return None
        cluster_queue = None
        try:
            cluster_queue = await self.get(CLUSTER_QUEUE, None, str((local.get("spec") or {}).get("clusterQueue", "")))
        except Exception as error:
            if status_of(error) != 403:
                raise
        return local, pending, cluster_queue

    async def list_nodes(self, label_selector: str | None = None, attempts: int | None = None) -> list[dict[str, Any]]:
        return await self.list(NODE, label_selector=label_selector, attempts=attempts)

    async def read_log_tail(self, namespace: str, pod: str, container: str, lines: int = LOG_TAIL_LINES) -> list[str]:
        """The last lines of a container's log, or of its previous run when it has restarted."""
        for previous in (False, True):
            windows = tail_windows(lines)
            asked = next(windows)
            try:
                async with self.api_client() as client:
                    while True:
                        query = log_query(container, asked, LOG_TAIL_BYTES, previous)
                        response = await self._send(client, "GET", object_path(POD, namespace, pod, "log"), call_options(query, timeout=30))
                        try:
                            asked = windows.send((await response.read()).decode("utf-8", errors="replace"))
                        finally:
                            response.release()
            except StopIteration as done:
                if done.value:
                    return done.value
            except Exception as error:
                log_unread(self.log, error, namespace, pod, container)
        return []

    async def read_log_start(self, namespace: str, pod: str, container: str, max_bytes: int = LOG_START_BYTES) -> list[str]:
        """The first lines a container wrote, within ``max_bytes`` (``limitBytes`` without
        ``tailLines`` keeps the beginning; :func:`whole_lines`); empty if the log cannot be read."""
        try:
            async with self.api_client() as client:
                query = call_options({"container": container, "limitBytes": max_bytes}, timeout=30)
                response = await self._send(client, "GET", object_path(POD, namespace, pod, "log"), query)
                try:
                    return whole_lines(await response.read(), max_bytes)
                finally:
                    response.release()
        except Exception as error:
            log_unread(self.log, error, namespace, pod, container)
            return []


__all__ = [
    "Adoption",
    "AsyncPathwaysHook",
    "ClusterTarget",
    "PathwaysHook",
    "api_error_message",
    "is_transient",
    "object_path",
    "ownership_problem",
    "retry_after_seconds",
    "status_of",
]

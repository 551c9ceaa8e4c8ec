"""API clients for one cluster target, each with a configuration of its own.

A triggerer serves every deferred task of a deployment from one process, and those tasks may
reach different clusters through different connections. The Kubernetes clients' config loaders
write into a process-wide default configuration unless they are handed one, and the cncf
provider's own loaders (before about 10.14) did exactly that: two clusters in one process
could end up talking through whichever was loaded last. So the clients here are built only
from public APIs, and always into a fresh ``Configuration``:

* the Airflow connection, read through ``KubernetesHook.get_connection`` (public; it also
  accepts a missing ``kubernetes_default``, as the cncf provider does);
* ``kubernetes`` / ``kubernetes_asyncio`` ``config.load_*`` with ``client_configuration=``;
* for GKE, the google provider's ``GKEKubernetesHook.get_conn()`` (which builds its own
  configuration) and ``GKEKubernetesAsyncHook.get_token()`` for the async bearer token.

The connection's fields are the cncf provider's Kubernetes connection extras (its
``hooks/kubernetes.py`` and connection docs): ``in_cluster``, ``kube_config_path``,
``kube_config`` (JSON or YAML text, or a dict), ``cluster_context``, ``disable_verify_ssl``,
each also under the legacy ``extra__kubernetes__`` prefix.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import tempfile
import time
import weakref
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from pathways_airflow.exceptions import BadSpecError

if TYPE_CHECKING:
    from pathways_airflow.hooks.target import ClusterTarget

LEGACY_PREFIX = "extra__kubernetes__"


@dataclass(frozen=True)
class KubeConfigSource:
    """Where a Kubernetes connection says its cluster is; no source set means "find it"
    (in-cluster when running in a pod, else the default kubeconfig, ``$KUBECONFIG`` included)."""

    in_cluster: bool = False
    config_file: str | None = None
    config_dict: Mapping[str, Any] | None = field(default=None, repr=False)
    context: str | None = None
    verify_ssl: bool = True

    @property
    def is_explicit(self) -> bool:
        return self.in_cluster or self.config_file is not None or self.config_dict is not None


def _extra(extras: Mapping[str, Any], name: str) -> Any:
    value = extras.get(name)
    return extras.get(LEGACY_PREFIX + name) if value is None else value


def _flag(value: Any) -> bool:
    """A connection flag: the UI stores booleans, environment URIs store strings."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def kube_config_source(extras: Mapping[str, Any], conn_id: str | None = None) -> KubeConfigSource:
    """Read a cncf Kubernetes connection's extras; refuse the combinations the provider refuses."""
    in_cluster = _flag(_extra(extras, "in_cluster"))
    config_file = _extra(extras, "kube_config_path") or None
    content = _extra(extras, "kube_config") or None
    chosen = [n for n, v in (("in_cluster", in_cluster), ("kube_config_path", config_file), ("kube_config", content)) if v]
    if len(chosen) > 1:
        raise BadSpecError(
            f"Kubernetes connection {conn_id!r} sets {', '.join(chosen)}: these are alternatives, set only one"
        )
    config_dict = None
    if content is not None:
        try:
            config_dict = content if isinstance(content, Mapping) else yaml.safe_load(content)
        except yaml.YAMLError as error:
            raise BadSpecError(f"Kubernetes connection {conn_id!r}: kube_config is not JSON or YAML: {error}") from None
        if not isinstance(config_dict, Mapping):
            raise BadSpecError(f"Kubernetes connection {conn_id!r}: kube_config is not a kubeconfig object")
    return KubeConfigSource(
        in_cluster=in_cluster,
        config_file=str(config_file) if config_file else None,
        config_dict=config_dict,
        context=_extra(extras, "cluster_context") or None,
        verify_ssl=not _flag(_extra(extras, "disable_verify_ssl")),
    )


def connection_source(conn_id: str | None) -> KubeConfigSource:
    """The source a connection names (no connection: find the cluster as kubectl would)."""
    if not conn_id:
        return KubeConfigSource()
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    return kube_config_source(KubernetesHook.get_connection(conn_id).extra_dejson, conn_id)


def default_kubeconfig() -> str | None:
    """``$KUBECONFIG`` as it is now (the clients read it once, when first imported), else the
    clients' own default (``~/.kube/config``)."""
    return os.environ.get("KUBECONFIG") or None


# --- synchronous (workers) ----------------------------------------------------------------------


def sync_api_client(target: "ClusterTarget") -> Any:
    """A ``kubernetes`` ApiClient for the target, with a configuration no other client shares."""
    if target.is_gke:
        from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesHook

        # The GKE hook builds an explicit configuration from the endpoint, CA and credentials.
        return GKEKubernetesHook(
            cluster_url=target.cluster_url,
            ssl_ca_cert=target.ssl_ca_cert,
            gcp_conn_id=target.gcp_conn_id,
            impersonation_chain=target.impersonation_chain,
            use_dns_endpoint=target.use_dns_endpoint,
        ).get_conn()
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    source = connection_source(target.kubernetes_conn_id)
    configuration = client.Configuration()
    if source.in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    elif source.config_dict is not None:
        config.load_kube_config_from_dict(dict(source.config_dict), context=source.context, client_configuration=configuration)
    elif source.config_file is not None:
        config.load_kube_config(config_file=source.config_file, context=source.context, client_configuration=configuration)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            config.load_kube_config(config_file=default_kubeconfig(), context=source.context, client_configuration=configuration)
    if not source.verify_ssl:
        configuration.verify_ssl = False
    return client.ApiClient(configuration=configuration)


def close_sync_api_client(api_client: Any) -> None:
    """Close a ``kubernetes`` ApiClient: its thread pool (``close``) and its pooled connections."""
    api_client.close()
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if pool_manager is not None:
        pool_manager.clear()


# --- asynchronous (triggers) --------------------------------------------------------------------


async def async_api_client(target: "ClusterTarget") -> Any:
    """A ``kubernetes_asyncio`` ApiClient for the target, with a configuration of its own."""
    from kubernetes_asyncio import client

    configuration = client.Configuration()
    if target.is_gke:
        await _configure_gke(configuration, target)
    else:
        await _configure_from_connection(configuration, target.kubernetes_conn_id)
    if configuration.proxy is None:
        configuration.proxy = environment_proxy(configuration.host)
    api_client = client.ApiClient(configuration=configuration)
    # kubernetes_asyncio opens its aiohttp session with trust_env=True, which makes aiohttp look
    # up the proxy environment and ~/.netrc on every request: a measurable share of a triggerer's
    # CPU with thousands of waits. The proxy is resolved above, once per client, as aiohttp would
    # (HTTP(S)_PROXY and NO_PROXY); Kubernetes credentials never come from .netrc.
    # ``_trust_env`` is one of ClientSession.ATTRS, the attributes aiohttp lets a caller set.
    api_client.rest_client.pool_manager._trust_env = False
    return api_client


def environment_proxy(host: str | None) -> str | None:
    """The proxy the environment names for ``host`` (``HTTPS_PROXY``/``HTTP_PROXY``, unless
    ``NO_PROXY`` exempts it), read once: what aiohttp's ``trust_env`` would find per request."""
    import urllib.parse
    import urllib.request

    if not host:
        return None
    url = urllib.parse.urlsplit(host)
    if not url.hostname or urllib.request.proxy_bypass(url.hostname):
        return None
    return urllib.request.getproxies().get(url.scheme or "https") or None


async def _configure_from_connection(configuration: Any, conn_id: str | None) -> None:
    from asgiref.sync import sync_to_async
    from kubernetes_asyncio import config
    from kubernetes_asyncio.config.config_exception import ConfigException

    # Reading a connection may reach the API server or a secrets backend: not on the event loop.
    # asgiref (not a bare thread) so that, in a triggerer, the Task SDK's request for the
    # connection goes back through the loop's own channel to the supervisor.
    source = await sync_to_async(connection_source)(conn_id)
    if source.in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    elif source.config_dict is not None:
        await config.load_kube_config_from_dict(dict(source.config_dict), context=source.context, client_configuration=configuration)
    elif source.config_file is not None:
        await config.load_kube_config(config_file=source.config_file, context=source.context, client_configuration=configuration)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            await config.load_kube_config(config_file=default_kubeconfig(), context=source.context, client_configuration=configuration)
    if not source.verify_ssl:
        configuration.verify_ssl = False


async def _configure_gke(configuration: Any, target: "ClusterTarget") -> None:
    from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesAsyncHook

    if not target.cluster_url:
        raise BadSpecError("the GKE endpoint must be resolved before deferring (PathwaysHook.resolved_target)")
    hook = GKEKubernetesAsyncHook(
        cluster_url=target.cluster_url,
        ssl_ca_cert=target.ssl_ca_cert or "",
        gcp_conn_id=target.gcp_conn_id,
        impersonation_chain=target.impersonation_chain,
        use_dns_endpoint=target.use_dns_endpoint,
    )
    async with await hook.get_token() as credentials:  # closes the token's own HTTP session
        token = await credentials.get()
    configuration.host = target.cluster_url
    configuration.api_key = {"authorization": token}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    # The DNS endpoint presents a publicly trusted certificate; the IP endpoint the cluster's CA.
    if not target.use_dns_endpoint and target.ssl_ca_cert:
        configuration.ssl_ca_cert = ca_certificate_file(target.ssl_ca_cert)


def ca_certificate_file(ca_base64: str) -> str:
    """A file holding the cluster's (public) CA certificate, written once per certificate."""
    data = base64.b64decode(ca_base64)
    path = os.path.join(tempfile.gettempdir(), f"pathways-airflow-ca-{hashlib.sha256(data).hexdigest()[:16]}.crt")
    if not os.path.exists(path):
        with tempfile.NamedTemporaryFile("wb", dir=os.path.dirname(path), delete=False) as handle:
            handle.write(data)
        os.replace(handle.name, path)
    return path


# --- sharing the asynchronous clients of one event loop -------------------------------------------

CLIENT_LIFETIME = 30 * 60.0
"""Async clients are rebuilt this often: the bearer tokens of GKE and of kubeconfig exec plugins
last about an hour, and the loaders read them once."""
CLIENT_IDLE_SECONDS = 120.0
"""How long a client nobody is using stays open for the next call (a trigger polling every
minute keeps one client, connection pool and TLS context)."""


@dataclass(eq=False)
class _SharedClient:
    client: Any
    created: float
    leases: int = 0
    closer: "asyncio.Task[None] | None" = None
    """The countdown that closes the client once it has been idle long enough."""


_SHARED: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _SharedClient]]" = weakref.WeakKeyDictionary()
_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]]" = weakref.WeakKeyDictionary()


@asynccontextmanager
async def shared_async_client(key: str, make: Callable[[], Awaitable[Any]]) -> AsyncIterator[Any]:
    """The running loop's client for cluster ``key`` (``make`` builds one), for one ``async with``.

    Every caller on a loop shares one client per cluster, and each holds it only for the block.
    A client is closed when nobody has held it for :data:`CLIENT_IDLE_SECONDS`, when a holder
    is cancelled and was the last (a killed task, a stopping triggerer), when it is older than
    :data:`CLIENT_LIFETIME` and its last holder lets go, or when the loop ends under
    ``asyncio.run`` (which cancels the idle countdown, whose ``finally`` closes it). So no path
    leaves an aiohttp session to be found unclosed by the garbage collector.
    """
    shared = await _acquire(key, make)
    try:
        yield shared.client
    finally:
        await _release(key, shared)


async def _acquire(key: str, make: Callable[[], Awaitable[Any]]) -> _SharedClient:
    loop = asyncio.get_running_loop()
    clients = _SHARED.setdefault(loop, {})
    async with _LOCKS.setdefault(loop, {}).setdefault(key, asyncio.Lock()):
        shared = clients.get(key)
        if shared is not None and time.monotonic() - shared.created >= CLIENT_LIFETIME:
            del clients[key]  # retired: closed by its last holder, or now if it has none
            if shared.leases == 0:
                await _close(shared)
            shared = None
        if shared is None:
            shared = clients[key] = _SharedClient(await make(), time.monotonic())
        shared.leases += 1
        _stop_countdown(shared)
        return shared


async def _release(key: str, shared: _SharedClient) -> None:
    shared.leases -= 1
    if shared.leases > 0:
        return
    clients = _SHARED.get(asyncio.get_running_loop(), {})
    task = asyncio.current_task()
    if clients.get(key) is not shared or (task is not None and task.cancelling()):
        if clients.get(key) is shared:
            del clients[key]
        await _close(shared)
        return
    shared.closer = asyncio.get_running_loop().create_task(_close_when_idle(key, shared), name=f"idle client {key}")


async def _close_when_idle(key: str, shared: _SharedClient) -> None:
    try:
        await asyncio.sleep(CLIENT_IDLE_SECONDS)
    finally:
        if shared.closer is asyncio.current_task():  # not taken back into use meanwhile
            shared.closer = None
            clients = _SHARED.get(asyncio.get_running_loop(), {})
            if clients.get(key) is shared:
                del clients[key]
            await _close(shared)


def _stop_countdown(shared: _SharedClient) -> None:
    closer, shared.closer = shared.closer, None
    if closer is not None:
        closer.cancel()


async def _close(shared: _SharedClient) -> None:
    _stop_countdown(shared)
    await shared.client.close()


async def close_shared_async_clients() -> None:
    """Close every client of the running loop now, held or not (the end of a test or a process)."""
    for shared in _SHARED.pop(asyncio.get_running_loop(), {}).values():
        await _close(shared)

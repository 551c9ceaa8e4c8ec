"""The Kubernetes API over loopback HTTP, as the real clients and kubectl speak it.

One aiohttp application; every resource request goes through one generic handler that parses
the path (:mod:`.paths`), checks faults, authentication and RBAC, and then lists, watches,
creates, replaces, patches or deletes in the :class:`~.store.Store`. Resource kinds are data
(:mod:`.kinds`). Subresources with behaviour of their own: ``status``, ``pods/log``, and the
``proxy`` of pods and services (forwarded to the stand-in program's loopback port).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import logging
from collections import Counter
from typing import Any, Callable, Mapping

from aiohttp import ClientSession, ClientTimeout, web

from pathways_airflow_testing.crds import strict_schema
from pathways_airflow_testing import discovery
from pathways_airflow_testing.pagination import ListPages
from pathways_airflow_testing.errors import (
    ApiError,
    bad_request,
    invalid,
    method_not_allowed,
    unsupported_media_type,
)
from pathways_airflow_testing.faults import Faults
from pathways_airflow_testing.kinds import Kind, KindRegistry
from pathways_airflow_testing.logs import LogStore, format_line, select_lines
from pathways_airflow_testing.patch import PatchError, apply_patch
from pathways_airflow_testing.paths import DiscoveryPath, ResourcePath, parse_api_path
from pathways_airflow_testing.protobuf import PROTOBUF, READABLE_KINDS, UnsupportedEncoding, decode, is_protobuf
from pathways_airflow_testing.rbac import Authorizer, UserInfo
from pathways_airflow_testing.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
    supported_field_labels,
)
from pathways_airflow_testing.store import Store, StoreEvent
from pathways_airflow_testing.tables import table, wants_table

log = logging.getLogger(__name__)

JSON = "application/json"
PortLookup = Callable[[str, str, str, int | str | None], "tuple[str, int] | None"]


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")


def _json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type=JSON, headers=headers
    )


class ApiServer:
    """Serves the store as the Kubernetes API."""

    def __init__(
        self,
        store: Store,
        logs: LogStore,
        *,
        faults: Faults,
        authorizer: Authorizer,
        port_lookup: PortLookup,
        bookmark_interval: float = 1.0,
        local_handler: Callable[[web.Request], Any] | None = None,
        subresource_handlers: Mapping[str, Callable[[Kind, ResourcePath, Mapping[str, str]], dict[str, Any]]] | None = None,
    ):
        self.store = store
        self.kinds: KindRegistry = store.kinds
        self.logs = logs
        self.faults = faults
        self.authorizer = authorizer
        self.port_lookup = port_lookup
        self.bookmark_interval = bookmark_interval
        self.local_handler = local_handler
        self.subresource_handlers = dict(subresource_handlers or {})
        """Read-only subresources another server answers through this one (an aggregated API such as
        Kueue's visibility server), by subresource name: authorized here, answered there."""
        self.request_counts: Counter[str] = Counter()
        self.pages = ListPages()
        self.open_watches: set[asyncio.Task[Any]] = set()
        self._validators: dict[tuple[str, str, str], Any] = {}
        self._proxy_session: ClientSession | None = None
        self._openapi_cache: dict[tuple[str, str, int], bytes] = {}
        self._lines: dict[tuple[int, str, str], tuple[dict[str, Any], bytes]] = {}
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_cleanup.append(self._cleanup)
        self.app.on_response_prepare.append(self._date_header)

    async def _date_header(self, _request: web.Request, response: web.StreamResponse) -> None:
        """Every answer's ``Date`` is the cluster's (simulated) time, as a real API server's is the
        time of the clock that writes its ``creationTimestamp``s."""
        response.headers["Date"] = email.utils.format_datetime(self.store.clock.utcnow(), usegmt=True)

    async def _cleanup(self, _app: web.Application) -> None:
        if self._proxy_session is not None:
            await self._proxy_session.close()

    # --- entry point -----------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if len(path) > 1 and path.endswith("/") and "/proxy" not in path:
            path = path.rstrip("/")
        query = request.query
        is_watch = _truthy(query.get("watch")) or "/watch/" in path
        self.request_counts["watch" if is_watch else request.method] += 1
        rule = self.faults.take_rule(request.method, path, is_watch)
        latency, fault = (rule.latency, rule.error()) if rule is not None else (0.0, None)
        told_to_wait = float((fault.headers or {}).get("Retry-After", 0)) if fault is not None else 0.0
        if latency or told_to_wait:
            self.faults.stalled(self.store.clock.now(), latency + told_to_wait, self.store.clock.speed)
        if latency:
            await asyncio.sleep(latency)
        if rule is not None and rule.raw:
            return await self._raw_fault(request, rule)
        try:
            if fault is not None:
                raise fault
            if path in ("/healthz", "/readyz", "/livez"):
                return web.Response(text="ok")
            if path.startswith("/_local/") and self.local_handler is not None:
                self.authorizer.authenticate(request.headers.get("Authorization"))
                return await self.local_handler(request)
            if path == "/version":
                return _json_response(discovery.KUBERNETES_VERSION)
            if path.startswith("/openapi/v3"):
                return self._openapi_v3(path)
            if path.startswith("/openapi/"):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            user = self.authorizer.authenticate(request.headers.get("Authorization"))
            target = parse_api_path(path if "/proxy" not in path else request.path)
            if isinstance(target, DiscoveryPath):
                return self._discovery(target)
            if isinstance(target, ResourcePath):
                return await self._resource(request, target, user, is_watch)
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        except ApiError as error:
            return _json_response(error.body(), status=error.code, headers=error.headers)

    async def _raw_fault(self, request: web.Request, rule: Any) -> web.StreamResponse:
        """Bytes of the rule's own: a garbage body, or a corrupted watch stream that then ends."""
        if rule.watch_lines is not None:
            response = web.StreamResponse(
                status=rule.status or 200, headers={"Content-Type": JSON, "Transfer-Encoding": "chunked"}
            )
            await response.prepare(request)
            for chunk in rule.watch_lines:
                await response.write(chunk)
            await response.write_eof()
            return response
        return web.Response(body=rule.body, status=rule.status or 200, content_type=rule.content_type)

    def _openapi_v3(self, path: str) -> web.Response:
        if path == "/openapi/v3":
            return _json_response(discovery.openapi_v3_index(self.kinds))
        parts = path[len("/openapi/v3/") :].split("/")
        group, version = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else (parts[1], parts[2]) if len(parts) == 3 else ("", "")
        key = (group, version, len(self.kinds.in_group_version(group, version)))
        if key not in self._openapi_cache:
            document = discovery.openapi_v3_group(self.kinds, group, version)
            if document is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self._openapi_cache[key] = json.dumps(document, separators=(",", ":")).encode()
        return web.Response(body=self._openapi_cache[key], content_type=JSON)

    def _discovery(self, target: DiscoveryPath) -> web.Response:
        if target.legacy and target.version is None:
            return _json_response(discovery.api_versions())
        if target.group is None:
            return _json_response(discovery.api_group_list(self.kinds))
        if target.version is None:
            body = discovery.api_group(self.kinds, target.group)
        else:
            body = discovery.resource_list(self.kinds, target.group, target.version)
        if body is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _json_response(body)

    # --- resources -------------------------------------------------------------------------

    def _kind(self, target: ResourcePath) -> Kind:
        kind = self.kinds.lookup(target.group, target.version, target.plural)
        if kind is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not kind.namespaced and target.namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return kind

    async def _resource(
        self, request: web.Request, target: ResourcePath, user: UserInfo, is_watch: bool
    ) -> web.StreamResponse:
        kind = self._kind(target)
        method = request.method
        verb = self._verb(method, target, is_watch)
        self.authorizer.authorize(user, verb, kind, target.namespace, target.name, target.subresource)
        if target.subresource == "log":
            return await self._pod_log(request, kind, target)
        if target.subresource == "proxy":
            return await self._proxy(request, kind, target)
        if target.subresource in self.subresource_handlers and target.name is not None and method == "GET":
            return _json_response(self.subresource_handlers[target.subresource](kind, target, request.query))
        if target.subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        query = request.query
        dry_run = "All" in query.getall("dryRun", [])
        if target.name is None:
            if method == "GET":
                if is_watch:
                    return await self._watch(request, kind, target)
                return self._list(kind, target, query, request.headers.get("Accept"))
            if method == "POST":
                body = await self._body(request)
                created = self._create(kind, target, body, dry_run=dry_run, strict=query.get("fieldValidation") == "Strict")
                return _json_response(created[0], status=201, headers=created[1])
            if method == "DELETE":
                return self._delete_collection(kind, target, query)
            raise method_not_allowed(f"{method} is not allowed on a collection")
        if method == "GET":
            obj = self._versioned(kind, self.store.get(kind, target.namespace, target.name))
            if wants_table(request.headers.get("Accept")):
                return _json_response(self._table(kind, [obj], query))
            return _json_response(obj)
        if method == "PUT":
            body = await self._body(request)
            return _json_response(self._replace(kind, target, body, dry_run=dry_run))
        if method == "PATCH":
            raw = await request.read()
            return _json_response(self._patch(kind, target, raw, request.content_type, dry_run=dry_run))
        if method == "DELETE":
            options = await self._delete_options(request)
            deleted = self.store.delete(
                kind,
                target.namespace,
                target.name,
                propagation=options.get("propagationPolicy"),
                uid=(options.get("preconditions") or {}).get("uid"),
                resource_version=(options.get("preconditions") or {}).get("resourceVersion"),
                grace_period_seconds=options.get("gracePeriodSeconds"),
                dry_run=dry_run or "All" in (options.get("dryRun") or []),
            )
            return _json_response(self._versioned(kind, deleted))
        raise method_not_allowed(f"{method} is not allowed on {kind.plural}")

    @staticmethod
    def _verb(method: str, target: ResourcePath, is_watch: bool) -> str:
        if method == "GET":
            if is_watch:
                return "watch"
            return "get" if target.name else "list"
        if method == "DELETE":
            return "delete" if target.name else "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())

    async def _body(self, request: web.Request) -> dict[str, Any]:
        """The request's object: JSON, or protobuf for the built-in kinds clients send that way."""
        content_type = request.headers.get("Content-Type", "application/json")
        if is_protobuf(content_type):
            try:
                return decode(await request.read())
            except UnsupportedEncoding as error:
                raise unsupported_media_type(str(error)) from None
        if content_type.split(";")[0].strip().lower() not in ("application/json", ""):
            raise unsupported_media_type(
                f"the local cluster reads request bodies as application/json (or {PROTOBUF} for {READABLE_KINDS}), not {content_type}"
            )
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise bad_request(f"the body of the request could not be decoded as JSON: {error}") from None
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        return body

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if request.can_read_body:
            raw = await request.read()
            if raw.strip():
                try:
                    options = json.loads(raw)
                except json.JSONDecodeError:
                    raise bad_request("the DeleteOptions body could not be decoded as JSON") from None
        query = request.query
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "gracePeriodSeconds" in query:
            options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        if options.get("orphanDependents") is True:
            options["propagationPolicy"] = "Orphan"
        return options

    def _versioned(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as served at the requested version (one storage, several versions)."""
        if obj.get("apiVersion") == kind.api_version:
            return obj
        return {**obj, "apiVersion": kind.api_version}

    # --- list and watch --------------------------------------------------------------------

    def _selectors(self, kind: Kind, query: Mapping[str, str]) -> tuple[Any, Any]:
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
            fields = parse_field_selector(query.get("fieldSelector", ""))
            fields.require_supported(supported_field_labels(kind.group, kind.kind, namespaced=kind.namespaced))
        except SelectorError as error:
            raise bad_request(str(error)) from None
        return labels, fields

    def _matching(self, kind: Kind, target: ResourcePath, query: Mapping[str, str]) -> list[dict[str, Any]]:
        labels, fields = self._selectors(kind, query)
        return [
            obj
            for obj in self.store.list(kind, target.namespace)
            if labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)
        ]

    def _table(self, kind: Kind, objects: list[dict[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
        return table(kind, objects, self.store.clock.now(), str(self.store.resource_version), query.get("includeObject", "Metadata"))

    def _list(self, kind: Kind, target: ResourcePath, query: Mapping[str, str], accept: str | None) -> web.Response:
        continuing = bool(query.get("continue")) and not wants_table(accept)  # the rest of a snapshot taken before
        items = [] if continuing else [self._versioned(kind, o) for o in self._matching(kind, target, query)]
        if wants_table(accept):
            return _json_response(self._table(kind, items, query))
        metadata: dict[str, Any] = {"resourceVersion": str(self.store.resource_version)}
        page = self.pages.page(items, metadata["resourceVersion"], query, bool(query.get("labelSelector") or query.get("fieldSelector")))
        if page is not None:
            items, metadata["resourceVersion"] = page.items, page.resource_version
            if page.continue_token:
                metadata["continue"] = page.continue_token
            if page.remaining is not None:
                metadata["remainingItemCount"] = page.remaining
        return _json_response({"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": metadata, "items": items})

    async def _watch(self, request: web.Request, kind: Kind, target: ResourcePath) -> web.StreamResponse:
        query = request.query
        labels, fields = self._selectors(kind, query)
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        since = query.get("resourceVersion")
        as_table = wants_table(request.headers.get("Accept"))
        include = query.get("includeObject", "Metadata")
        queue: asyncio.Queue[StoreEvent | None] = asyncio.Queue()

        def wanted(event: StoreEvent) -> bool:
            if target.namespace and event.namespace != target.namespace:
                return False
            return labels.matches(event.obj["metadata"].get("labels")) and fields.matches(event.obj)

        unsubscribe = self.store.subscribe(lambda e: queue.put_nowait(e) if wanted(e) else None, kind)
        response = web.StreamResponse(headers={"Content-Type": JSON, "Transfer-Encoding": "chunked"})
        task = asyncio.current_task()
        assert task is not None
        self.open_watches.add(task)
        try:
            await response.prepare(request)
            if since in (None, "", "0"):
                initial = [
                    StoreEvent(self.store.resource_version, "ADDED", kind, o)
                    for o in self.store.list(kind, target.namespace)
                    if labels.matches(o["metadata"].get("labels")) and fields.matches(o)
                ]
            else:
                try:
                    initial = [e for e in self.store.events_since(kind, int(since)) if wanted(e)]
                except ValueError:
                    raise bad_request(f"invalid resourceVersion {since!r}") from None
            for event in initial:
                await response.write(self._event_line(kind, event.type, event.obj, as_table, include))
            await self._stream(response, kind, queue, bookmarks, timeout, as_table, include)
        except ApiError as error:
            await response.write(json.dumps({"type": "ERROR", "object": error.body()}).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            unsubscribe()
            self.open_watches.discard(task)
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        kind: Kind,
        queue: asyncio.Queue[StoreEvent | None],
        bookmarks: bool,
        timeout: float | None,
        as_table: bool = False,
        include: str = "Metadata",
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        while True:
            wait = self.bookmark_interval if bookmarks else None
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                wait = min(wait, remaining) if wait else remaining
            try:
                event = await asyncio.wait_for(queue.get(), wait) if wait else await queue.get()
            except asyncio.TimeoutError:
                if bookmarks:
                    marker = {
                        "apiVersion": kind.api_version,
                        "kind": kind.kind,
                        "metadata": {"resourceVersion": str(self.store.resource_version)},
                    }
                    await response.write(json.dumps({"type": "BOOKMARK", "object": marker}, separators=(",", ":")).encode() + b"\n")
                continue
            if event is None:
                return
            # Write everything already queued in one go: under load, one write per burst.
            lines = [self._event_line(kind, event.type, event.obj, as_table, include)]
            while not queue.empty():
                queued = queue.get_nowait()
                if queued is None:
                    await response.write(b"".join(lines))
                    return
                lines.append(self._event_line(kind, queued.type, queued.obj, as_table, include))
            await response.write(b"".join(lines))

    def _event_line(self, kind: Kind, event_type: str, obj: dict[str, Any], as_table: bool = False, include: str = "Metadata") -> bytes:
        """One watch event line; serialised once per event and version, however many watch it."""
        if as_table:
            body = table(kind, [self._versioned(kind, obj)], self.store.clock.now(), obj["metadata"].get("resourceVersion", ""), include)
            return json.dumps({"type": event_type, "object": body}, separators=(",", ":")).encode() + b"\n"
        key = (id(obj), event_type, kind.api_version)
        cached = self._lines.get(key)
        if cached is not None and cached[0] is obj:
            return cached[1]
        line = json.dumps({"type": event_type, "object": self._versioned(kind, obj)}, separators=(",", ":")).encode() + b"\n"
        self._lines[key] = (obj, line)
        if len(self._lines) > 4096:
            self._lines.pop(next(iter(self._lines)))
        return line

    def drop_watches(self) -> int:
        """Cut every open watch connection, as an API server restart or a load balancer does."""
        tasks = list(self.open_watches)
        for task in tasks:
            task.cancel()
        return len(tasks)

    # --- writes ----------------------------------------------------------------------------

    def _validator(self, kind: Kind, strict: bool):
        key = (kind.group, kind.version, kind.plural, strict)
        if key not in self._validators:
            import jsonschema

            schema = strict_schema(kind.schema) if strict else dict(kind.schema or {})
            self._validators[key] = jsonschema.Draft202012Validator(schema)
        return self._validators[key]

    def _check_schema(self, kind: Kind, obj: dict[str, Any], *, strict: bool) -> dict[str, str]:
        """422 for a schema violation; unknown fields are a 422 when strict, else a warning header."""
        if kind.schema is None:
            return {}
        name = obj.get("metadata", {}).get("name", "")
        body = {k: v for k, v in obj.items() if k != "status"} if kind.has_status else obj
        errors = sorted(self._validator(kind, False).iter_errors(body), key=lambda e: [str(p) for p in e.path])
        if errors:
            raise invalid(kind.group, kind.kind, kind.plural, name, [schema_cause(e) for e in errors[:20]])
        unknown = sorted(
            f'"{".".join([*map(str, e.path), field])}"'
            for e in self._validator(kind, True).iter_errors(body)
            if e.validator == "additionalProperties"
            for field in re.findall(r"'([^']+)'", e.message.split("(", 1)[-1])
        )
        if not unknown:
            return {}
        if strict:
            raise bad_request(
                f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: strict decoding error: '
                + ", ".join(f"unknown field {u}" for u in unknown)
            )
        return {"Warning": ", ".join(f'299 - "unknown field {u}"' for u in unknown)}

    def _create(
        self, kind: Kind, target: ResourcePath, body: dict[str, Any], *, dry_run: bool, strict: bool
    ) -> tuple[dict[str, Any], dict[str, str]]:
        if body.get("kind") not in (None, kind.kind) or body.get("apiVersion") not in (None, kind.api_version):
            raise bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the expected API version "
                f"({kind.api_version})"
            )
        if target.subresource:
            raise method_not_allowed(f"create is not allowed on {kind.plural}/{target.subresource}")
        headers = self._check_schema(kind, body, strict=strict)
        created = self.store.create(kind, body, namespace=target.namespace, dry_run=dry_run)
        if kind.key == ("apiextensions.k8s.io", "customresourcedefinitions") and not dry_run:
            self.kinds.add_crd(created)
            self._validators.clear()
        return self._versioned(kind, created), headers

    def _replace(self, kind: Kind, target: ResourcePath, body: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
        metadata = body.setdefault("metadata", {})
        if metadata.get("name") not in (None, target.name):
            raise bad_request(f"the name of the object ({metadata.get('name')}) does not match the name on the URL ({target.name})")
        metadata["name"] = target.name
        if kind.namespaced:
            metadata.setdefault("namespace", target.namespace)
        if target.subresource != "status":
            self._check_schema(kind, body, strict=False)
        return self._versioned(kind, self.store.replace(kind, body, subresource=target.subresource, dry_run=dry_run))

    def _patch(self, kind: Kind, target: ResourcePath, raw: bytes, content_type: str, *, dry_run: bool) -> dict[str, Any]:
        assert target.name is not None
        current = self.store.get(kind, target.namespace, target.name)
        try:
            patched = apply_patch(current, raw, content_type, kind.kind, kind.group)
        except PatchError as error:
            raise ApiError(error.status, error.reason, str(error)) from None
        if not isinstance(patched, dict):
            raise bad_request("the patch did not produce an object")
        sent_rv = _sent_resource_version(raw, content_type)
        metadata = patched.setdefault("metadata", {})
        if sent_rv is None:
            metadata.pop("resourceVersion", None)
        metadata["name"] = target.name
        if kind.namespaced:
            metadata["namespace"] = target.namespace
        if target.subresource != "status":
            self._check_schema(kind, patched, strict=False)
        return self._versioned(kind, self.store.replace(kind, patched, subresource=target.subresource, dry_run=dry_run))

    def _delete_collection(self, kind: Kind, target: ResourcePath, query: Mapping[str, str]) -> web.Response:
        deleted = []
        for obj in list(self._matching(kind, target, query)):
            meta = obj["metadata"]
            try:
                deleted.append(
                    self.store.delete(kind, meta.get("namespace"), meta["name"], propagation=query.get("propagationPolicy"))
                )
            except ApiError:
                continue
        return _json_response(
            {
                "kind": f"{kind.kind}List",
                "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": [self._versioned(kind, o) for o in deleted],
            }
        )

    # --- pods/log and proxies --------------------------------------------------------------

    async def _pod_log(self, request: web.Request, kind: Kind, target: ResourcePath) -> web.StreamResponse:
        if kind.key != ("", "pods") or request.method != "GET":
            raise method_not_allowed("log is only readable on pods")
        assert target.namespace and target.name
        pod = self.store.get(kind, target.namespace, target.name)
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        init = [c["name"] for c in pod["spec"].get("initContainers", [])]
        query = request.query
        container = query.get("container")
        if container is None:
            if len(containers) != 1:
                raise bad_request(
                    f"a container name must be specified for pod {target.name}, choose one of: "
                    f"[{' '.join(containers)}] or one of the init containers: [{' '.join(init)}]"
                )
            container = containers[0]
        if container not in containers + init:
            raise bad_request(f"container {container} is not valid for pod {target.name}")
        if _truthy(query.get("previous")):
            raise bad_request(f'previous terminated container "{container}" in pod "{target.name}" not found')
        stored = self.logs.log(target.namespace, target.name, container)
        tail = int(query["tailLines"]) if query.get("tailLines") else None
        since = float(query["sinceSeconds"]) if query.get("sinceSeconds") else None
        timestamps = _truthy(query.get("timestamps"))
        lines = select_lines(stored, now=self.store.clock.now(), tail_lines=tail, since_seconds=since)
        limit = int(query["limitBytes"]) if query.get("limitBytes") else None
        if not _truthy(query.get("follow")):
            # limitBytes: the kubelet stops reading after that many bytes of the selected lines.
            body = "".join(format_line(t, l, timestamps) for t, l in lines).encode()
            return web.Response(body=body[:limit] if limit else body, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain", "Transfer-Encoding": "chunked"})
        await response.prepare(request)
        for when, line in lines:
            await response.write(format_line(when, line, timestamps).encode())
        sent = len(stored.lines)
        stored.changed = stored.changed or asyncio.Event()
        try:
            while True:
                for when, line in stored.lines[sent:]:
                    await response.write(format_line(when, line, timestamps).encode())
                sent = len(stored.lines)
                if stored.finished:
                    break
                stored.changed.clear()
                await stored.changed.wait()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async def _proxy(self, request: web.Request, kind: Kind, target: ResourcePath) -> web.StreamResponse:
        if kind.key not in (("", "pods"), ("", "services")) or not target.name or not target.namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name, _, port = target.name.partition(":")
        address = self.port_lookup(kind.plural, target.namespace, name, port or None)
        if address is None:
            raise ApiError(
                503, "ServiceUnavailable", f'no endpoints available for {kind.singular} "{name}"'
            )
        if self._proxy_session is None:
            self._proxy_session = ClientSession(timeout=ClientTimeout(total=300))
        url = f"http://{address[0]}:{address[1]}/{target.rest}"
        body = await request.read()
        try:
            async with self._proxy_session.request(
                request.method, url, params=request.query, data=body or None,
                headers={k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept")},
            ) as upstream:
                payload = await upstream.read()
                return web.Response(
                    body=payload, status=upstream.status, content_type=upstream.content_type or "text/plain"
                )
        except OSError as error:
            raise ApiError(503, "ServiceUnavailable", f"error trying to reach {kind.singular}: {error}") from None


def field_path(path: Any) -> str:
    """``["spec", "workers", 0, "type"]`` → ``spec.workers[0].type``, as the API server writes it."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def schema_cause(error: Any) -> tuple[str, str]:
    """A jsonschema error as the API server words a schema violation."""
    where = field_path(error.path)
    if error.validator == "enum":
        choices = ", ".join(json.dumps(c) for c in error.validator_value)
        return where, f"Unsupported value: {json.dumps(error.instance)}: supported values: {choices}"
    if error.validator == "required":
        missing = re.findall(r"'([^']+)'", error.message)[:1]
        return (f"{where}.{missing[0]}" if missing and where != "<root>" else missing[0] if missing else where), "Required value"
    if error.validator == "type":
        return where, f"Invalid value: {json.dumps(type(error.instance).__name__)}: {where} in body must be of type {error.validator_value}"
    return where, f"Invalid value: {json.dumps(error.instance)[:200]}: {error.message}"


def _sent_resource_version(raw: bytes, content_type: str) -> str | None:
    """The resourceVersion a patch body pins (optimistic concurrency), if any."""
    if "json-patch" in content_type:
        return None
    try:
        body = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if isinstance(body, dict):
        return (body.get("metadata") or {}).get("resourceVersion")
    return None

"""Wait in a worker until one Kubernetes object changes: a watch instead of a fixed sleep.

A task waiting in a worker on one object (a model server's LeaderWorkerSet while it starts)
reads it, decides, and waits for the next look. Sleeping ``poll_interval`` between looks makes
every wait end up to a whole interval after the object got there (a server ready in 1 s is
reported after 10). Instead the worker watches that one object (``fieldSelector=metadata.name=...``) from the ``resourceVersion`` it
just read: the first change after what it saw ends the wait at once, and ``poll_interval`` stays
the longest gap between looks, as before.

A watch is only a wake-up call here, never the source of truth: the caller reads the object
again after every wake-up. Anything that goes wrong with the watch (RBAC without ``watch``, a
proxy that does not stream, a dropped connection) falls back to sleeping out the interval, which
is exactly the polling this replaces.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from pathways_airflow.hooks.api import JsonLines, describe
from pathways_airflow.resources import Resource

if TYPE_CHECKING:
    from pathways_airflow.hooks.pathways import PathwaysHook

Answer = TypeVar("Answer")

MIN_WATCH_SECONDS = 1.0
"""Shorter waits just sleep: the API server's ``timeoutSeconds`` counts whole seconds."""
READ_SLACK_SECONDS = 5.0
"""How long past its ``timeoutSeconds`` a silent stream is given before the client gives up on it."""


def version_of(obj: Mapping[str, Any] | None) -> str | None:
    """The ``resourceVersion`` an object was read at, or ``None`` (no object, or none given)."""
    if not obj:
        return None
    return (obj.get("metadata") or {}).get("resourceVersion") or None


def changed_event(event: Any, since: str) -> bool:
    """Does a watch event say the object may differ from the one read at resourceVersion ``since``?

    Bookmarks only move the stream's resourceVersion; an ``ERROR`` (410 Gone: the version read is
    older than the API server's history) means "read it again", as ADDED, MODIFIED and DELETED do
    — unless they carry the very version read (a server or proxy that ignores ``resourceVersion``
    replays the current object first), which would otherwise turn the wait into a busy loop.
    """
    if not isinstance(event, dict) or event.get("type") == "BOOKMARK":
        return False
    if event.get("type") == "ERROR":
        return True
    return version_of(event.get("object") if isinstance(event.get("object"), dict) else None) != since


def wait_until_changed(
    hook: "PathwaysHook", resource: Resource, namespace: str, name: str, since: str | None, timeout: float
) -> bool:
    """Until object ``namespace/name`` changes after resourceVersion ``since``, or ``timeout`` passes.

    True when a change (or a 410) arrived; False when the time passed (or the watch could not be
    made, after sleeping the rest of ``timeout``). ``since=None`` (the object was not there when
    read) sleeps: creation is not what any caller waits for.
    """
    deadline = time.monotonic() + max(0.0, timeout)
    if since is None or timeout < MIN_WATCH_SECONDS:
        time.sleep(max(0.0, timeout))
        return False
    try:
        return _first_change(hook, resource, namespace, name, since, timeout)
    except Exception as error:  # the watch is an optimisation: fall back to the plain wait
        hook.log.debug("watching %s %s/%s failed (%s); waiting %.0f s instead", resource.kind, namespace, name, describe(error), timeout)
        time.sleep(max(0.0, deadline - time.monotonic()))
        return False


def look_until(
    hook: "PathwaysHook",
    resource: Resource,
    namespace: str,
    name: str,
    step: Callable[[dict[str, Any] | None], Answer | None],
    *,
    deadline: float,
    interval: float,
    before_look: Callable[[], None] = lambda: None,
) -> Answer | None:
    """Read the object and ask ``step`` until it answers (the answer) or ``deadline`` passes (``None``).

    ``deadline`` is on :func:`time.monotonic`'s clock. The next read comes as soon as the object
    changes (a deletion included), at the latest after ``interval``; ``before_look`` runs before
    each read (a stopped task raises there).
    """
    while True:
        before_look()
        seen = hook.get(resource, namespace, name)
        answer = step(seen)
        if answer is not None:
            return answer
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        wait_until_changed(hook, resource, namespace, name, version_of(seen), min(interval, remaining))


def _first_change(hook: "PathwaysHook", resource: Resource, namespace: str, name: str, since: str, timeout: float) -> bool:
    response = hook.api_client.call_api(
        resource.path(namespace),
        "GET",
        query_params=[
            ("watch", "true"),
            ("fieldSelector", f"metadata.name={name}"),
            ("resourceVersion", since),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", max(1, math.floor(timeout))),
        ],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=(30, timeout + READ_SLACK_SECONDS),
    )
    lines = JsonLines()
    try:
        for chunk in response.stream(amt=None, decode_content=True):
            if any(changed_event(event, since) for event in lines.feed(chunk)):
                return True
        return False
    finally:
        response.close()
        response.release_conn()

"""The shape every controller of the local cluster has: events in, reconcile, writes out.

A controller names the kinds it watches and maps each event to the key of the object it must
reconcile (its own kind's object, or the owner of a child that changed). Keys are queued once
(duplicates fold), and ``reconcile(namespace, name)`` computes what should exist from what does
and writes only the differences — the level-triggered loop of real controllers. A reconcile that
raises is logged and retried with backoff; one that asks for it is re-run after a delay.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable

from pathways_airflow_testing.clock import VirtualClock
from pathways_airflow_testing.errors import ApiError
from pathways_airflow_testing.kinds import Kind
from pathways_airflow_testing.store import Store, StoreEvent, copy_of

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


class Controller:
    """Subclasses set ``kind`` and implement ``reconcile``; ``keys_for`` maps events to keys."""

    name = "controller"
    max_backoff = 5.0

    def __init__(self, cluster: Any):
        self.cluster = cluster
        self.store: Store = cluster.store
        self.clock: VirtualClock = cluster.clock
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._delayed: dict[Key, asyncio.TimerHandle] = {}
        self._task: asyncio.Task[None] | None = None

    # --- wiring ----------------------------------------------------------------------------

    def watched_kinds(self) -> Iterable[Kind]:
        """Kinds whose events may need a reconcile."""
        return ()

    def keys_for(self, event: StoreEvent) -> Iterable[Key]:
        """Which of this controller's objects an event concerns."""
        return ((event.namespace, event.name),)

    def start(self) -> None:
        for kind in self.watched_kinds():
            self.store.subscribe(self._on_event, kind)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        for handle in self._delayed.values():
            handle.cancel()
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _on_event(self, event: StoreEvent) -> None:
        for key in self.keys_for(event):
            self.enqueue(key)

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def enqueue_after(self, key: Key, simulated_seconds: float) -> None:
        """Reconcile ``key`` again after ``simulated_seconds`` of cluster time."""
        loop = asyncio.get_running_loop()
        if key in self._delayed:
            self._delayed[key].cancel()
        self._delayed[key] = loop.call_later(self.clock.real_seconds(simulated_seconds), self._fire, key)

    def _fire(self, key: Key) -> None:
        self._delayed.pop(key, None)
        self.enqueue(key)

    async def _run(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await self.reconcile(*key)
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a reconcile bug must not stop the controller
                count = self._failures[key] = self._failures.get(key, 0) + 1
                level = logging.DEBUG if isinstance(error, ApiError) and error.code == 409 else logging.WARNING
                log.log(level, "%s: reconcile %s/%s failed (%s): %s", self.name, *key, count, error, exc_info=level == logging.WARNING)
                asyncio.get_running_loop().call_later(min(self.max_backoff, 0.05 * 2**count), self.enqueue, key)

    async def reconcile(self, namespace: str, name: str) -> None:
        raise NotImplementedError

    # --- helpers ---------------------------------------------------------------------------

    def kind(self, group: str, version: str, plural: str) -> Kind:
        found = self.store.kinds.lookup(group, version, plural)
        assert found is not None, (group, version, plural)
        return found

    def set_status(self, kind: Kind, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Write ``status`` if it differs; controllers own their objects' status."""
        if obj.get("status") == status:
            return obj
        updated = dict(obj)
        updated["status"] = status
        return self.store.write_status(kind, updated)

    def event(
        self,
        involved: dict[str, Any],
        reason: str,
        message: str,
        *,
        type_: str = "Normal",
        component: str | None = None,
    ) -> None:
        """Record a core/v1 Event, as the real controllers report what they did."""
        self.cluster.record_event(involved, reason, message, type_=type_, component=component or self.name)


def owner_keys(event: StoreEvent, owner_kind: str) -> list[Key]:
    """Keys of the owners of kind ``owner_kind`` named in the event object's ownerReferences."""
    return [
        (event.namespace, ref["name"])
        for ref in event.obj["metadata"].get("ownerReferences") or ()
        if ref.get("kind") == owner_kind
    ]


def owner_reference(obj: dict[str, Any], *, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def set_condition(
    conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    """Conditions with ``type_`` set; lastTransitionTime moves only when the status changes."""
    result = [dict(c) for c in conditions]
    for condition in result:
        if condition["type"] == type_:
            if condition["status"] != status:
                condition["lastTransitionTime"] = now
            condition.update(status=status, reason=reason, message=message)
            return result
    result.append({"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": now})
    return result


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or ():
        if item.get("type") == type_:
            return item
    return None


def is_true(obj: dict[str, Any], type_: str) -> bool:
    found = condition(obj, type_)
    return found is not None and found.get("status") == "True"


__all__ = ["Controller", "copy_of", "owner_keys", "owner_reference", "set_condition", "condition", "is_true"]

"""The local cluster's object store: what etcd plus the generic API server logic do.

One dictionary of objects keyed by (group, plural, namespace, name), one resourceVersion
counter for the whole store, and a bounded history of change events. A watch from a
resourceVersion replays the history after it, or gets 410 Gone once that part of the history
has been dropped (compaction). Listeners (controllers, open watches) are called for each event.

All methods run on the cluster's event loop thread; nothing here blocks or awaits. Stored
objects are never mutated in place: every write stores a new dict, so an event's object can be
shared with any number of watchers. Callers that want to change an object copy it first
(:func:`copy_of`).
"""

from __future__ import annotations

import asyncio
import json
import random
import string
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from pathways_airflow_testing.admission import admit
from pathways_airflow_testing.clock import VirtualClock
from pathways_airflow_testing.errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    gone,
    invalid,
    not_found,
)
from pathways_airflow_testing.kinds import Kind, KindRegistry

ObjectKey = tuple[str, str]  # (namespace or "", name)
KindKey = tuple[str, str]  # (group, plural)

EVENT_TTL_SECONDS = 3600.0
"""How long an Event is kept (kube-apiserver ``--event-ttl``, default one hour:
cmd/kube-apiserver/app/options/options.go ``EventTTL: 1 * time.Hour``), in simulated seconds.
Without it a long session at speed 60 keeps every Event it ever recorded, and each list of them
(the provider's reads of Scheduled and creation-failure events) grows with the session."""

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"


def copy_of(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy that is cheap for JSON-shaped data."""
    return json.loads(json.dumps(obj))


@dataclass(frozen=True)
class StoreEvent:
    """One change: ``type`` is ADDED, MODIFIED or DELETED; ``obj`` is never mutated."""

    resource_version: int
    type: str
    kind: Kind
    obj: dict[str, Any]

    @property
    def namespace(self) -> str:
        return self.obj["metadata"].get("namespace", "")

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]


Listener = Callable[[StoreEvent], None]


class Store:
    """Objects, resourceVersions, history and listeners."""

    def __init__(self, kinds: KindRegistry, clock: VirtualClock, *, history: int = 100_000):
        self.kinds = kinds
        self.clock = clock
        self._rv = 1
        self._objects: dict[KindKey, dict[ObjectKey, dict[str, Any]]] = {}
        self._history: deque[StoreEvent] = deque(maxlen=history)
        self._compacted_through = 0
        self._listeners: dict[KindKey | None, list[Listener]] = {}
        self._dependents: dict[str, set[tuple[KindKey, ObjectKey]]] = {}
        self._by_uid: dict[str, tuple[Kind, ObjectKey]] = {}
        self.collector_delay = 0.0
        """Simulated seconds the garbage collector takes to reach an owner's dependents. On a busy
        GKE cluster this is 10–47 minutes (domain.md, "Cleanup in practice"): the owner is marked
        deleted at once, its Jobs and pods keep running (and their TPUs) until the collector
        comes. 0: at once. Set it with :meth:`set_collector_delay`."""
        self._late_collections: dict[asyncio.TimerHandle, tuple[str, str]] = {}

    # --- reading ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object (shared: copy it before changing it), or 404."""
        obj = self._objects.get(kind.key, {}).get((namespace or "", name))
        if obj is None:
            raise not_found(kind.group, kind.plural, name)
        return obj

    def find(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._objects.get(kind.key, {}).get((namespace or "", name))

    def list(self, kind: Kind, namespace: str | None = None) -> list[dict[str, Any]]:
        """Stored objects of ``kind`` (in ``namespace``, or all), ordered by namespace and name."""
        bucket = self._objects.get(kind.key, {})
        keys = sorted(k for k in bucket if namespace in (None, "") or k[0] == namespace)
        return [bucket[k] for k in keys]

    def count(self) -> int:
        return sum(len(bucket) for bucket in self._objects.values())

    # --- listeners and history -------------------------------------------------------------

    def subscribe(self, listener: Listener, kind: Kind | None = None) -> Callable[[], None]:
        """Call ``listener`` for every event (of ``kind``); returns the unsubscribe function."""
        key = kind.key if kind else None
        self._listeners.setdefault(key, []).append(listener)

        def unsubscribe() -> None:
            listeners = self._listeners.get(key, [])
            if listener in listeners:
                listeners.remove(listener)

        return unsubscribe

    def events_since(self, kind: Kind, resource_version: int) -> list[StoreEvent]:
        """Events of ``kind`` after ``resource_version``; 410 Gone if that history was dropped."""
        oldest_kept = self._history[0].resource_version - 1 if self._history else self._rv
        if resource_version < max(self._compacted_through, oldest_kept):
            raise gone(f"too old resource version: {resource_version} ({max(self._compacted_through, oldest_kept)})")
        return [e for e in self._history if e.resource_version > resource_version and e.kind.key == kind.key]

    def compact(self) -> int:
        """Drop the whole history: watches from any earlier resourceVersion now get 410."""
        self._history.clear()
        self._compacted_through = self._rv
        return self._rv

    def _emit(self, event_type: str, kind: Kind, obj: dict[str, Any]) -> None:
        event = StoreEvent(self._rv, event_type, kind, obj)
        self._history.append(event)
        for key in (kind.key, None):
            for listener in tuple(self._listeners.get(key, ())):
                listener(event)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    # --- writing ---------------------------------------------------------------------------

    def create(self, kind: Kind, obj: dict[str, Any], *, namespace: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        """Store a new object; fills in uid, timestamps and resourceVersion, as the API server does."""
        obj = copy_of(obj)
        metadata = obj.setdefault("metadata", {})
        if kind.namespaced:
            ns = namespace or metadata.get("namespace") or "default"
            if metadata.get("namespace") not in (None, "", ns):
                raise bad_request(
                    f"the namespace of the provided object ({metadata['namespace']}) does not match "
                    f"the namespace sent on the request ({ns})"
                )
            metadata["namespace"] = ns
            if (kind.group, kind.plural) != ("", "namespaces") and not self._namespace_exists(ns):
                raise not_found("", "namespaces", ns)
        else:
            metadata.pop("namespace", None)
        if not metadata.get("name"):
            prefix = metadata.get("generateName")
            if not prefix:
                raise invalid(kind.group, kind.kind, kind.plural, "", [("metadata.name", "Required value: name or generateName is required")])
            metadata["name"] = prefix + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        key = (metadata.get("namespace", ""), metadata["name"])
        if key in self._objects.get(kind.key, {}):
            raise already_exists(kind.group, kind.plural, metadata["name"])
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        if kind.has_status and kind.plural != "nodes":
            obj.pop("status", None)
        obj = admit(kind.group, kind.plural, obj)
        metadata = obj["metadata"]
        self._check_object_count_quota(kind, metadata)
        if kind.key == ("", "pods"):
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif kind.key == ("", "namespaces"):
            obj["status"] = {"phase": "Active"}
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            metadata.pop(field, None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = self.clock.timestamp()
        metadata["generation"] = 1
        if dry_run:
            metadata["resourceVersion"] = str(self._rv)
            return obj
        metadata["resourceVersion"] = self._next_rv()
        self._objects.setdefault(kind.key, {})[key] = obj
        self._by_uid[metadata["uid"]] = (kind, key)
        self._index_owners(kind, key, None, obj)
        self._emit("ADDED", kind, obj)
        if kind.key == ("", "events"):
            self._expire_later(kind, key, metadata["uid"])
        return obj

    def _expire_later(self, kind: Kind, key: ObjectKey, uid: str) -> None:
        """Drop the object after :data:`EVENT_TTL_SECONDS`, as its etcd lease does (if still there)."""

        def expire() -> None:
            current = self._objects.get(kind.key, {}).get(key)
            if current is not None and current["metadata"]["uid"] == uid:
                self.delete(kind, *key)

        try:
            asyncio.get_running_loop().call_later(self.clock.real_seconds(EVENT_TTL_SECONDS), expire)
        except RuntimeError:  # no loop (a store used on its own): kept, as before the cluster starts
            pass

    def _check_object_count_quota(self, kind: Kind, metadata: dict[str, Any]) -> None:
        """A ResourceQuota's ``count/<resource>.<group>`` refuses one object too many, with the
        quota admission plugin's 403 (kubernetes plugin/pkg/admission/resourcequota/controller.go)."""
        if not kind.namespaced:
            return
        resource = f"count/{kind.plural}.{kind.group}" if kind.group else f"count/{kind.plural}"
        for (namespace, quota_name), quota in sorted(self._objects.get(("", "resourcequotas"), {}).items()):
            limit = ((quota.get("spec") or {}).get("hard") or {}).get(resource)
            if namespace != metadata["namespace"] or limit is None:
                continue
            used = len([k for k in self._objects.get(kind.key, {}) if k[0] == namespace])
            if used + 1 > int(limit):
                target = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
                raise ApiError(
                    403,
                    "Forbidden",
                    f'{target} "{metadata["name"]}" is forbidden: exceeded quota: {quota_name}, requested: '
                    f"{resource}=1, used: {resource}={used}, limited: {resource}={limit}",
                )

    def replace(
        self,
        kind: Kind,
        obj: dict[str, Any],
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT semantics: optimistic concurrency on resourceVersion; status only through /status."""
        metadata = obj.get("metadata") or {}
        namespace = metadata.get("namespace", "") if kind.namespaced else ""
        name = metadata.get("name", "")
        current = self.get(kind, namespace, name)
        sent_rv = metadata.get("resourceVersion")
        if sent_rv not in (None, "") and str(sent_rv) != current["metadata"]["resourceVersion"]:
            raise conflict(kind.group, kind.plural, name)
        if subresource == "status":
            updated = copy_of(current)
            if "status" in obj:
                updated["status"] = copy_of(obj["status"]) if obj["status"] is not None else {}
            else:
                updated.pop("status", None)
        else:
            updated = copy_of(obj)
            updated["apiVersion"], updated["kind"] = kind.api_version, kind.kind
            new_meta = updated.setdefault("metadata", {})
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if field in current["metadata"]:
                    new_meta[field] = current["metadata"][field]
                else:
                    new_meta.pop(field, None)
            if kind.namespaced:
                new_meta["namespace"] = namespace
            if kind.has_status:
                if "status" in current:
                    updated["status"] = current["status"]
                else:
                    updated.pop("status", None)
            if _spec_of(updated) != _spec_of(current):
                new_meta["generation"] = current["metadata"].get("generation", 1) + 1
        return self._write(kind, current, updated, dry_run=dry_run)

    def write_status(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        """Controllers' status write: last writer wins (they hold the only copy that matters)."""
        current = self.get(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        updated = dict(current)
        updated["status"] = copy_of(obj.get("status") or {})
        return self._write(kind, current, updated)

    def _write(self, kind: Kind, current: dict[str, Any], updated: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        if _without_rv(updated) == _without_rv(current):
            return current  # a no-op write changes nothing, as on a real API server
        meta = updated["metadata"] = dict(updated["metadata"])
        if dry_run:
            return updated
        meta["resourceVersion"] = self._next_rv()
        key = (meta.get("namespace", ""), meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(kind, key, current, updated)
            self._collect_dependents(updated, "Background")
            return updated
        self._objects[kind.key][key] = updated
        self._index_owners(kind, key, current, updated)
        self._emit("MODIFIED", kind, updated)
        if FOREGROUND_FINALIZER in (meta.get("finalizers") or ()) and meta.get("deletionTimestamp"):
            self._finish_foreground_deletion(kind, updated)
        return updated

    def delete(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        *,
        propagation: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE semantics: finalizers and Foreground propagation defer removal; dependents follow."""
        current = self.get(kind, namespace, name)
        meta = current["metadata"]
        if uid and meta["uid"] != uid:
            raise conflict(kind.group, kind.plural, name)
        if resource_version and meta["resourceVersion"] != resource_version:
            raise conflict(kind.group, kind.plural, name)
        if propagation not in (None, "Background", "Foreground", "Orphan"):
            raise bad_request(f"propagationPolicy {propagation!r}: must be Background, Foreground or Orphan")
        if meta.get("deletionTimestamp") and meta.get("finalizers"):
            return current if dry_run else self._delete_again(kind, current, propagation)
        if propagation is None:
            # batch/v1 Jobs orphan their pods unless told otherwise, for backwards compatibility.
            propagation = "Orphan" if kind.key == ("batch", "jobs") else "Background"
        if dry_run:
            return current
        finalizers = list(meta.get("finalizers") or ())
        if propagation == "Foreground" and self._live_dependents(meta["uid"]) and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        if finalizers:
            if meta.get("deletionTimestamp"):
                return current  # being deleted with no finalizer of its own: a foreground delete adds none
            updated = copy_of(current)
            updated["metadata"]["deletionTimestamp"] = self.clock.timestamp()
            updated["metadata"]["deletionGracePeriodSeconds"] = grace_period_seconds or 0
            updated["metadata"]["finalizers"] = finalizers
            result = self._write(kind, current, updated)
            if propagation == "Foreground":
                self._collect_dependents(result, "Foreground")
            return result
        deleted = copy_of(current)
        deleted["metadata"]["resourceVersion"] = self._next_rv()
        deleted["metadata"].setdefault("deletionTimestamp", self.clock.timestamp())
        self._remove(kind, (meta.get("namespace", ""), name), current, deleted)
        if propagation == "Orphan":
            self._orphan_dependents(meta["uid"])
        else:
            self._collect_dependents(current, propagation)
        if kind.key == ("", "namespaces"):
            self._delete_namespace_contents(name)
        return deleted

    def _delete_again(self, kind: Kind, current: dict[str, Any], propagation: str | None) -> dict[str, Any]:
        """A DELETE of an object already waiting on finalizers: a propagation policy given again
        replaces its garbage-collection finalizers, and with none left the object goes at once
        (apiserver ``registry/generic/registry/store.go``: ``Delete`` →
        ``deletionFinalizersForGarbageCollection``; the object is not gracefully deleting, so its
        finalizers may still change). Without a policy nothing changes."""
        if propagation is None:
            return current
        meta = current["metadata"]
        finalizers = [f for f in meta.get("finalizers") or () if f not in (FOREGROUND_FINALIZER, ORPHAN_FINALIZER)]
        if propagation == "Foreground" and self._live_dependents(meta["uid"]):
            finalizers.append(FOREGROUND_FINALIZER)
        if finalizers == list(meta.get("finalizers") or ()):
            return current
        updated = copy_of(current)
        updated["metadata"]["finalizers"] = finalizers
        if finalizers or propagation != "Orphan":
            return self._write(kind, current, updated)  # with none left it goes, its dependents in the background
        updated["metadata"]["resourceVersion"] = self._next_rv()
        self._remove(kind, (meta.get("namespace", ""), meta["name"]), current, updated)
        self._orphan_dependents(meta["uid"])
        return updated

    def _remove(self, kind: Kind, key: ObjectKey, current: dict[str, Any], final: dict[str, Any]) -> None:
        """Drop an object for good, tell the watchers, and let owners waiting on it finish."""
        self._objects[kind.key].pop(key, None)
        self._by_uid.pop(current["metadata"]["uid"], None)
        self._index_owners(kind, key, current, None)
        self._emit("DELETED", kind, final)
        for ref in current["metadata"].get("ownerReferences") or ():
            found = self._by_uid.get(ref.get("uid", ""))
            if found is None:
                continue
            owner_kind, owner_key = found
            owner = self._objects.get(owner_kind.key, {}).get(owner_key)
            if owner and FOREGROUND_FINALIZER in (owner["metadata"].get("finalizers") or ()):
                self._finish_foreground_deletion(owner_kind, owner)

    # --- garbage collection ----------------------------------------------------------------

    def _index_owners(self, kind: Kind, key: ObjectKey, old: dict | None, new: dict | None) -> None:
        def owners(obj: dict | None) -> set[str]:
            return {ref["uid"] for ref in (obj or {}).get("metadata", {}).get("ownerReferences") or () if "uid" in ref}

        for uid in owners(old) - owners(new):
            self._dependents.get(uid, set()).discard((kind.key, key))
        for uid in owners(new) - owners(old):
            self._dependents.setdefault(uid, set()).add((kind.key, key))

    def _live_dependents(self, uid: str) -> list[tuple[Kind, dict[str, Any]]]:
        found = []
        for kind_key, key in sorted(self._dependents.get(uid, ())):
            obj = self._objects.get(kind_key, {}).get(key)
            if obj is not None:
                found.append((self._by_uid[obj["metadata"]["uid"]][0], obj))
        return found

    def _kind_for_key(self, kind_key: KindKey) -> Kind | None:
        return next((k for k in self.kinds.all() if k.key == kind_key), None)

    def _collect_dependents(self, owner: dict[str, Any], propagation: str) -> None:
        """Delete the owner's dependents, at once or, with :attr:`collector_delay`, when the
        collector gets to them (each level of a JobSet → Jobs → pods chain waits its turn)."""
        uid = owner["metadata"]["uid"]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self.collector_delay > 0 and loop is not None:
            handle = loop.call_later(self.clock.real_seconds(self.collector_delay), self._collect_late, uid, propagation)
            self._late_collections[handle] = (uid, propagation)
        else:
            self._collect_now(uid, propagation)

    def _collect_late(self, uid: str, propagation: str) -> None:
        self._late_collections = {h: job for h, job in self._late_collections.items() if job != (uid, propagation)}
        self._collect_now(uid, propagation)

    def set_collector_delay(self, seconds: float) -> None:
        """Make the collector late (``seconds``) or, with 0, let it catch up on what it owes now."""
        self.collector_delay = float(seconds)
        if seconds > 0:
            return
        owed, self._late_collections = self._late_collections, {}
        for handle, (uid, propagation) in owed.items():
            handle.cancel()
            self._collect_now(uid, propagation)

    def _collect_now(self, uid: str, propagation: str) -> None:
        for kind, obj in self._live_dependents(uid):
            meta = obj["metadata"]
            try:
                self.delete(kind, meta.get("namespace"), meta["name"], propagation=propagation if propagation != "Orphan" else "Background")
            except ApiError:
                continue

    def _finish_foreground_deletion(self, kind: Kind, owner: dict[str, Any]) -> None:
        """Once no dependent is left, drop the foregroundDeletion finalizer: the owner goes too."""
        if self._live_dependents(owner["metadata"]["uid"]):
            return
        updated = copy_of(owner)
        updated["metadata"]["finalizers"] = [f for f in updated["metadata"]["finalizers"] if f != FOREGROUND_FINALIZER]
        self._write(kind, owner, updated)

    def _orphan_dependents(self, uid: str) -> None:
        for kind, obj in self._live_dependents(uid):
            updated = copy_of(obj)
            updated["metadata"]["ownerReferences"] = [
                ref for ref in updated["metadata"].get("ownerReferences", []) if ref.get("uid") != uid
            ]
            self._write(kind, obj, updated)

    def _delete_namespace_contents(self, namespace: str) -> None:
        for kind_key, bucket in list(self._objects.items()):
            kind = self._kind_for_key(kind_key)
            if kind is None or not kind.namespaced:
                continue
            for ns, name in [k for k in bucket if k[0] == namespace]:
                try:
                    self.delete(kind, ns, name, propagation="Background")
                except ApiError:
                    continue

    def _namespace_exists(self, namespace: str) -> bool:
        return ("", namespace) in self._objects.get(("", "namespaces"), {})


def _spec_of(obj: dict[str, Any]) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def objects_owned_by(objects: Iterable[dict[str, Any]], uid: str) -> list[dict[str, Any]]:
    return [o for o in objects if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or ())]

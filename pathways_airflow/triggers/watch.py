"""One shared list+watch per (cluster, namespace, resource) in a triggerer, for every wait in it.

A triggerer may hold thousands of deferred TPU waits for days. Polling each one costs a request
per wait per interval; one watch per wait costs a connection each. Instead, every trigger that
waits on JobSets (or pods, or PathwaysJobs...) of one namespace reads one local cache, kept
current by one watch: list, then watch from the list's resourceVersion with bookmarks; relist on
410 Gone; reconnect with backoff when the stream drops or the API fails. A trigger subscribes
to the objects of its own workload, is woken only when one of them changes, and computes its
workload's state from them.

The cache is indexed by the workload each object belongs to (its ``index``: a JobSet's or
PathwaysJob's own name, a pod's ``jobset-name`` label, a Kueue Workload's owning JobSet), so a
change wakes the triggers of that workload alone and each reads its few objects directly:
with N waits in one triggerer, an event costs O(1) work, not O(N) wake-ups each scanning the
whole cache. ``prune`` drops fields no reader needs before an object is cached (pods carry
their whole spec; the state core reads only its container names and node).

Each object is cached as MessagePack bytes and decoded when a wait reads it. A decoded object is a
tree of dicts, some 15 per pod, that the garbage collector walks on every full collection however
long it lives: a triggerer holding 10,000 waits held three quarters of a million of them, and each
full collection blocked its loop for seconds (``benchmarks/README.md``). Bytes are never walked,
hold half the memory of the dicts, and a wait reads a few objects per look, in microseconds each.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import random
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Iterable

import msgspec

from pathways_airflow.hooks.api import API_OUTAGE_LIMIT_SECONDS, MAX_ATTEMPTS
from pathways_airflow.hooks.pathways import AsyncPathwaysHook, ClusterTarget, status_of
from pathways_airflow.resources import Resource
from pathways_airflow.triggers.pruning import DECODED_FIELDS

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300
MAX_REMEMBERED_DELETIONS = 5000
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0
"""A dropped or failing watch reconnects after ``FIRST_BACKOFF_SECONDS``, doubling to this cap
(each wait jittered ±50 %), as client-go's reflector does: a few streams per cluster, so the API
server coming back is not met by every triggerer at once."""
WAKE_BATCH = 50
"""Waits woken per turn of the loop when all are woken: a wait's first look after a list costs
~0.7 ms (``benchmarks/README.md``), so a turn runs ~35 ms of them, under the 100 ms a stall may last."""
EVENTS_PER_TURN = 100
"""Watch events applied between two turns of the loop (each takes tens of µs)."""
LIST_PAGE = 500
"""Objects per page of a list (``limit``): a page of pods is a few megabytes, parsed in tens of ms."""

Key = tuple[str, str]
"""A cached object's namespace and name."""

_packed = msgspec.msgpack.Encoder().encode
_unpacked = msgspec.msgpack.Decoder().decode


@dataclass(eq=False)
class Subscription:
    """Set when the watched objects change; the subscriber clears it after reading.

    ``keys``: the workloads whose objects the subscriber reads (``None``: every change).
    """

    changed: asyncio.Event = field(default_factory=asyncio.Event)
    keys: frozenset[str] | None = None


Indexer = Callable[[dict[str, Any]], Iterable[str]]


def by_name(obj: dict[str, Any]) -> tuple[str, ...]:
    """A PathwaysJob or JobSet belongs to the workload of its own name."""
    return ((obj.get("metadata") or {}).get("name", ""),)


def by_label(label: str) -> Indexer:
    """A pod belongs to the workload its ``label`` names (the JobSet name label)."""

    def index(obj: dict[str, Any]) -> tuple[str, ...]:
        value = ((obj.get("metadata") or {}).get("labels") or {}).get(label)
        return (value,) if value else ()

    return index


def by_owner(kind: str) -> Indexer:
    """A Kueue Workload belongs to the workload of the ``kind`` object that owns it."""

    def index(obj: dict[str, Any]) -> tuple[str, ...]:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
        return tuple(ref.get("name", "") for ref in refs if ref.get("kind") == kind)

    return index


def api_lost(watches: Iterable["SharedWatch"], limit: float = API_OUTAGE_LIMIT_SECONDS, now: float | None = None) -> str | None:
    """Why a wait should stop waiting for the API, or ``None``: a watch the API has failed for
    ``limit`` seconds or more. Shorter outages are ridden out (the cache keeps its last state)."""
    now = time.time() if now is None else now
    for watch in watches:
        if watch.failing_since is not None and now - watch.failing_since >= limit:
            since = time.strftime("%H:%M:%S UTC", time.gmtime(watch.failing_since))
            return (
                f"the Kubernetes API has failed for {(now - watch.failing_since) / 60:.0f} min watching "
                f"{watch.resource.plural} (since {since}, {watch.consecutive_failures} failures in a row): {watch.last_error}"
            )
    return None


class SharedWatch:
    """A cache of one resource in one namespace, kept current by a single watch."""

    def __init__(
        self,
        target: ClusterTarget,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        index: Indexer = by_name,
        prune: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        quiet: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
    ):
        self.hook = AsyncPathwaysHook(target)
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.index = index
        self.prune = prune
        self.shape = DECODED_FIELDS.get(prune) if prune is not None else None
        """What is decoded of each object, a superset of what ``prune`` keeps (``None``: all of it)."""
        self.quiet = quiet
        """A change (cached before, cached after) no subscriber is woken for, kept in the cache all the same."""
        self.objects: dict[Key, bytes] = {}
        """Each live object as the cache keeps it: pruned, packed (read with :meth:`get`, :meth:`related`...)."""
        self._related: dict[str, set[Key]] = {}
        """Workload key → the keys of live and recently deleted objects that belong to it."""
        self._workloads_of: dict[Key, tuple[str, ...]] = {}
        """Object key → the workload keys it is linked under, so that unlinking needs no unpacking."""
        self.deleted: OrderedDict[Key, bytes] = OrderedDict()
        """The last state of recently deleted objects, packed: a failed Job's pods are deleted at
        once, and with them the evidence of why it failed (exit codes, DisruptionTarget)."""
        self.synced = asyncio.Event()
        self.absent = False
        """The API does not serve this resource (its CRD is not installed)."""
        self.consecutive_failures = 0
        self.failing_since: float | None = None
        """When the API started failing this watch (epoch seconds); ``None`` while it answers."""
        self.last_error = ""
        self.forbidden = ""
        """Why the API refuses this watch (403: a verb RBAC does not grant); empty once it is allowed."""
        self.resource_version = ""
        self.relists = 0
        self._subscribers: set[Subscription] = set()
        self._by_key: dict[str, set[Subscription]] = {}
        self._everything: set[Subscription] = set()
        self._task: asyncio.Task[None] | None = None

    # subscribers ----------------------------------------------------------------------------

    def subscribe(self, keys: Iterable[str] | None = None, changed: asyncio.Event | None = None) -> Subscription:
        """Be woken by changes to the objects of the workloads ``keys`` (``None``: by every change).

        ``changed``: an event the subscriber shares among its subscriptions to several watches, so
        that waiting on all of them is waiting on one event (:func:`wait_for_change`).
        """
        subscription = Subscription(changed=changed or asyncio.Event(), keys=frozenset(keys) if keys is not None else None)
        self._subscribers.add(subscription)
        if subscription.keys is None:
            self._everything.add(subscription)
        else:
            for key in subscription.keys:
                self._by_key.setdefault(key, set()).add(subscription)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"watch {self.resource.plural}")
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)
        self._everything.discard(subscription)
        for key in subscription.keys or ():
            waiting = self._by_key.get(key)
            if waiting is not None:
                waiting.discard(subscription)
                if not waiting:
                    del self._by_key[key]
        if not self._subscribers and self._task is not None:
            self._task.cancel()
            self._task = None
            self.synced.clear()

    def _notify(self, keys: Iterable[str]) -> None:
        """Wake the subscribers of ``keys`` (and those of everything)."""
        woken = set(self._everything)
        for key in keys:
            woken.update(self._by_key.get(key, ()))
        for subscription in woken:
            subscription.changed.set()

    async def _wake_everyone(self) -> None:
        """Wake every subscriber (a list, a failure, a refusal), :data:`WAKE_BATCH` at a time.

        Each woken wait computes its workload's state in the next turn of the loop; waking
        thousands at once would run all of them in one turn and block the loop for as long
        (a triggerer holding 10,000 waits, at start-up or after a relist). A turn of the loop
        between batches lets timers and the other waits' events through.
        """
        everyone = list(self._subscribers)
        for start in range(0, len(everyone), WAKE_BATCH):
            if start:
                await asyncio.sleep(0)
            for subscription in everyone[start : start + WAKE_BATCH]:
                subscription.changed.set()

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        packed = self.objects.get((namespace or self.namespace or "", name))
        return None if packed is None else _unpacked(packed)

    def values(self) -> list[dict[str, Any]]:
        return [_unpacked(packed) for packed in list(self.objects.values())]

    def by_name(self) -> Mapping[str, dict[str, Any]]:
        """The cache of a cluster-scoped resource (nodes) by name, as a live view: a verdict reads
        a few nodes of a fleet's thousands without copying or indexing them all."""
        return _ByName(self)

    def related(self, key: str) -> list[dict[str, Any]]:
        """The live objects that belong to workload ``key``."""
        return [_unpacked(self.objects[k]) for k in self._related.get(key, ()) if k in self.objects]

    def related_deleted(self, key: str) -> list[dict[str, Any]]:
        """The last state of recently deleted objects that belonged to workload ``key``."""
        return [_unpacked(self.deleted[k]) for k in self._related.get(key, ()) if k in self.deleted and k not in self.objects]

    def _link(self, key: Key, workloads: tuple[str, ...]) -> tuple[str, ...]:
        self._workloads_of[key] = workloads
        for workload in workloads:
            self._related.setdefault(workload, set()).add(key)
        return workloads

    def _unlink(self, key: Key) -> tuple[str, ...]:
        workloads = self._workloads_of.pop(key, ())
        for workload in workloads:
            members = self._related.get(workload)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._related[workload]
        return workloads

    # the loop -------------------------------------------------------------------------------

    async def _run(self) -> None:
        freeze_what_is_held()  # what the process held before this watch's first wait: Airflow's own, the waits started so far
        backoff = FIRST_BACKOFF_SECONDS
        while True:
            try:
                await self._list()
                backoff = FIRST_BACKOFF_SECONDS
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if not self._subscribers:
                    return  # stopped (its last wait ended) while its stream was being closed: no failure to report
                if status_of(error) == 404 and not self.synced.is_set():
                    self.absent = True
                    self.synced.set()
                    await self._wake_everyone()
                    return
                if status_of(error) == 403:
                    # RBAC will not change by retrying fast: say so once, loudly, and let every
                    # waiter fail at once; keep trying slowly in case the verb is granted.
                    if not self.forbidden:
                        log.error("watching %s in %s is forbidden: %s", self.resource.plural, self.namespace or "all namespaces", error)
                    self.forbidden = _forbidden_reason(error, self.resource.plural, self.namespace)
                    self.synced.set()
                    await self._wake_everyone()
                    await asyncio.sleep(MAX_BACKOFF_SECONDS)
                    continue
                self.consecutive_failures += 1
                if self.failing_since is None:
                    self.failing_since = time.time()
                self.last_error = f"{type(error).__name__}: {error}"[:500]
                log.warning(
                    "watch on %s in %s failed (%d in a row): %s; reconnecting in %.1fs",
                    self.resource.plural, self.namespace or "all namespaces", self.consecutive_failures, self.last_error, backoff,
                )
                await self._wake_everyone()
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)

    async def _list(self) -> None:
        """List everything (a page of :data:`LIST_PAGE` at a time), then replace the cache at once.

        Pages keep each parse short: thousands of pods in one answer are tens of megabytes of
        JSON, parsed in one go, blocking the loop for as long. Each page is pruned before the next
        is read, so the whole list is never held unpruned either. All pages come from one
        snapshot (one resourceVersion), as the API server serves a ``continue``.
        """
        listed: dict[Key, bytes] = {}
        workloads: dict[Key, tuple[str, ...]] = {}
        version, token = "", None
        while True:
            body = await self.hook.list_page(
                self.resource, self.namespace, label_selector=self.label_selector, limit=LIST_PAGE, continue_token=token, attempts=MAX_ATTEMPTS,
                shape=self.shape,
            )
            if not isinstance(body, dict) or not isinstance(body.get("items") or [], list):
                raise ValueError(f"listing {self.resource.plural}: not a list object: {str(body)[:200]!r}")
            # Items that are not objects with metadata are skipped, as malformed watch events are:
            # the state core reads pod["metadata"] and must never see one without it.
            page = [o for o in body.get("items") or [] if isinstance(o, dict) and isinstance(o.get("metadata"), dict)]
            for obj in page:
                obj = self._pruned(obj)
                key = _key(obj)
                listed[key], workloads[key] = _packed(obj), tuple(self.index(obj))
            metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            version = version or str(metadata.get("resourceVersion") or "")
            token = metadata.get("continue") if isinstance(metadata.get("continue"), str) else None
            if not token:
                break
            await asyncio.sleep(0)
        for key in self.objects.keys() - listed.keys():
            # Deleted while no watch saw it (an outage, a 410): kept in its last known state, as
            # client-go's informer hands a relist's missing objects on as DeletedFinalStateUnknown
            # (tools/cache/delta_fifo.go, Replace), so a head pod's exit or a worker's node is not forgotten.
            self._remember_deleted(key, _unpacked(self.objects[key]))
        remembered = {key: self._workloads_of.get(key, ()) for key in self.deleted}
        self.objects, self._related, self._workloads_of = listed, {}, {}
        for key, linked in (*remembered.items(), *workloads.items()):
            self._link(key, linked)
        self.resource_version = version
        self.relists += 1
        self.consecutive_failures = 0
        self.failing_since = None
        self.forbidden = ""
        self.synced.set()
        freeze_what_is_held()
        await self._wake_everyone()

    async def _watch(self) -> None:
        """Follow events until the stream ends (re-watch) or history is gone (relist).

        One chunk of the stream can carry thousands of events (a busy namespace, a burst of
        endings); a turn of the loop every :data:`EVENTS_PER_TURN` of them keeps applying a
        burst from blocking the waits it wakes, and every other wait, for all of it.
        """
        applied = 0
        while True:
            received = False
            async for event in self.hook.watch(
                self.resource,
                self.namespace,
                self.resource_version,
                label_selector=self.label_selector,
                timeout_seconds=WATCH_TIMEOUT_SECONDS,
                shape=self.shape,
            ):
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        log.info("watch on %s: history compacted (410 Gone), listing again", self.resource.plural)
                        return
                    raise RuntimeError(f"watch error: {obj.get('message') or obj}")
                if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
                    continue  # malformed event: skip it, the next list repairs the cache
                self.resource_version = obj["metadata"].get("resourceVersion") or self.resource_version
                received = True
                if kind == "BOOKMARK":
                    continue
                self.apply(kind, obj)
                self.consecutive_failures = 0
                applied += 1
                if applied % EVENTS_PER_TURN == 0:
                    await asyncio.sleep(0)
            if not received:
                await asyncio.sleep(0)  # an empty stream (timeout, dropped): watch again at once

    def apply(self, kind: str, obj: dict[str, Any]) -> None:
        """One ``ADDED``, ``MODIFIED`` or ``DELETED`` event's object, cached, indexed, and the waits of
        its workload woken (none for a change :attr:`quiet` calls quiet)."""
        obj = self._pruned(obj)
        key = _key(obj)
        live = self.objects.get(key)
        if kind == "MODIFIED" and live is not None and self.quiet is not None and self.quiet(_unpacked(live), obj):
            self.objects[key] = _packed(obj)  # cached for the next look; no one is woken for it
            return
        touched = set(self._unlink(key))
        if kind == "DELETED":
            self.objects.pop(key, None)
            self._remember_deleted(key, obj)
        elif kind in ("ADDED", "MODIFIED"):
            self.objects[key] = _packed(obj)
            self.deleted.pop(key, None)
        touched.update(self._link(key, tuple(self.index(obj))))
        self._notify(touched)

    def _pruned(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj if self.prune is None else self.prune(obj)

    def _remember_deleted(self, key: Key, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if "deletionTimestamp" not in meta:
            obj = {**obj, "metadata": {**meta, "deletionTimestamp": "deleted"}}
        self.deleted[key] = _packed(obj)
        while len(self.deleted) > MAX_REMEMBERED_DELETIONS:
            forgotten, _ = self.deleted.popitem(last=False)
            if forgotten not in self.objects:
                self._unlink(forgotten)


def _forbidden_reason(error: BaseException, plural: str, namespace: str | None) -> str:
    """The API's own words for a 403 (they name the user, verb, resource and namespace), or ours."""
    body = getattr(error, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (TypeError, ValueError, AttributeError):
        message = None
    return str(message or f"{plural} in {namespace or 'all namespaces'}: forbidden ({error})")[:500]


class _ByName(Mapping[str, dict[str, Any]]):
    """:meth:`SharedWatch.by_name`."""

    def __init__(self, watch: SharedWatch) -> None:
        self.watch = watch

    def __getitem__(self, name: str) -> dict[str, Any]:
        return _unpacked(self.watch.objects[("", name)])

    def __iter__(self) -> Iterator[str]:
        return (name for _, name in list(self.watch.objects))

    def __len__(self) -> int:
        return len(self.watch.objects)


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace", ""), meta.get("name", ""))


_WATCHES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, str, str], SharedWatch]]" = (
    weakref.WeakKeyDictionary()
)


def shared_watch(
    target: ClusterTarget,
    resource: Resource,
    namespace: str | None,
    label_selector: str | None = None,
    *,
    index: Indexer = by_name,
    prune: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    quiet: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
) -> SharedWatch:
    """The running loop's watch of ``resource`` in ``namespace`` on ``target``, made on first use.

    ``index``, ``prune`` and ``quiet`` are fixed by the first caller: every caller of one (resource,
    namespace, selector) must pass the same ones.
    """
    watches = _WATCHES.setdefault(asyncio.get_running_loop(), {})
    key = (target.key, resource.path(namespace), namespace or "", label_selector or "")
    if key not in watches:
        watches[key] = SharedWatch(target, resource, namespace, label_selector, index=index, prune=prune, quiet=quiet)
    return watches[key]


FREEZE_OPTION = ("pathways", "freeze_gc_after_sync")
"""``[pathways] freeze_gc_after_sync`` (off by default): see :func:`freeze_what_is_held`."""


def freeze_what_is_held() -> bool:
    """With ``[pathways] freeze_gc_after_sync``, leave what the process holds now out of every later
    garbage collection (:func:`gc.freeze`); True when it did.

    Every full collection walks every container the process holds: Airflow's own (some 240,000
    in the benchmark's triggerer, once it has imported what it runs) and its waits' (some 80
    each; the caches hold bytes, which no collection walks). At N = 1000 each one blocked the
    loop for ~170 ms (``benchmarks/README.md``). Frozen as a watch starts (Airflow's own objects, the waits
    started so far) and after each of its lists, they are never walked again. The young
    generations are collected first, so that little cyclic garbage is frozen with them; but a
    wait alive at the freeze that later ends in a reference cycle is never collected. It acts on
    the whole triggerer process, as Airflow's own dag-processor does before it forks; hence opt-in.
    Measured at N = 1000: the longest stall 177 → 38 ms, and what the ended waits then left in
    cycles 780 objects against 198 without it (``--gc-freeze``).
    """
    from airflow.providers.common.compat.sdk import conf

    if not conf.getboolean(*FREEZE_OPTION, fallback=False):
        return False
    gc.collect(1)
    gc.freeze()
    return True


RECHECK_SPREAD = 0.25
"""A recheck comes up to this share of its period early, at random: thousands of waits started
together (a triggerer restart) then stop firing their rechecks in the same instant."""


def spread(seconds: float) -> float:
    """``seconds`` less a random part of up to :data:`RECHECK_SPREAD` of it: never later than asked."""
    return seconds * (1.0 - RECHECK_SPREAD * random.random())


def recheck_in(period: float, remaining: float | None) -> float:
    """How long to wait for a change before looking anyway: :func:`spread` ``period``, and never
    past the ``remaining`` seconds of the task's deadline (``None``: it has none)."""
    return spread(period) if remaining is None else min(spread(period), remaining)


async def wait_for_change(subscriptions: list[Subscription], timeout: float) -> bool:
    """Wait until any subscription fires (True) or ``timeout`` seconds pass (False); either way
    the subscriptions are re-armed, so the next wait waits for a change after this one."""
    events = list({id(s.changed): s.changed for s in subscriptions}.values())
    if len(events) == 1:  # one shared event (a trigger's usual case): no task per wait, nothing to cancel
        done = events[0].is_set()
        if done:
            await asyncio.sleep(0)  # still a turn of the loop, as a wait that returns at once always gave
        else:
            try:
                async with asyncio.timeout(timeout):
                    done = await events[0].wait()
            except TimeoutError:
                done = False
    else:
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            done = bool((await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED))[0])
        finally:
            for waiter in waiters:
                waiter.cancel()
    for subscription in subscriptions:
        subscription.changed.clear()
    return bool(done)

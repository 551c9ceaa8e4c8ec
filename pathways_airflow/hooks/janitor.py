"""The janitor's Kubernetes I/O: list the workloads labelled as ours, delete orphans, see their pods go.

The decisions are :mod:`pathways_airflow.state.janitor`'s; this module only reads and acts,
through :class:`~pathways_airflow.hooks.pathways.PathwaysHook` (its retries, its client).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from pathways_airflow.hooks.pathways import PathwaysHook
from pathways_airflow.hooks.reclaim import wait_reclaimed
from pathways_airflow.resources import BY_KIND, WORKLOAD_KINDS
from pathways_airflow.spec.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE, TASK_KEY_LABEL, TaskIdentity
from pathways_airflow.state.janitor import GRACE_PERIOD, TaskAnswer, Verdict, judge_all, tasks_to_ask

MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{TASK_KEY_LABEL}"
"""Our workloads: managed by us and carrying a task key (a set-based ``exists`` requirement)."""


def managed_workloads(hook: PathwaysHook, namespace: str | None) -> list[dict[str, Any]]:
    """Every PathwaysJob and JobSet labelled as ours, in ``namespace`` or (``None``) in all.

    A cluster without the PathwaysJob CRD answers 404 for its list: it has none of them.
    """
    found: list[dict[str, Any]] = []
    for resource in WORKLOAD_KINDS:
        try:
            items = hook.list(resource, namespace, label_selector=MANAGED_SELECTOR)
        except Exception as error:
            if getattr(error, "status", None) != 404:
                raise
            items = []
        # A list's items carry no kind or apiVersion: put them back, the rule reads the kind.
        found.extend({**item, "kind": resource.kind, "apiVersion": resource.api_version} for item in items)
    return found


def server_time(hook: PathwaysHook) -> dt.datetime:
    """The API server's time (the ``Date`` of its answer to ``GET /version``), else this machine's.

    Workload ages are measured on the clock that wrote their ``creationTimestamp``, so a skewed
    clock where the janitor runs can never make a fresh workload look older than the grace period.
    """
    try:
        response = hook.api_client.call_api(
            "/version", "GET", header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            _preload_content=False, _return_http_data_only=True,
        )
        return email.utils.parsedate_to_datetime(response.headers["Date"])
    except Exception as error:  # no Date, or no answer: the listing that follows will say why
        hook.log.info("the API server's time is unknown (%s): ages are measured on this machine's clock", error)
        return dt.datetime.now(dt.timezone.utc)


def delete_orphans(hook: PathwaysHook, orphans: Sequence[Verdict], *, wait_seconds: float) -> tuple[list[Verdict], list[str]]:
    """Delete each orphan (background propagation: the owner goes now, the garbage collector
    takes its JobSet, Jobs and pods), then wait up to ``wait_seconds`` for their pods, doing the
    collector's work if it is late (:func:`~pathways_airflow.hooks.reclaim.wait_reclaimed`).

    Returns the orphans deleted (one already gone is not counted) and what is left when the wait
    ran out (``namespace/workload: N pods``).
    """
    deleted = [v for v in orphans if hook.delete(BY_KIND[v.kind], v.namespace, v.name, propagation="Background")]
    left: list[str] = []
    deadline = time.monotonic() + wait_seconds
    for verdict in deleted if wait_seconds > 0 else []:
        leftovers = wait_reclaimed(hook, verdict.namespace, verdict.name, timeout=max(0.0, deadline - time.monotonic()))
        if not leftovers.gone:
            left.append(f"{verdict.namespace}/{verdict.name}: {leftovers.holding} pods")
    return deleted, left


@dataclass(frozen=True)
class Sweep:
    """One pass of the janitor: a verdict per workload, what was deleted, what had not gone yet."""

    verdicts: list[Verdict]
    deleted: list[Verdict]
    left: list[str]


def sweep(
    hook: PathwaysHook,
    namespace: str | None,
    ask: Callable[[list[TaskIdentity]], Mapping[TaskIdentity, TaskAnswer]],
    *,
    grace_period: dt.timedelta = GRACE_PERIOD,
    delete: bool = False,
    wait_seconds: float = 300.0,
) -> Sweep:
    """List our workloads, ask Airflow (``ask``) about their task instances, judge them, and with
    ``delete`` delete the orphans. The API server's clock is read before anything is listed, so no
    workload is judged older than it was when Airflow answered for its task instance."""
    now = server_time(hook)
    workloads = managed_workloads(hook, namespace)
    answers = ask(tasks_to_ask(workloads)) if workloads else {}
    verdicts = judge_all(workloads, answers, now, grace_period)
    if not delete:
        return Sweep(verdicts, [], [])
    deleted, left = delete_orphans(hook, [v for v in verdicts if v.delete], wait_seconds=wait_seconds)
    return Sweep(verdicts, deleted, left)

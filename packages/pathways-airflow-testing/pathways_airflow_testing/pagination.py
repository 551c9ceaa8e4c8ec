"""Chunked lists (``limit`` and ``continue``), as the Kubernetes API server pages a LIST.

A client that asks for ``limit`` items gets at most that many, with ``metadata.continue`` while
more remain (and ``remainingItemCount`` when no selector narrowed the list); passing the token
back serves the next page of the same snapshot, at the same ``resourceVersion``, however the
objects changed meanwhile (apiserver/pkg/storage/etcd3/store.go ``GetList``: every page reads
etcd at the first page's revision). A token the server no longer holds answers 410 Expired, as
a compacted revision does there.

The token is opaque to clients. The real one is base64 JSON naming the revision and the key to
start after (apiserver/pkg/storage/continue.go ``EncodeContinue``); this one has the same shape,
and the snapshot itself stays in memory here, a few at a time.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pathways_airflow_testing.errors import bad_request, gone

KEPT_SNAPSHOTS = 64


@dataclass
class Page:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str
    remaining: int | None


class ListPages:
    """The snapshots of lists being read page by page, oldest forgotten first."""

    def __init__(self) -> None:
        self._snapshots: OrderedDict[str, tuple[list[dict[str, Any]], str]] = OrderedDict()
        self._made = 0

    def page(self, items: list[dict[str, Any]], resource_version: str, query: dict[str, str] | Any, selected: bool) -> Page | None:
        """The page ``query`` asks for (``None``: no ``limit`` nor ``continue``, the whole list)."""
        token = query.get("continue") or ""
        limit_text = query.get("limit") or ""
        if not token and not limit_text:
            return None
        try:
            limit = int(limit_text) if limit_text else 0
        except ValueError:
            raise bad_request(f"invalid limit {limit_text!r}") from None
        if token:
            if token not in self._snapshots:
                raise gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
            items, resource_version = self._snapshots.pop(token)
        else:
            items = sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        if limit <= 0 or limit >= len(items):
            return Page(items, resource_version, "", None)
        rest = items[limit:]
        self._made += 1
        last = items[limit - 1]["metadata"]
        next_token = base64.b64encode(
            json.dumps({"v": "meta.k8s.io/v1", "rv": int(resource_version or 0), "start": f"{last.get('namespace', '')}/{last['name']}\u0000", "n": self._made}).encode()
        ).decode()
        self._snapshots[next_token] = (rest, resource_version)
        while len(self._snapshots) > KEPT_SNAPSHOTS:
            self._snapshots.popitem(last=False)
        return Page(items[:limit], resource_version, next_token, None if selected else len(rest))

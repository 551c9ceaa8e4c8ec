"""API faults a test can inject: error bursts, slow calls, garbage. What production throws at clients.

A rule matches requests by method and a regular expression on the path and, while it has
budget left, answers with an error ``Status`` (429 with ``Retry-After``, 500, 503 ...) instead of
serving the request, or adds latency before serving it, or answers with a raw ``body`` of its
own (an HTML error page with status 200 from a proxy, truncated or non-JSON text), or — for a
watch — streams ``watch_lines`` (raw bytes: half a JSON line, events of unknown types, objects
without status) and then ends the stream.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from pathways_airflow_testing.errors import ApiError

_REASONS = {
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class FaultRule:
    """Answer ``count`` matching requests with ``status`` (or delay them by ``latency`` seconds)."""

    path_pattern: str = ".*"
    status: int | None = 500
    count: int = 1
    methods: tuple[str, ...] = ()
    retry_after: int | None = None
    latency: float = 0.0
    watch: bool | None = None
    """Match only watch requests (True), only non-watch requests (False), or both (None)."""
    body: bytes | None = None
    """Answer with these raw bytes (and ``status``, default 200) instead of serving the request."""
    content_type: str = "application/json"
    watch_lines: tuple[bytes, ...] | None = None
    """For a watch: send these raw chunks as the stream, then close it."""
    served: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.path_pattern)

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        if self.served >= self.count:
            return False
        if self.methods and method.upper() not in self.methods:
            return False
        if self.watch is not None and self.watch != is_watch:
            return False
        return bool(self._regex.search(path))

    @property
    def raw(self) -> bool:
        """Answers with bytes of its own rather than an error ``Status``."""
        return self.body is not None or self.watch_lines is not None

    def error(self) -> ApiError | None:
        if self.status is None or self.raw:
            return None
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        reason = _REASONS.get(self.status, "InternalError")
        return ApiError(self.status, reason, f"injected fault: {reason} ({self.status})", headers=headers)


class Faults:
    """The active fault rules; safe to change from any thread."""

    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()
        self.stalls: list[tuple[float, float]] = []
        """(start, end) in cluster time of each wait a fault imposed on a client: a slow answer's
        latency, or the ``Retry-After`` a 429 or 503 asked it to wait. The client waits real
        seconds, so each lasts that many seconds times the cluster's speed."""

    def stalled(self, now: float, seconds: float, speed: float) -> None:
        """Record that a fault made a client wait ``seconds`` real seconds from cluster time ``now``."""
        with self._lock:
            self.stalls.append((now, now + seconds * speed))

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def take(self, method: str, path: str, is_watch: bool) -> tuple[float, ApiError | None]:
        """The latency and the error of the first rule that matches, consuming one of its budget.

        Rules apply in the order they were added: two bursts on one path follow each other.
        """
        rule = self.take_rule(method, path, is_watch)
        return (rule.latency, rule.error()) if rule is not None else (0.0, None)

    def take_rule(self, method: str, path: str, is_watch: bool) -> FaultRule | None:
        """The first matching rule, consuming one of its budget (``None``: serve normally)."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path, is_watch):
                    rule.served += 1
                    self._rules = [r for r in self._rules if r.served < r.count]
                    return rule
        return None

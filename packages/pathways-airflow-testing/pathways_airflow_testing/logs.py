"""Container logs, as ``kubectl logs`` and ``read_namespaced_pod_log`` read them."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field


@dataclass
class ContainerLog:
    """The lines one container wrote, with simulated timestamps, and whether it has ended."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    finished: bool = False
    changed: asyncio.Event | None = None

    def append(self, when: float, line: str) -> None:
        self.lines.append((when, line))
        if self.changed is not None:
            self.changed.set()

    def finish(self) -> None:
        self.finished = True
        if self.changed is not None:
            self.changed.set()


def format_line(when: float, line: str, timestamps: bool) -> str:
    if not timestamps:
        return line + "\n"
    stamp = dt.datetime.fromtimestamp(when, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp} {line}\n"


def select_lines(
    log: ContainerLog, *, now: float, tail_lines: int | None, since_seconds: float | None
) -> list[tuple[float, str]]:
    """The lines ``tailLines`` and ``sinceSeconds`` ask for (both apply, as on a kubelet)."""
    lines = log.lines
    if since_seconds is not None:
        lines = [entry for entry in lines if entry[0] >= now - since_seconds]
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    return list(lines)


class LogStore:
    """Logs keyed by (namespace, pod, container); kept after the pod is gone, like a log backend."""

    def __init__(self) -> None:
        self._logs: dict[tuple[str, str, str], ContainerLog] = {}

    def log(self, namespace: str, pod: str, container: str) -> ContainerLog:
        return self._logs.setdefault((namespace, pod, container), ContainerLog())

    def find(self, namespace: str, pod: str, container: str) -> ContainerLog | None:
        return self._logs.get((namespace, pod, container))

    def drop_pod(self, namespace: str, pod: str) -> None:
        for key in [k for k in self._logs if k[:2] == (namespace, pod)]:
            del self._logs[key]

"""What a stand-in program sees when the local cluster's kubelet runs it.

A stand-in is ``async def program(ctx: ProgramContext) -> int``: it runs as an asyncio task on
the cluster's event loop (no subprocess), reads its command line and environment from ``ctx``,
sleeps on the cluster's virtual clock, writes log lines and GCS objects, and returns its exit
code. Being killed (pod deleted, node shutdown, SIGTERM) is an ``asyncio.CancelledError`` raised
inside it: a program may catch it to save state during its grace period, then re-raise it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping, Protocol

from pathways_airflow_testing.clock import VirtualClock


class GcsAccess(Protocol):
    """The asynchronous GCS operations a stand-in needs, on ``gs://bucket/path`` URIs."""

    async def write(self, uri: str, data: bytes) -> None: ...

    async def read(self, uri: str) -> bytes | None:
        """The object's bytes, or ``None`` if it does not exist."""

    async def exists(self, uri: str) -> bool: ...

    async def list(self, prefix_uri: str, *, delimiter: str | None = "/") -> tuple[list[str], list[str]]:
        """``(sub-prefix URIs, object URIs)`` directly under ``prefix_uri`` (with a delimiter)."""

    async def delete_prefix(self, prefix_uri: str) -> int:
        """Delete every object under ``prefix_uri``; returns how many."""


@dataclass
class ProgramContext:
    """The pod, container and cluster facilities a stand-in program runs with."""

    namespace: str
    pod_name: str
    container_name: str
    argv: list[str]
    """``command + args`` of the container, after ``$(VAR)`` expansion, as the kubelet runs it."""
    env: Mapping[str, str]
    clock: VirtualClock
    gcs: GcsAccess
    log: Callable[[str], None]
    """Append one line to the container's log (``kubectl logs``)."""
    publish_port: Callable[[int, int], None]
    """``publish_port(container_port, loopback_port)``: the container's port is served on
    ``127.0.0.1:loopback_port`` (services, pod proxies and ``resolve`` find it there)."""
    resolve: Callable[[str, int], Awaitable[tuple[str, int] | None]]
    """``await resolve(host, port)``: a Service name (``svc``, ``svc.ns``, ``svc.ns.svc...``) or
    pod hostname and a port → the loopback address serving it, or ``None``."""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    slices: "SliceView | None" = None
    """On a Pathways head whose proxy runs with ``--num_elastic_slices``: its slices; else ``None``."""


Program = Callable[[ProgramContext], Awaitable[int]]


class SliceView(Protocol):
    """What a program on a Pathways head with elastic slices learns of its TPU slices: what
    pathwaysutils' elastic manager tells a JAX program (a lost slice, every slice back)."""

    handles_losses: bool
    """Set by a program that rides out a lost slice itself; otherwise losing one fails its head."""
    losses: int
    """Slice losses so far: a step running when it grows fails."""

    def all_ready(self) -> bool:
        """Every worker pod of the head's JobSet (this restart attempt) is running."""

"""Running stand-in programs in a test: a context on a fast clock against the GCS emulator, and
what the program did (its log lines, its published ports)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping

import pytest

from pathways_airflow_testing.clock import VirtualClock
from pathways_airflow_testing.gcs import AsyncGcs, GcsEmulator
from pathways_airflow_testing.programs.base import ProgramContext

BUCKET = "pathways-demo"
SPEED = 1000.0  # one simulated second is a real millisecond


@pytest.fixture(scope="module")
def emulator():
    with GcsEmulator([BUCKET]) as running:
        yield running


@pytest.fixture
def base() -> str:
    """A fresh ``base_output_directory`` per test, so tests never see each other's objects."""
    return f"gs://{BUCKET}/{uuid.uuid4().hex[:10]}"


class RecordingGcs:
    """The real AsyncGcs, remembering the order of writes so tests can check commit ordering."""

    def __init__(self, gcs: AsyncGcs):
        self.gcs = gcs
        self.writes: list[str] = []

    async def write(self, uri: str, data: bytes) -> None:
        await self.gcs.write(uri, data)
        self.writes.append(uri)

    async def read(self, uri: str) -> bytes | None:
        return await self.gcs.read(uri)

    async def exists(self, uri: str) -> bool:
        return await self.gcs.exists(uri)

    async def list(self, prefix_uri: str, *, delimiter: str | None = "/") -> tuple[list[str], list[str]]:
        return await self.gcs.list(prefix_uri, delimiter=delimiter)

    async def delete_prefix(self, prefix_uri: str) -> int:
        return await self.gcs.delete_prefix(prefix_uri)


@dataclass
class Container:
    """One stand-in's context plus what it did: its log lines and published ports."""

    context: ProgramContext
    logs: list[str] = field(default_factory=list)
    ports: dict[int, int] = field(default_factory=dict)

    def lines_with(self, text: str) -> list[str]:
        return [line for line in self.logs if text in line]


Services = Mapping[str, Mapping[int, int]]


def container(
    gcs: RecordingGcs,
    argv: list[str],
    env: Mapping[str, str] | None = None,
    *,
    services: Services | None = None,
    clock: VirtualClock | None = None,
) -> Container:
    logs: list[str] = []
    ports: dict[int, int] = {}

    async def resolve(host: str, port: int) -> tuple[str, int] | None:
        published = (services or {}).get(host.split(".")[0], {})
        return ("127.0.0.1", published[port]) if port in published else None

    context = ProgramContext(
        namespace="default",
        pod_name="pod-0",
        container_name="main",
        argv=argv,
        env=dict(env or {}),
        clock=clock or VirtualClock(SPEED),
        gcs=gcs,
        log=logs.append,
        publish_port=ports.__setitem__,
        resolve=resolve,
    )
    return Container(context, logs, ports)


def on_loop(emulator: GcsEmulator, scenario: Callable[[RecordingGcs], Awaitable[object]]) -> object:
    async def main():
        async with AsyncGcs(emulator.endpoint) as gcs:
            return await scenario(RecordingGcs(gcs))

    return asyncio.run(main())


async def cancel(task: asyncio.Task) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

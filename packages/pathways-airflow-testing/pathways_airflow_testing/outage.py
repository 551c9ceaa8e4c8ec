"""A loopback TCP proxy that can make what is behind it unreachable for a while.

Put it in front of the GCS emulator (or any HTTP endpoint) and point a client at ``endpoint``:
while reachable, bytes pass both ways unchanged; during an outage, every connection — the ones
already open included, so a pooled keep-alive socket does not slip through — is cut, and new
ones are either reset at once (``"refuse"``, as a restarting load balancer does) or answered
``503 Service Unavailable`` (``"503"``, as an overloaded front end does). The outage ends by
itself after the given seconds; the server behind it keeps its data and never notices. Nothing
sleeps: a test waits only as long as the outage it asked for.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from typing import Literal
from urllib.parse import urlsplit

Answer = Literal["refuse", "503"]

_UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b'Content-Length: 71\r\n\r\n{"error": {"code": 503, "message": "outage injected by the local proxy"}}'
)


class OutageProxy:
    """``http://127.0.0.1:PORT`` forwarding to ``upstream``, with :meth:`unreachable_for` outages."""

    def __init__(self, upstream: str):
        parts = urlsplit(upstream if "://" in upstream else f"http://{upstream}")
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.port: int | None = None
        self.answer: Answer = "refuse"
        self._outage_until = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError("the proxy is not running: call start() first")
        return f"http://127.0.0.1:{self.port}"

    @property
    def in_outage(self) -> bool:
        return time.monotonic() < self._outage_until

    def start(self) -> "OutageProxy":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="outage-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        loop, self._loop = self._loop, None

        async def close() -> None:
            self._cut_all()
            if self._server is not None:
                self._server.close()

        asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        loop.close()

    def __enter__(self) -> "OutageProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def unreachable_for(self, seconds: float, answer: Answer = "refuse") -> None:
        """Start an outage now that ends by itself ``seconds`` later (returns at once)."""
        self.answer = answer
        self._outage_until = time.monotonic() + seconds
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._cut_all)

    def reachable_again(self) -> None:
        self._outage_until = 0.0

    # --- the proxy -------------------------------------------------------------------------------

    def _cut_all(self) -> None:
        for writer in list(self._open):
            _reset(writer)
        self._open.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.in_outage:
            await self._refuse(reader, writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            _reset(writer)
            return
        self._open.update((writer, up_writer))
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            for each in (writer, up_writer):
                self._open.discard(each)
                each.close()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.answer == "503":
            try:
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                writer.write(_UNAVAILABLE)
                await writer.drain()
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError):
                pass
            writer.close()
            return
        _reset(writer)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        if not sink.is_closing():
            sink.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (``SO_LINGER`` 0): the client sees its connection refused or reset."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.close()

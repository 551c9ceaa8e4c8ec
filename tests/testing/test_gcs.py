"""The GCS emulator is a real fake-gcs-server, and AsyncGcs and google-cloud-storage agree on it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from pathways_airflow_testing.gcs import AsyncGcs, GcsEmulator, GcsError, parse_gcs_uri

BUCKET = "pathways-demo"


@pytest.fixture(scope="module")
def emulator():
    with GcsEmulator([BUCKET, "second-bucket"]) as running:
        yield running


@pytest.fixture
def prefix() -> str:
    return f"gs://{BUCKET}/{uuid.uuid4().hex[:10]}/"


@pytest.fixture
def gcs_client(emulator, monkeypatch) -> storage.Client:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
    return storage.Client(project="test", credentials=AnonymousCredentials())


def run(coroutine_function, *args):
    return asyncio.run(coroutine_function(*args))


def test_emulator_serves_its_buckets_on_loopback(emulator, monkeypatch):
    assert emulator.endpoint.startswith("http://127.0.0.1:")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
    client = storage.Client(project="test", credentials=AnonymousCredentials())
    assert {b.name for b in client.list_buckets()} >= {BUCKET, "second-bucket"}


def test_stop_kills_the_server_and_leaves_the_environment_alone(monkeypatch):
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    emulator = GcsEmulator(["only"]).start()
    process_id = emulator.pid
    assert emulator.running and process_id is not None
    assert "STORAGE_EMULATOR_HOST" not in os.environ
    emulator.stop()
    assert not emulator.running
    assert not _alive(process_id)
    with pytest.raises(RuntimeError, match="not running"):
        emulator.endpoint


def test_a_bucket_gcs_would_refuse_fails_the_start_and_leaves_no_server():
    emulator = GcsEmulator(["ok-bucket", "x"])  # bucket names need 3 to 63 characters
    with pytest.raises(GcsError, match="invalid bucket name"):
        emulator.start()
    assert not emulator.running


def test_the_filesystem_backend_keeps_objects_in_its_own_directory():
    async def scenario(endpoint: str):
        async with AsyncGcs(endpoint) as gcs:
            await gcs.write("gs://on-disk/a/b", b"data")
            assert await gcs.read("gs://on-disk/a/b") == b"data"

    with GcsEmulator(["on-disk"], backend="filesystem") as emulator:
        run(scenario, emulator.endpoint)
        workdir = emulator.log_path.parent
        assert any(path.is_file() for path in (workdir / "objects").rglob("*"))
    assert not workdir.exists()


def test_a_forgotten_emulator_is_killed_when_the_interpreter_exits():
    script = textwrap.dedent(
        """
        from pathways_airflow_testing.gcs import GcsEmulator
        emulator = GcsEmulator().start()
        print(emulator.pid, flush=True)
        """
    )
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    process_id = int(finished.stdout.strip())
    deadline = time.monotonic() + 5
    while _alive(process_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(process_id)


def test_write_read_exists_list_and_delete(emulator, prefix):
    names = ["a/1", "a/2", "a/b/3", "a/c d#?%+/4", "a/ü/5", "z"]

    async def scenario():
        async with AsyncGcs(emulator.endpoint, page_size=2) as gcs:
            for name in names:
                await gcs.write(prefix + name, name.encode())
            assert await gcs.read(prefix + "a/c d#?%+/4") == b"a/c d#?%+/4"
            assert await gcs.read(prefix + "a/ü/5") == "a/ü/5".encode()
            assert await gcs.read(prefix + "missing") is None
            assert await gcs.exists(prefix + "a/1")
            assert not await gcs.exists(prefix + "a")  # a "directory" is not an object

            subdirs, objects = await gcs.list(prefix + "a/")
            assert subdirs == [prefix + "a/b/", prefix + "a/c d#?%+/", prefix + "a/ü/"]
            assert objects == [prefix + "a/1", prefix + "a/2"]
            _, everything = await gcs.list(prefix, delimiter=None)
            assert everything == sorted(prefix + n for n in names)

            await gcs.write(prefix + "a/1", b"replaced")
            assert await gcs.read(prefix + "a/1") == b"replaced"

            assert await gcs.delete_prefix(prefix + "a/") == 5
            assert await gcs.list(prefix, delimiter=None) == ([], [prefix + "z"])
            assert await gcs.list("gs://no-such-bucket/x/") == ([], [])
            assert not await gcs.delete(prefix + "a/1")

    run(scenario)


def test_objects_written_by_async_gcs_are_read_by_google_cloud_storage(emulator, prefix, gcs_client):
    async def scenario():
        async with AsyncGcs(emulator.endpoint) as gcs:
            await gcs.write(prefix + "ckpt/10/commit_success.txt", b"done")

    run(scenario)
    bucket, name = parse_gcs_uri(prefix + "ckpt/10/commit_success.txt")
    blob = gcs_client.bucket(bucket).blob(name)
    assert blob.exists()
    assert blob.download_as_bytes() == b"done"
    listed = gcs_client.list_blobs(bucket, prefix=parse_gcs_uri(prefix + "ckpt/")[1], delimiter="/")
    list(listed)
    assert set(listed.prefixes) == {parse_gcs_uri(prefix + "ckpt/10/")[1]}


def test_objects_written_by_google_cloud_storage_are_read_by_async_gcs(emulator, prefix, gcs_client):
    bucket, base = parse_gcs_uri(prefix)
    step = gcs_client.bucket(bucket).blob
    step(base + "runs/r1/checkpoints/5/items/x y").upload_from_string(b"\x00\x01")
    step(base + "runs/r1/checkpoints/5/commit_success.txt").upload_from_string(b"ok")

    async def scenario():
        async with AsyncGcs(emulator.endpoint) as gcs:
            assert await gcs.read(prefix + "runs/r1/checkpoints/5/items/x y") == b"\x00\x01"
            listed = await gcs.list(prefix + "runs/r1/checkpoints/")
            assert listed == ([prefix + "runs/r1/checkpoints/5/"], [])
            assert await gcs.delete_prefix(prefix + "runs/") == 2

    run(scenario)
    assert not gcs_client.bucket(bucket).blob(base + "runs/r1/checkpoints/5/commit_success.txt").exists()


def test_one_async_gcs_belongs_to_one_event_loop(emulator, prefix):
    gcs = AsyncGcs(emulator.endpoint)

    async def use():
        await gcs.write(prefix + "x", b"1")

    async def use_and_close():
        try:
            await gcs.write(prefix + "x", b"1")
        finally:
            await gcs.close()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(use())
        with pytest.raises(RuntimeError, match="another event loop"):
            asyncio.run(use())
        loop.run_until_complete(use_and_close())
    finally:
        loop.close()
    run(use_and_close)  # closed: the next loop may open its own session


def _alive(process_id: int) -> bool:
    try:
        os.kill(process_id, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; it is dead for our purpose once it is no longer running.
    try:
        with open(f"/proc/{process_id}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False

"""Checkpoint polling on GCS: CheckpointSensor against the google provider's prefix sensor.

A MaxText run's checkpoint directory on the GCS emulator (fake-gcs-server, the one the local
cluster runs) holds ``--steps`` committed steps of F files each, laid out as Orbax writes them
(``<step>/_CHECKPOINT_METADATA``, ``<step>/items/...``, ``<step>/commit_success.txt``), plus one
save in progress (a step with its files but no commit marker yet). For each F, both sensors poke
the same directory:

* ``CheckpointSensor`` (ours): lists the step prefixes only, then reads commit markers newest
  first until one exists;
* ``GCSObjectsWithPrefixExistenceSensor`` (apache-airflow-providers-google) on the same prefix:
  lists every object under it, page by page.

HTTP requests are counted on the client side (every ``requests`` call the storage client makes
to the emulator), time is wall time per ``poke()``. A second round adds new steps between pokes
(two committed, one in progress) to show what newly seen steps cost.

The emulator takes in about 100 objects a second, slower as a bucket grows, so the default F
values stop at 200 (10,000 objects); ``--files 1000 10000`` runs the issue's sizes given hours.

    python benchmarks/checkpoint_poll.py --json benchmarks/results/checkpoint_poll.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

BUCKET = "ckpt-bench"
PREFIX = "maxtext/run/checkpoints/"
STEP_EVERY = 100
MARKER = "commit_success.txt"


def item_names(count: int) -> list[str]:
    """``count`` names under ``items/`` shaped like an OCDBT checkpoint's (metadata, manifest, data)."""
    names = ["_METADATA", "manifest.ocdbt"]
    names += [f"d/{hashlib.sha1(str(i).encode()).hexdigest()[:32]}" for i in range(max(0, count - 2))]
    return names[:count]


def step_files(step: int, files: int, committed: bool) -> list[str]:
    """The object names of one step: metadata, ``files - 2`` items, and the commit marker last.

    Each step holds ``files`` objects in all (``files - 1`` while its save is in progress).
    """
    base = f"{PREFIX}{step}/"
    names = [f"{base}_CHECKPOINT_METADATA", *(f"{base}items/{n}" for n in item_names(files - 2))]
    return [*names, f"{base}{MARKER}"] if committed else names


def upload(endpoint: str, steps: int, files: int, concurrency: int = 64) -> int:
    """Write the checkpoint directory into the emulator; returns the object count."""
    import asyncio

    from pathways_airflow_testing.gcs import AsyncGcs

    names = [name for index in range(1, steps + 2) for name in step_files(index * STEP_EVERY, files, committed=index <= steps)]

    async def write_all() -> None:
        async with AsyncGcs(endpoint) as gcs:
            gate = asyncio.Semaphore(concurrency)

            async def one(name: str) -> None:
                async with gate:
                    await gcs.write(f"gs://{BUCKET}/{name}", b"x")

            await asyncio.gather(*(one(n) for n in names))

    asyncio.run(write_all())
    return len(names)


class RequestCounter:
    """Counts the HTTP requests ``requests`` sends to the emulator (the storage client's transport)."""

    def __init__(self, endpoint: str):
        import requests

        self.endpoint = endpoint
        self.count = 0
        self._session = requests.Session
        self._original = requests.Session.request
        counter = self

        def request(session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if str(url).startswith(counter.endpoint):
                counter.count += 1
            return counter._original(session, method, url, *args, **kwargs)

        requests.Session.request = request  # type: ignore[method-assign]

    def close(self) -> None:
        self._session.request = self._original  # type: ignore[method-assign]


def measure(poke: Callable[[], Any], counter: RequestCounter, pokes: int) -> dict[str, Any]:
    requests, seconds, results = [], [], []
    for _ in range(pokes):
        before = counter.count
        began = time.perf_counter()
        results.append(poke())
        seconds.append(time.perf_counter() - began)
        requests.append(counter.count - before)
    return {
        "pokes": pokes,
        "requests_per_poke": requests,
        "seconds_per_poke_median": round(statistics.median(seconds), 4),
        "seconds_per_poke": [round(s, 4) for s in seconds],
        "result": results[-1],
    }


def run_one(files: int, steps: int, pokes: int, anchor_pokes: int) -> dict[str, Any]:
    from airflow.providers.google.cloud.sensors.gcs import GCSObjectsWithPrefixExistenceSensor

    from pathways_airflow.sensors import CheckpointSensor
    from pathways_airflow_testing.gcs import GcsEmulator

    with GcsEmulator(buckets=[BUCKET]) as emulator:
        began = time.monotonic()
        objects = upload(emulator.endpoint, steps, files)
        setup_seconds = time.monotonic() - began
        os.environ["STORAGE_EMULATOR_HOST"] = emulator.endpoint
        counter = RequestCounter(emulator.endpoint)
        try:
            ours = CheckpointSensor(task_id="newest_checkpoint", checkpoint_dir=f"gs://{BUCKET}/{PREFIX.rstrip('/')}", deferrable=False)
            anchor = GCSObjectsWithPrefixExistenceSensor(task_id="prefix_exists", bucket=BUCKET, prefix=PREFIX)
            context: Any = {}

            def poke_ours() -> Any:
                value = ours.poke(context)
                return value.xcom_value if value.is_done else None

            def poke_anchor() -> Any:
                return len(anchor._matches) if anchor.poke(context) else 0

            first_before = counter.count
            first_began = time.perf_counter()
            poke_ours()  # the first poke makes the sensor's storage client
            first = {"requests": counter.count - first_before, "seconds": round(time.perf_counter() - first_began, 4)}
            result = {
                "files_per_step": files,
                "committed_steps": steps,
                "objects": objects,
                "setup_seconds": round(setup_seconds, 1),
                "ours_first_poke": first,
                "ours": measure(poke_ours, counter, pokes),
                "anchor": measure(poke_anchor, counter, anchor_pokes),
            }
            # New steps appear between pokes: two committed ones and a newer save in progress.
            client = ours._client
            bucket = client.bucket(BUCKET)
            for index in (steps + 1, steps + 2, steps + 3):
                for name in step_files(index * STEP_EVERY, 3, committed=index <= steps + 2):
                    bucket.blob(name).upload_from_string(b"x")
            result["ours_after_new_steps"] = measure(poke_ours, counter, 1)
            result["ours_after_new_steps"]["newly_seen_steps"] = 3
        finally:
            counter.close()
    o, a = result["ours"], result["anchor"]
    result["faster_x"] = round(a["seconds_per_poke_median"] / o["seconds_per_poke_median"], 1)
    result["fewer_requests_x"] = round(statistics.median(a["requests_per_poke"]) / statistics.median(o["requests_per_poke"]), 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10, 100, 200], help="files per step (F); the emulator loads ~100 objects/s")
    parser.add_argument("--steps", type=int, default=50, help="committed steps")
    parser.add_argument("--pokes", type=int, default=5, help="pokes of CheckpointSensor per F")
    parser.add_argument("--anchor-pokes", type=int, default=3, help="pokes of the prefix sensor per F (1 above 100,000 objects)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: F=10, 2 pokes each")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    if args.quick:
        args.files, args.pokes, args.anchor_pokes = [10], 2, 2
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="checkpoint-poll-home-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = json.dumps(
        {"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "bench"}}
    )
    import logging

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("airflow.task").setLevel(logging.WARNING)  # the sensors' per-poke lines
    report: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
        "settings": {"files": args.files, "steps": args.steps, "pokes": args.pokes, "anchor_pokes": args.anchor_pokes, "quick": args.quick},
        "runs": [],
        "targets": {},
    }
    print(f"{'F':>6}  {'objects':>8}  {'ours req/poke':>13}  {'ours s/poke':>11}  {'prefix req/poke':>15}  {'prefix s/poke':>13}  {'faster':>7}  {'after 3 new steps':>17}")
    for files in args.files:
        anchor_pokes = 1 if files * args.steps > 100_000 else args.anchor_pokes
        run = run_one(files, args.steps, args.pokes, anchor_pokes)
        report["runs"].append(run)
        o, a = run["ours"], run["anchor"]
        print(
            f"{files:>6}  {run['objects']:>8}  {max(o['requests_per_poke']):>13}  {o['seconds_per_poke_median']:>11.4f}  "
            f"{statistics.median(a['requests_per_poke']):>15}  {a['seconds_per_poke_median']:>13.4f}  {run['faster_x']:>6}x  "
            f"{run['ours_after_new_steps']['requests_per_poke'][0]:>17}"
        )
    ours_requests = {r["files_per_step"]: max(r["ours"]["requests_per_poke"]) for r in report["runs"]}
    report["targets"]["requests_per_poke_le_3"] = all(v <= 3 for v in ours_requests.values())
    report["targets"]["requests_independent_of_F"] = len(set(ours_requests.values())) == 1
    report["targets"]["new_steps_le_3_plus_new"] = all(
        r["ours_after_new_steps"]["requests_per_poke"][0] <= 3 + r["ours_after_new_steps"]["newly_seen_steps"] for r in report["runs"]
    )
    at_1000 = next((r for r in report["runs"] if r["files_per_step"] == 1000), None)
    if at_1000:
        report["targets"]["faster_20x_at_F1000"] = at_1000["faster_x"] >= 20
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

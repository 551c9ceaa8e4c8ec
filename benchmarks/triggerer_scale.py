"""N deferred TPU waits in one triggerer loop: ours against the cncf.kubernetes provider's Job trigger.

One run, one local cluster, the same process layout for every contender:

* this process runs the :class:`~pathways_airflow_testing.LocalCluster` (the API server) and the
  driver that changes the workloads' state at random times;
* each contender gets its own *triggerer* process (this script with ``--triggerer``), which
  rebuilds N triggers from their serialized form, as Airflow's triggerer does, and runs their
  ``run()`` generators as tasks of one asyncio loop. CPU, RSS and loop stalls are that process's
  own, never the API server's.

Contenders: ``PathwaysJobTrigger`` waiting on N PathwaysJobs (JobSet + head + worker pods each),
and apache-airflow-providers-cncf-kubernetes' ``KubernetesJobTrigger`` ("the anchor") waiting on
N batch Jobs at its default ``poll_interval`` (10 s) and at 2 s.

Both are configured as users run them, with one CA. Their Kubernetes connection
(``kubernetes_default``, from ``AIRFLOW_CONN_KUBERNETES_DEFAULT``) names a kubeconfig whose
cluster carries ``certificate-authority-data``: one CA certificate, made at run time, as a GKE
cluster's kubeconfig or an in-cluster service account carries its cluster's CA. Every
kubernetes_asyncio ``ApiClient`` builds an SSL context (``client/rest.py``), and the anchor makes
a client per poll; against ``https://`` that context loads the kubeconfig's CA. The local cluster
serves plain ``http://``, for which kubernetes_asyncio ignores the kubeconfig's CA and loads
OpenSSL's default trust instead: the whole system bundle, tens of milliseconds per poll that no
real cluster makes the anchor pay. So each triggerer process's ``SSL_CERT_FILE`` is that same
CA (and ``SSL_CERT_DIR`` an empty directory): every context it builds loads one certificate, as
against GKE. The report records the set-up (``"ca": {"setup": "one CA"}``), what one context
costs and loads with it and with the system bundle, and how many contexts each triggerer built
in each window, at what cost, with how many CA certificates.

The workload objects are copies of one PathwaysJob the emulator's controllers really ran, with
Kueue on (its PathwaysJob, JobSet, pods, the JobSet's child Jobs and Kueue's Workload, as the
controllers wrote them); then the controllers are paused and the driver writes every state
change itself, so each change has a known time. The fleet is mixed (``SHARES``): some workloads
wait in Kueue's queue, some end in a user error, some end disrupted, the rest succeed; both
contenders wait on the same fleet (ours on the PathwaysJobs, the anchor on their head Jobs).

The side objects grow with the fleet, as on a real cluster: every workload's slices run on
Nodes of their own (one per TPU host, as GKE registers them), and every workload has the Events
its controllers, the scheduler and the kubelet recorded (``Scheduled`` for each pod; ``Pulled``,
``Created``, ``Started`` for each container). A failure verdict lists the nodes and the
scheduler's events, so their number is part of what it costs. They are made before the
triggerer starts, outside every measured window.

1. warm-up: every wait starts (PROVISIONING: pods pending; Jobs without status);
2. steady window (``--window`` s): workloads change state at random (Poisson, one change per
   workload every ``--change-every`` s on average: pods become ready, a worker's readiness
   flaps); API requests (counted by the API server), CPU, RSS and stalls are measured here;
3. finish window (``--finish`` s, then until the last wait reports or ``--drain`` runs out):
   every workload finishes at a uniformly random time; its CPU, requests and peak RSS are
   reported beside the steady window's, and reaction latency is the time from the write of the
   finished status to the trigger's ``TriggerEvent``, reported by ending (a user error's verdict
   waits on purpose for the other watches to catch up).

Every wait is accounted for: one that has not reported when the drain ends is a failure of the
run, named in its row (``unreported``), and every target for that N is missed because of it.
Percentiles are over the waits that reported.

The triggerer process also counts the watch events it parses (CPU per event), times every
garbage collection (a stall's cause) and every SSL context built; triggers start one per turn
of its loop, as Airflow's do.

    python benchmarks/triggerer_scale.py --waits 1000 --json benchmarks/results/triggerer_scale_1000.json
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import logging
import os
import random
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEMPLATE = "tmplwl"
LOCAL_QUEUE = "multislice-queue"
"""The local cluster's LocalQueue (pathways_airflow_testing.kueue_setup): the template is admitted by Kueue."""
SHARES = {"queued": 0.10, "failing": 0.10, "disrupted": 0.05}
"""Of the fleet: waiting in Kueue's queue until the finish window; ending in a user error (exit 1);
ending with a worker disrupted (DisruptionTarget). The rest succeed."""
CONN_ENV = "AIRFLOW_CONN_KUBERNETES_DEFAULT"
CA_SETUP = "one CA"
"""What the contenders' kubeconfig trusts: one CA certificate, as a GKE or in-cluster client does."""
STALL_LIMIT = 0.100
TICK = 0.010
RSS_EVERY_TICKS = 10
"""The ticker reads the process's RSS every this many ticks (100 ms): a window's peak, not only its ends."""
ENDINGS = ("succeeding", "failing", "disrupted")
SETTLING_ENDING = "failing"
"""A user error's verdict waits on purpose (``VERDICT_SETTLE_LIMIT_SECONDS``) for the other watches;
the reaction target leaves it out."""


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# --- the triggerer process ------------------------------------------------------------------


class Phases:
    """What the triggerer process measures between the driver's marks.

    Besides CPU, RSS and loop stalls: the watch events the process parsed (every line of every
    watch stream, counted where the hook splits them), so CPU per event can be read; every
    garbage collection's pause, by generation, so a stall can be matched to its cause; the
    highest RSS sampled in each window, so a window's peak is its own and not the start-up's;
    and every SSL context built, so the cost of the CA set-up shows per window.
    """

    def __init__(self) -> None:
        self.name = "start"
        self.marks: dict[str, dict[str, float]] = {}
        self.stalls: dict[str, list[float]] = {}
        self.watch_events = 0
        self.looks = 0
        self.collections: dict[str, dict[int, list[float]]] = {}
        self.rss_peaks: dict[str, int] = {}
        self.ssl_contexts: dict[str, dict[str, float]] = {}
        self._collecting_since = 0.0

    def mark(self, name: str) -> None:
        if name in self.marks:
            return
        self.sample_rss()
        self.marks[name] = {"time": time.time(), "cpu": time.process_time(), "rss_kb": rss_kb(), "watch_events": self.watch_events, "looks": self.looks}
        self.name = name
        self.sample_rss()
        if name == "finish" and os.environ.get("TRIGGERER_SCALE_TRACEMALLOC"):
            import tracemalloc

            # What the waits hold at the end of the steady window, by the line that allocated it.
            stats = tracemalloc.take_snapshot().statistics("lineno")
            with open(os.environ["TRIGGERER_SCALE_TRACEMALLOC"], "w") as out:
                out.write(f"traced: {sum(s.size for s in stats) / 2**20:.1f} MiB\n")
                out.writelines(f"{s}\n" for s in stats[:25])
                # What every full collection walks: the objects the collector tracks, by type.
                tracked = Counter(type(o).__name__ for o in gc.get_objects())
                out.write(f"tracked by the collector: {sum(tracked.values())}\n")
                out.writelines(f"  {name}: {count}\n" for name, count in tracked.most_common(40))

    def stall(self, late: float) -> None:
        self.stalls.setdefault(self.name, []).append(late)

    def sample_rss(self) -> None:
        self.rss_peaks[self.name] = max(self.rss_peaks.get(self.name, 0), rss_kb())

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        """A ``gc.callbacks`` hook: the pause of each collection, by generation and window."""
        if phase == "start":
            self._collecting_since = time.perf_counter()
        else:
            pause = time.perf_counter() - self._collecting_since
            self.collections.setdefault(self.name, {}).setdefault(info["generation"], []).append(pause)

    def count_watch_events(self) -> None:
        """Count the events every watch stream yields (ours only: the anchor opens no watch, and
        its process never imports our modules, so its baseline stays its own)."""
        api = sys.modules.get("pathways_airflow.hooks.api")
        if api is None:
            return
        split = api.JsonLines.feed

        def feed(lines: Any, chunk: bytes) -> list[Any]:
            events = split(lines, chunk)
            self.watch_events += len(events)
            return events

        api.JsonLines.feed = feed  # type: ignore[method-assign]

    def count_looks(self) -> None:
        """Count the looks ours takes (an observation of a workload from the caches, judged by the
        state core): the events per look say how well a change's events are taken together."""
        trigger = sys.modules.get("pathways_airflow.triggers.workload")
        if trigger is None:
            return
        observe = trigger.observe

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.looks += 1
            return observe(*args, **kwargs)

        trigger.observe = counted

    def time_ssl_contexts(self) -> None:
        """Count and time every ``ssl.create_default_context`` call, with the most CA
        certificates one of them loaded. kubernetes_asyncio's REST client builds one per
        ``ApiClient`` (``client/rest.py``), and the anchor makes a client per poll: what a context
        loads is what each poll pays."""
        build = ssl.create_default_context

        def create_default_context(*args: Any, **kwargs: Any) -> ssl.SSLContext:
            began = time.perf_counter()
            context = build(*args, **kwargs)
            spent = time.perf_counter() - began
            counts = self.ssl_contexts.setdefault(self.name, {"built": 0, "seconds": 0.0, "ca_certificates": 0})
            counts["built"] += 1
            counts["seconds"] += spent
            counts["ca_certificates"] = max(counts["ca_certificates"], context.cert_store_stats()["x509_ca"])
            return context

        ssl.create_default_context = create_default_context  # type: ignore[assignment]


async def ticker(phases: Phases) -> None:
    """Sleep 10 ms at a time; how late each wake-up is, is how long the loop was blocked. Every
    ``RSS_EVERY_TICKS`` ticks, the RSS too (a window's peak)."""
    loop = asyncio.get_running_loop()
    ticks = 0
    while True:
        began = loop.time()
        await asyncio.sleep(TICK)
        phases.stall(max(0.0, loop.time() - began - TICK))
        ticks += 1
        if ticks % RSS_EVERY_TICKS == 0:
            phases.sample_rss()


async def triggerer(spec_path: str, out_path: str) -> None:
    from airflow.sdk.module_loading import import_string

    spec = json.loads(Path(spec_path).read_text())
    began = time.perf_counter()
    for module in spec["modules"]:
        __import__(module)
    import_seconds = time.perf_counter() - began
    if os.environ.get("TRIGGERER_SCALE_TRACEMALLOC"):
        import tracemalloc

        tracemalloc.start()
    gc.collect()
    baseline_rss = rss_kb()
    loop = asyncio.get_running_loop()
    phases = Phases()
    phases.count_watch_events()
    phases.count_looks()
    phases.time_ssl_contexts()
    gc.callbacks.append(phases.on_gc)
    phases.mark("start")
    stopped = asyncio.Event()
    events: dict[str, dict[str, Any]] = {}
    expected = len(spec["triggers"])
    all_done = asyncio.Event()

    def on_line(line: str) -> None:
        word, _, arg = line.strip().partition(" ")
        if word == "mark":
            phases.mark(arg)
        elif word == "stop":
            stopped.set()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(on_line, line)
        loop.call_soon_threadsafe(stopped.set)

    threading.Thread(target=read_stdin, daemon=True).start()

    raised: dict[str, str] = {}

    async def wait(classpath: str, kwargs: dict[str, Any]) -> None:
        # As the triggerer does: the class from its path, built from its stored kwargs.
        trigger = import_string(classpath)(**kwargs)
        generator = trigger.run()
        try:
            async for event in generator:
                payload = event.payload
                events[str(payload.get("name"))] = {
                    "time": time.time(),
                    "status": payload.get("status"),
                    "phase": (payload.get("state") or {}).get("phase"),
                }
                break
        except Exception as error:  # a wait that dies never reports: the driver counts it, this says why
            raised[str(kwargs.get("name") or kwargs.get("job_name"))] = f"{type(error).__name__}: {error}"[:300]
        finally:
            await generator.aclose()
        if len(events) >= expected:
            all_done.set()

    tick = loop.create_task(ticker(phases))
    tasks = []
    for path, kwargs in spec["triggers"]:
        tasks.append(loop.create_task(wait(path, kwargs)))
        # As Airflow's triggerer starts them: one at a time, a turn of the loop between
        # (airflow/jobs/triggerer_job_runner.py, TriggerRunner.create_triggers).
        await asyncio.sleep(0)
    print("started", flush=True)

    async def announce_done() -> None:
        await all_done.wait()
        print("done", flush=True)

    announcer = loop.create_task(announce_done())
    await stopped.wait()
    phases.mark("stop")
    for task in (*tasks, tick, announcer):
        task.cancel()
    await asyncio.gather(*tasks, tick, announcer, return_exceptions=True)
    try:
        from pathways_airflow.hooks.pathways import AsyncPathwaysHook

        await AsyncPathwaysHook.close_all()
    except Exception:  # noqa: BLE001 - the anchor's process never opened one
        pass
    # What the ended waits left in reference cycles: only a full collection frees it, and a
    # gc.freeze() (``--gc-freeze``) made while they ran would have kept it for good.
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    cyclic = gc.collect()
    Path(out_path).write_text(
        json.dumps(
            {
                "baseline_rss_kb": baseline_rss,
                "import_seconds": import_seconds,
                # The highest RSS the ticker sampled (every 100 ms), not getrusage's ru_maxrss: on
                # Linux a child starts with its parent's at the fork and keeps it across exec, so
                # that was the driver's RSS (the local cluster's), not this process's.
                "peak_rss_kb": max(phases.rss_peaks.values(), default=rss_kb()),
                "marks": phases.marks,
                "stalls": {name: {"max": max(v), "p99": percentile(v, 0.99), "over_100ms": sum(1 for s in v if s > STALL_LIMIT), "ticks": len(v)} for name, v in phases.stalls.items() if v},
                "collections": {
                    name: {str(gen): {"count": len(p), "max": max(p), "total": sum(p)} for gen, p in by_gen.items()}
                    for name, by_gen in phases.collections.items()
                },
                "rss_peaks_kb": phases.rss_peaks,
                "ssl_contexts": phases.ssl_contexts,
                "events": events,
                "raised": raised,
                "frozen_at_stop": frozen,
                "cyclic_garbage_at_stop": cyclic,
            }
        )
    )


# --- the cluster's CA ----------------------------------------------------------------------


def one_ca_certificate() -> bytes:
    """A self-signed CA certificate (PEM) made now: RSA 2048, ``CA:TRUE``, signing certificates.

    Only the certificate is kept: nothing here is served over TLS; the clients only load it."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID
    except ImportError:
        return _openssl_ca_certificate()
    import datetime as dt

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "triggerer-scale-local-cluster-ca")])
    now = dt.datetime.now(dt.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


def _openssl_ca_certificate() -> bytes:
    """The same certificate from the ``openssl`` command, where ``cryptography`` is not installed."""
    with tempfile.TemporaryDirectory(prefix="triggerer-scale-ca-") as directory:
        out = Path(directory, "ca.crt")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(Path(directory, "ca.key")), "-out", str(out),
             "-days", "1", "-subj", "/CN=triggerer-scale-local-cluster-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,digitalSignature,keyCertSign,cRLSign"],
            check=True, capture_output=True,
        )
        return out.read_bytes()


def one_ca_kubeconfig(kubeconfig: str, ca_pem: bytes, directory: Path) -> str:
    """A copy of ``kubeconfig`` whose every cluster carries ``certificate-authority-data`` (``ca_pem``).

    The contenders' connection names this file, as a GKE kubeconfig carries the cluster's CA (in
    a pod: the service account's ``ca.crt``). Over ``http://`` the clients trust OpenSSL's
    defaults instead, which :func:`trust_environment` points at the same CA."""
    import yaml

    config = yaml.safe_load(Path(kubeconfig).read_text())
    for entry in config.get("clusters") or ():
        entry["cluster"]["certificate-authority-data"] = base64.b64encode(ca_pem).decode("ascii")
    path = directory / "kubeconfig-one-ca"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return str(path)


def write_ca(ca_pem: bytes, directory: Path) -> tuple[str, str]:
    """The CA as a file, and an empty directory: what ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` name
    in the triggerer processes (:func:`trust_environment`)."""
    cafile, empty = directory / "ca.crt", directory / "no-other-certificates"
    cafile.write_bytes(ca_pem)
    empty.mkdir(exist_ok=True)
    return str(cafile), str(empty)


def trust_environment(cafile: str, empty_directory: str) -> dict[str, str]:
    """OpenSSL's default trust for a triggerer process: the one CA and nothing else.

    Against an ``https://`` server both clients load the kubeconfig's
    ``certificate-authority-data`` as their ``cafile``. Against the local cluster's ``http://``
    kubernetes_asyncio ignores it (``config/kube_config.py``, ``_load_cluster_info``: the CA only
    for ``https``) and builds its context from OpenSSL's default paths (``client/rest.py``:
    ``ssl.create_default_context(cafile=None)``), which these variables point at the same CA. Each
    context then loads one certificate, as on GKE or in a pod, instead of the system bundle."""
    return {"SSL_CERT_FILE": cafile, "SSL_CERT_DIR": empty_directory}


def ssl_context_ms(environment: dict[str, str], repeat: int = 20) -> tuple[float, int]:
    """The median time to build one client SSL context as kubernetes_asyncio does over
    ``http://`` (``ssl.create_default_context()``), and the CA certificates it loaded, in a fresh
    interpreter with ``environment`` (none: the system bundle)."""
    code = (
        "import json, ssl, statistics, time\n"
        "times = []\n"
        f"for _ in range({repeat}):\n"
        "    began = time.perf_counter(); context = ssl.create_default_context(); times.append(time.perf_counter() - began)\n"
        "print(json.dumps([statistics.median(times), context.cert_store_stats()['x509_ca']]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    result = subprocess.run([sys.executable, "-c", code], env={**env, **environment}, capture_output=True, text=True, check=True)
    seconds, certificates = json.loads(result.stdout)
    return round(seconds * 1000, 2), certificates


def ca_setup(environment: dict[str, str]) -> dict[str, Any]:
    """What the report says of the CA: the set-up, and what one SSL context costs and loads with
    it and with the system bundle (a client configured with no CA)."""
    one_ms, one_count = ssl_context_ms(environment)
    bundle_ms, bundle_count = ssl_context_ms({})
    return {
        "setup": CA_SETUP,
        "ssl_context_ms_one_ca": one_ms,
        "ca_certificates_one_ca": one_count,
        "ssl_context_ms_system_bundle": bundle_ms,
        "ca_certificates_system_bundle": bundle_count,
    }


# --- the side objects: nodes and events -----------------------------------------------------


class SliceHosts:
    """The Nodes the workloads' slices take: one per TPU host, as GKE registers a node pool's VMs.

    Each workload gets node pools of its own, one per slice, of the machine type and topology of
    the slice the template ran on (``pathways_airflow_testing.nodes.tpu_pool`` /
    ``node_manifests``: GKE's labels, taints and capacity). They are named after the workload,
    not the namespace, so every contender's copy of a workload runs on the same hosts and the
    cluster holds one set of nodes per N. Pods not on a TPU host (the head, on the CPU pool) stay
    where the template's ran.
    """

    def __init__(self, cluster: Any, template_pods: list[dict[str, Any]]):
        from pathways_airflow_testing import nodes

        self.cluster = cluster
        self.nodes = nodes
        self.k_node = cluster.kinds.lookup("", "v1", "nodes")
        self.slices: list[tuple[str, str, str]] = []  # (template pool, machine type, topology), one per slice
        self.template_hosts: dict[str, tuple[int, int]] = {}  # a template TPU node → (its slice, its index in the pool)
        for pod in template_pods:
            node_name = pod["spec"].get("nodeName")
            node = cluster.store.get(self.k_node, None, node_name) if node_name else None
            labels = (node or {}).get("metadata", {}).get("labels") or {}
            if node is None or nodes.ACCELERATOR_LABEL not in labels or node_name in self.template_hosts:
                continue
            pool = (labels[nodes.NODEPOOL_LABEL], labels["node.kubernetes.io/instance-type"], labels[nodes.TOPOLOGY_LABEL])
            if pool not in self.slices:
                self.slices.append(pool)
            hosts = nodes.tpu_pool(pool[0], pool[1], pool[2]).node_names()
            self.template_hosts[node_name] = (self.slices.index(pool), hosts.index(node_name))
        self.created: set[str] = set()

    def pools(self, workload: str) -> list[Any]:
        """``workload``'s node pools, one per slice (``tpu-v5e-2x4-w00042-0``)."""
        return [
            self.nodes.tpu_pool(f"{template_pool.rsplit('-', 1)[0]}-{workload}-{index}", machine, topology)
            for index, (template_pool, machine, topology) in enumerate(self.slices)
        ]

    def node_for(self, workload: str, template_node: str) -> str:
        """Where ``workload``'s copy of a pod runs that ran on ``template_node`` in the template."""
        if template_node not in self.template_hosts:
            return template_node
        slice_index, host = self.template_hosts[template_node]
        return self.pools(workload)[slice_index].node_names()[host]

    def ensure(self, workloads: list[str]) -> int:
        """Exactly the nodes of ``workloads`` (besides the cluster's own): the missing ones are
        created, those of a larger earlier fleet deleted. Returns how many nodes the cluster has."""
        wanted = {node["metadata"]["name"]: node for w in workloads for pool in self.pools(w) for node in self.nodes.node_manifests(pool)}

        def apply(names: list[str]) -> None:
            for name in names:
                if name in wanted:
                    self.cluster.store.create(self.k_node, wanted[name])
                else:
                    self.cluster.store.delete(self.k_node, None, name)

        changes = [n for n in wanted if n not in self.created] + [n for n in self.created if n not in wanted]
        for start in range(0, len(changes), 500):
            self.cluster.call(lambda part=changes[start : start + 500]: apply(part), timeout=300)
        self.created = set(wanted)
        return self.cluster.call(lambda: len(self.cluster.store.list(self.k_node)))


def event_name(involved: str, nanos: int) -> str:
    """An Event's name as client-go's recorders make it: ``<object>.<unix nanoseconds in hex>``
    (``tools/record/event.go`` and ``tools/events/event_recorder.go``, ``makeEvent``)."""
    return f"{involved}.{nanos:x}"


def involved_pod(pod: dict[str, Any], field_path: str | None = None) -> dict[str, Any]:
    meta = pod["metadata"]
    involved = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"]}
    if field_path:
        involved["fieldPath"] = field_path
    return involved


def scheduled_event(pod: dict[str, Any], node: str, now: float, nanos: int) -> dict[str, Any]:
    """kube-scheduler's record of binding ``pod`` to ``node``, as the core/v1 Events API shows it.

    The scheduler records through events.k8s.io/v1 (kubernetes ``pkg/scheduler/schedule_one.go``:
    type Normal, reason ``Scheduled``, action ``Binding``, note ``Successfully assigned
    <namespace>/<pod> to <node>``); read as core/v1 such an event has ``eventTime`` and the
    reporting controller and instance set, and no ``count``, no first/last timestamps and an empty
    ``source``."""
    import datetime as dt

    meta = pod["metadata"]
    return {
        "metadata": {"name": event_name(meta["name"], nanos), "namespace": meta["namespace"]},
        "involvedObject": involved_pod(pod),
        "reason": "Scheduled",
        "message": f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
        "type": "Normal",
        "action": "Binding",
        "eventTime": dt.datetime.fromtimestamp(now, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "firstTimestamp": None,
        "lastTimestamp": None,
        "source": {},
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-gke-local-control-plane",
    }


def kubelet_events(pod: dict[str, Any], node: str, timestamp: str, nanos: int) -> list[dict[str, Any]]:
    """The kubelet's ``Pulled``, ``Created`` and ``Started`` for every container of ``pod``
    (init containers first), as kubelet v1.32 records them.

    Messages: ``Container image "<image>" already present on machine``
    (``pkg/kubelet/images/image_manager.go``), ``Created container: <name>`` and ``Started
    container <name>`` (``pkg/kubelet/kuberuntime/kuberuntime_container.go``, ``startContainer``).
    The kubelet records through client-go's core/v1 recorder (``tools/record``): ``count`` 1,
    first and last timestamps, ``source`` and reporting fields naming the kubelet and its node,
    and the container as ``involvedObject.fieldPath`` (``pkg/kubelet/container/ref.go``)."""
    meta = pod["metadata"]
    containers = [("initContainers", c) for c in pod["spec"].get("initContainers") or ()]
    containers += [("containers", c) for c in pod["spec"].get("containers") or ()]
    events = []
    for field, container in containers:
        for reason, message in (
            ("Pulled", f'Container image "{container["image"]}" already present on machine'),
            ("Created", f"Created container: {container['name']}"),
            ("Started", f"Started container {container['name']}"),
        ):
            events.append({
                "metadata": {"name": event_name(meta["name"], nanos + len(events)), "namespace": meta["namespace"]},
                "involvedObject": involved_pod(pod, f"spec.{field}{{{container['name']}}}"),
                "reason": reason,
                "message": message,
                "type": "Normal",
                "count": 1,
                "firstTimestamp": timestamp,
                "lastTimestamp": timestamp,
                "eventTime": None,
                "source": {"component": "kubelet", "host": node},
                "reportingComponent": "kubelet",
                "reportingInstance": node,
            })
    return events


# --- the workloads --------------------------------------------------------------------------


def capture_templates(cluster: Any) -> dict[str, Any]:
    """Run one PathwaysJob (one v5e 2x4 slice) through the emulator's controllers; copy what they wrote."""
    from pathways_airflow.spec import build_workload, render

    workload = build_workload(
        tpu="v5e", topology="2x4", num_slices=1, pathways_dir="gs://pathways-demo/tmp", image="python:3.11",
        command=["python3", "train.py"], env={"PATHWAYS_TESTING_PROGRAM": "idle"}, queue_name=LOCAL_QUEUE,
    )
    cluster.apply(render(workload, backend="pathwaysjob", name=TEMPLATE, namespace="default"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": TEMPLATE})
        if len(pods) >= 3 and all(p["status"].get("phase") == "Running" for p in pods):
            break
        time.sleep(0.2)
    else:
        raise RuntimeError("the template workload did not start on the local cluster")
    time.sleep(0.5)
    jobs = cluster.list("batch/v1", "Job", "default", labels={"jobset.sigs.k8s.io/jobset-name": TEMPLATE})
    jobset = cluster.get("jobset.x-k8s.io/v1alpha2", "JobSet", TEMPLATE)
    kueue = [
        w for w in cluster.list("kueue.x-k8s.io/v1beta2", "Workload", "default")
        if any(r.get("uid") == jobset["metadata"]["uid"] for r in w["metadata"].get("ownerReferences") or ())
    ]
    if not kueue:
        raise RuntimeError("Kueue made no Workload for the template workload")
    pods = cluster.list("v1", "Pod", "default", labels={"jobset.sigs.k8s.io/jobset-name": TEMPLATE})
    # The controllers' own records of the workload (Kueue's, the JobSet's and Jobs', the
    # PathwaysJob's). Its pods' events are made per copy (scheduled_event, kubelet_events).
    events = [
        e for e in cluster.list("v1", "Event", "default")
        if TEMPLATE in e["involvedObject"].get("name", "") and e["involvedObject"].get("kind") != "Pod"
    ]
    return {
        "pathwaysjob": cluster.get("pathways-job.pathways.domain/v1", "PathwaysJob", TEMPLATE),
        "jobset": jobset,
        "pods": pods,
        "jobs": jobs,
        "job": next(j for j in jobs if "pathways-head" in j["metadata"]["name"]),
        "kueue_workload": kueue[0],
        "events": events,
    }


def pause_controllers(cluster: Any) -> None:
    """From here on the driver alone writes the workloads' state (each change then has a known time)."""

    async def stop() -> None:
        for controller in cluster._controllers:
            await controller.stop()

    cluster.call(stop())


def renamed(obj: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    text = json.dumps(obj).replace(TEMPLATE, name).replace('"namespace": "default"', f'"namespace": "{namespace}"')
    copy = json.loads(text)
    meta = copy["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(field, None)
    return copy


def pending_pod_status(pod: dict[str, Any]) -> dict[str, Any]:
    status = pod["status"]
    return {
        "phase": "Pending",
        "qosClass": status.get("qosClass", "BestEffort"),
        "conditions": [c for c in status.get("conditions", []) if c["type"] == "PodScheduled"],
    }


def started_at(status: dict[str, Any], now: str) -> dict[str, Any]:
    """A running pod's ``status`` as if it started at ``now``: its start time, its containers'
    ``startedAt`` and its conditions' transitions. The template's times are from before the
    fleet's nodes were registered; a node newer than the workers on it is evidence of a
    disruption (``pathways_airflow.state.ran_on``), which these workers must not show."""
    status = json.loads(json.dumps(status))
    status["startTime"] = now
    for item in status.get("conditions", []):
        item["lastTransitionTime"] = now
    for container in (*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])):
        if "running" in (container.get("state") or {}):
            container["state"]["running"]["startedAt"] = now
    return status


def not_ready(status: dict[str, Any]) -> dict[str, Any]:
    status = json.loads(json.dumps(status))
    for item in status.get("conditions", []):
        if item["type"] in ("Ready", "ContainersReady"):
            item["status"] = "False"
    for container in status.get("containerStatuses", []):
        container["ready"] = False
    return status


def terminated_status(status: dict[str, Any], exit_code: int, reason: str, now: str) -> dict[str, Any]:
    """A pod whose containers have stopped (``exit_code`` for the first, 0 for the others)."""
    status = json.loads(json.dumps(status))
    status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
    for index, container in enumerate(status.get("containerStatuses", [])):
        code = exit_code if index == 0 else 0
        container.update(ready=False, started=False, state={"terminated": {"exitCode": code, "reason": reason if code else "Completed", "finishedAt": now}})
    for item in status.get("conditions", []):
        if item["type"] in ("Ready", "ContainersReady"):
            item["status"] = "False"
    return status


class Fleet:
    """N workloads in one namespace as the emulator's controllers made the template, and the
    state changes the driver makes to them.

    Every workload has what a real one has: its PathwaysJob, JobSet, pods, the JobSet's child
    Jobs and Kueue's Workload; its pods bound to its own TPU hosts (``hosts``), and the Events
    recorded about all of them. ``SHARES`` of them wait in Kueue's queue through the steady
    window, end in a user error or end disrupted; the rest succeed. Both contenders wait on the
    same fleet: ours on the PathwaysJobs, the anchor on their head Jobs.
    """

    def __init__(
        self, cluster: Any, templates: dict[str, Any], hosts: SliceHosts, namespace: str, count: int, kind: str, rng: random.Random
    ):
        self.cluster = cluster
        self.templates = templates
        self.hosts = hosts
        self.namespace = namespace
        self.kind = kind
        self.names = [f"w{i:05d}" for i in range(count)]
        self.ending = {name: self._ending(rng) for name in self.names}
        self.queued = {name for name in self.names if rng.random() < SHARES["queued"]}
        self.state = {name: "pending" for name in self.names}
        kinds = cluster.kinds
        self.k_pathwaysjob = kinds.lookup("pathways-job.pathways.domain", "v1", "pathwaysjobs")
        self.k_jobset = kinds.lookup("jobset.x-k8s.io", "v1alpha2", "jobsets")
        self.k_pod = kinds.lookup("", "v1", "pods")
        self.k_job = kinds.lookup("batch", "v1", "jobs")
        self.k_kueue = kinds.lookup("kueue.x-k8s.io", "v1beta2", "workloads")
        self.k_event = kinds.lookup("", "v1", "events")
        self.events_made = 0
        self.pods: dict[str, list[dict[str, Any]]] = {}
        self.kueue_names: dict[str, str] = {}
        self.finished_at: dict[str, float] = {}
        from pathways_airflow_testing.controllers import kueue  # Kueue's own status shapes, as its controller writes them
        from pathways_airflow_testing.controllers.base import set_condition  # as every local controller sets one

        self.kueue = kueue
        self.set_condition = set_condition

    def with_condition(self, status: dict[str, Any], type_: str, reason: str, message: str, now: str) -> dict[str, Any]:
        """``status`` with condition ``type_`` True."""
        return {**status, "conditions": self.set_condition(status.get("conditions") or [], type_, "True", reason, message, now)}

    @staticmethod
    def _ending(rng: random.Random) -> str:
        roll = rng.random()
        if roll < SHARES["failing"]:
            return "failing"
        return "disrupted" if roll < SHARES["failing"] + SHARES["disrupted"] else "succeeding"

    def head_job(self, name: str) -> str:
        return next(j["metadata"]["name"] for j in self.templates["jobs"] if "pathways-head" in j["metadata"]["name"]).replace(TEMPLATE, name)

    def pod(self, name: str, part: str) -> dict[str, Any]:
        """The first pod of ``name`` whose name has ``part`` in it (``pathways-head``, ``worker``)."""
        return next(p for p in self.pods[name] if part in p["name"])

    def expected(self, name: str) -> set[str]:
        """What the event of ``name``'s wait may say: ours, the phase; the anchor, the Job's status."""
        if self.kind == "job":
            return {"success"} if self.ending[name] == "succeeding" else {"failed", "error"}
        return {"SUCCEEDED"} if self.ending[name] == "succeeding" else {"FAILED"}

    # created on the cluster's loop, in batches
    def create(self) -> None:
        batch = 200
        for start in range(0, len(self.names), batch):
            self.cluster.call(lambda s=start: [self._create_one(n) for n in self.names[s : s + batch]], timeout=300)

    def _create_one(self, name: str) -> None:
        store, ns, now = self.cluster.store, self.namespace, self.cluster.clock.timestamp()
        made: dict[tuple[str, str], dict[str, Any]] = {}  # what its controller events are about, by (kind, name)
        made[("PathwaysJob", name)] = store.create(self.k_pathwaysjob, renamed(self.templates["pathwaysjob"], name, ns), namespace=ns)
        jobset = renamed(self.templates["jobset"], name, ns)
        created = store.create(self.k_jobset, jobset, namespace=ns)  # suspended by Kueue's webhook (admission.py)
        if name not in self.queued:
            # Admitted: Kueue resumes the JobSet (kueue pkg/controller/jobframework/reconciler.go,
            # startJob; the JobSet integration's RunWithPodSetsInfo sets spec.suspend to false).
            created = store.replace(self.k_jobset, {**created, "spec": {**created["spec"], "suspend": False}})
        running_status = jobset["status"]
        created["status"] = {"restarts": 0, "conditions": [c for c in running_status.get("conditions", []) if c["type"].startswith("StartupPolicyInProgress")]}
        made[("JobSet", name)] = store.write_status(self.k_jobset, created)
        uid = created["metadata"]["uid"]
        for template in self.templates["jobs"]:
            job = renamed(template, name, ns)
            for ref in job["metadata"].get("ownerReferences") or ():
                ref["uid"] = uid
            stored = store.create(self.k_job, job, namespace=ns)
            made[("Job", job["metadata"]["name"])] = store.write_status(self.k_job, dict(stored, status={"active": 1, "ready": 0, "startTime": now}))
        kueue = renamed(self.templates["kueue_workload"], name, ns)
        for ref in kueue["metadata"].get("ownerReferences") or ():
            ref["uid"] = uid
        kueue["metadata"].setdefault("labels", {})["kueue.x-k8s.io/job-uid"] = uid
        stored = store.create(self.k_kueue, kueue, namespace=ns)
        self.kueue_names[name] = stored["metadata"]["name"]
        admitted = self.templates["kueue_workload"]["status"]
        if name in self.queued:
            admitted = self.kueue.pending_status(admitted, "Pending", "couldn't assign flavors to pod set worker: insufficient unused quota", now)
        made[("Workload", self.kueue_names[name])] = store.write_status(self.k_kueue, dict(stored, status=admitted))
        pods = []
        pod_names = {}
        for template in self.templates["pods"]:
            pod = renamed(template, name, ns)
            pod["metadata"]["name"] = pod["metadata"]["name"].rsplit("-", 1)[0] + f"-{random.randrange(36**5):05x}"
            pod["spec"]["nodeName"] = self.hosts.node_for(name, template["spec"]["nodeName"])
            stored = store.create(self.k_pod, pod, namespace=ns)
            stored = store.write_status(self.k_pod, dict(stored, status=pending_pod_status(template)))
            pods.append({"name": stored["metadata"]["name"], "running": renamed(template, name, ns)["status"]})
            pod_names[template["metadata"]["name"]] = stored["metadata"]["name"]
            self._record_pod_events(stored)
        self.pods[name] = pods
        self._record_controller_events(name, made, pod_names)

    def _record_pod_events(self, pod: dict[str, Any]) -> None:
        """What the scheduler and the kubelet record about a pod as it is bound and started."""
        clock, node = self.cluster.clock, pod["spec"]["nodeName"]
        nanos = int(clock.now() * 1e9)
        self._create_events([scheduled_event(pod, node, clock.now(), nanos), *kubelet_events(pod, node, clock.timestamp(), nanos + 1)])

    def _record_controller_events(self, name: str, made: dict[tuple[str, str], dict[str, Any]], pod_names: dict[str, str]) -> None:
        """The template's controller events, about this workload's own objects (their uids), now."""
        now = self.cluster.clock.timestamp()
        events = []
        for template in self.templates["events"]:
            text = json.dumps(template)
            for template_pod, pod in pod_names.items():
                text = text.replace(template_pod, pod)
            event = renamed(json.loads(text), name, self.namespace)
            event["message"] = event.get("message", "").replace("default/", f"{self.namespace}/")  # "Created Workload: <ns>/<name>"
            involved = event["involvedObject"]
            target = made.get((involved.get("kind", ""), involved.get("name", "")))
            involved["uid"] = target["metadata"]["uid"] if target else None
            involved["resourceVersion"] = target["metadata"].get("resourceVersion") if target else None
            for field in ("firstTimestamp", "lastTimestamp"):
                if event.get(field):
                    event[field] = now
            events.append(event)
        self._create_events(events)

    def _create_events(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.cluster.store.create(self.k_event, event, namespace=self.namespace)
        self.events_made += len(events)

    # state changes, each on the cluster's loop
    def change(self, name: str) -> None:
        """One non-final change: pending → running, then a worker's readiness flaps (a queued
        workload's Kueue Workload is written again: its pending message is refreshed)."""
        state = self.state[name]
        store, now = self.cluster.store, self.cluster.clock.timestamp()
        if name in self.queued:
            kueue = self._kueue_workload(name)
            store.write_status(self.k_kueue, dict(kueue, status=self.kueue.pending_status(kueue["status"], "Pending", f"insufficient unused quota (as of {now})", now)))
            return
        pods = self.pods[name]
        if state == "pending":
            for pod in pods:
                pod["running"] = started_at(pod["running"], now)
                current = store.get(self.k_pod, self.namespace, pod["name"])
                store.write_status(self.k_pod, dict(current, status=pod["running"]))
            jobset = store.get(self.k_jobset, self.namespace, name)
            store.write_status(self.k_jobset, dict(jobset, status=self.templates["jobset"]["status"]))
            head = store.get(self.k_job, self.namespace, self.head_job(name))
            store.write_status(self.k_job, dict(head, status={**head.get("status", {}), "ready": 1}))
        else:
            worker = self.pod(name, "worker")
            current = store.get(self.k_pod, self.namespace, worker["name"])
            status = not_ready(worker["running"]) if state == "running" else worker["running"]
            store.write_status(self.k_pod, dict(current, status=status))
        self.state[name] = "flapping" if state == "running" else "running"

    def _kueue_workload(self, name: str) -> dict[str, Any]:
        return self.cluster.store.get(self.k_kueue, self.namespace, self.kueue_names[name])

    def finish(self, name: str) -> None:
        """The workload ends as ``self.ending`` says: pods, child Jobs, JobSet and Kueue Workload."""
        store, ns, now = self.cluster.store, self.namespace, self.cluster.clock.timestamp()
        ending = self.ending[name]
        pods = self.pods[name]
        head_pod, worker_pod = self.pod(name, "pathways-head"), self.pod(name, "worker")
        if self.state[name] == "pending":  # it ends without the window having started it: it started now
            for pod in pods:
                pod["running"] = started_at(pod["running"], now)
        for pod in pods:
            current = store.get(self.k_pod, ns, pod["name"])
            code = 1 if ending == "failing" and pod is head_pod else (143 if ending == "disrupted" and pod is worker_pod else 0)
            status = terminated_status(pod["running"], code, "Error", now)
            if ending == "disrupted" and pod is worker_pod:
                status = self.with_condition(status, "DisruptionTarget", "TerminationByKubelet", "Pod was terminated in response to imminent node shutdown.", now)
            store.write_status(self.k_pod, dict(current, status=status))
        succeeded = ending == "succeeding"
        for template in self.templates["jobs"]:
            job = store.get(self.k_job, ns, template["metadata"]["name"].replace(TEMPLATE, name))
            status = {"active": 0, "ready": 0, "startTime": (job.get("status") or {}).get("startTime", now), "completionTime": now}
            if succeeded or "pathways-head" not in job["metadata"]["name"]:
                status.update(succeeded=1, conditions=[
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": now},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": now},
                ])
            else:
                status.update(failed=1, conditions=[
                    {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now},
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now},
                ])
                status.pop("completionTime")
            store.write_status(self.k_job, dict(job, status=status))
        jobset = store.get(self.k_jobset, ns, name)
        status = dict(jobset.get("status") or {})
        if succeeded:
            ended, reason, message = "Completed", "AllJobsCompleted", "jobset completed successfully"
        else:
            ended, reason, message = "Failed", "FailedJobs", f"jobset failed due to reaching max number of restarts (first failed job: {self.head_job(name)})"
        status = {**self.with_condition(status, ended, reason, message, now), "terminalState": ended}
        store.write_status(self.k_jobset, dict(jobset, status=status))
        kueue = self._kueue_workload(name)
        store.write_status(self.k_kueue, dict(kueue, status=self.kueue.finished_status(kueue["status"], succeeded, message, now)))
        self.finished_at[name] = time.time()

    def triggers(self, poll_interval: float) -> list[tuple[str, dict[str, Any]]]:
        if self.kind == "job":
            from airflow.providers.cncf.kubernetes.triggers.job import KubernetesJobTrigger

            made = [
                KubernetesJobTrigger(
                    job_name=self.head_job(name), job_namespace=self.namespace, pod_names=[self.pod(name, "pathways-head")["name"]],
                    pod_namespace=self.namespace, base_container_name="jax-tpu", kubernetes_conn_id="kubernetes_default",
                    poll_interval=poll_interval, get_logs=False, do_xcom_push=False,
                )
                for name in self.names
            ]
        else:
            from pathways_airflow.hooks.pathways import ClusterTarget
            from pathways_airflow.triggers.workload import PathwaysJobTrigger

            made = [
                PathwaysJobTrigger(name=name, namespace=self.namespace, backend="pathwaysjob", target=ClusterTarget().to_dict())
                for name in self.names
            ]
        # Stored and read back as JSON, as the triggerer's database row holds them.
        return [(path, json.loads(json.dumps(kwargs))) for path, kwargs in (t.serialize() for t in made)]


# --- one contender --------------------------------------------------------------------------


START_TIMEOUT = 120.0
"""Seconds a triggerer has to start its N waits, and then for every wait to reach the API once."""


@dataclass
class Setup:
    """What every run shares: the cluster, the template workload, the fleet's hosts, the one-CA
    kubeconfig both contenders' connection names and the one CA their processes trust."""

    cluster: Any
    templates: dict[str, Any]
    hosts: SliceHosts
    kubeconfig: str
    trust: dict[str, str]
    """The triggerer processes' OpenSSL trust (:func:`trust_environment`)."""


@dataclass
class Timeline:
    """What the driver saw of one run: the API server's request counts at each mark and the
    windows' lengths."""

    counts_before: dict[str, int]
    counts_after: dict[str, int]
    counts_drained: dict[str, int]
    steady_seconds: float
    finish_seconds: float
    changes: int


class TriggererProcess:
    """One contender's triggerer process: marks go to its stdin, its lines come back."""

    def __init__(self, command: list[str], env: dict[str, str], label: str):
        self.label = label
        self.child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        reader = threading.Thread(target=lambda: self.lines.extend(iter(self.child.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
        reader.start()

    def send(self, line: str) -> None:
        self.child.stdin.write(line + "\n")  # type: ignore[union-attr]
        self.child.stdin.flush()  # type: ignore[union-attr]

    def wait_line(self, word: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line.strip() == word for line in self.lines):
                return True
            if self.child.poll() is not None:
                raise RuntimeError(f"the {self.label} triggerer exited with {self.child.returncode}")
            time.sleep(0.02)
        return False

    def close(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()


def triggerer_environment(setup: Setup, workdir: Path, args: argparse.Namespace, label: str, count: int) -> dict[str, str]:
    """The triggerer's environment: its ``kubernetes_default`` connection and ``KUBECONFIG`` name
    the one-CA kubeconfig and OpenSSL trusts that CA alone, whichever contender it runs."""
    env = dict(os.environ)
    env[CONN_ENV] = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": setup.kubeconfig}})
    env["KUBECONFIG"] = setup.kubeconfig
    env.update(setup.trust)
    env.setdefault("AIRFLOW_HOME", str(workdir / "airflow-home"))
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    if args.gc_freeze:
        env["AIRFLOW__PATHWAYS__FREEZE_GC_AFTER_SYNC"] = "True"
    if args.tracemalloc:
        Path(args.tracemalloc).mkdir(parents=True, exist_ok=True)
        env["TRIGGERER_SCALE_TRACEMALLOC"] = str(Path(args.tracemalloc, f"{label}-{count}-memory.txt"))
    return env


class DidNotStart(RuntimeError):
    """A contender's triggerer could not start its waits within :data:`START_TIMEOUT`: a result
    of the run (it cannot hold that many waits on this machine), recorded, not a crash of it."""


def warm_up(cluster: Any, process: TriggererProcess, kind: str, count: int, counts_start: dict[str, int], warmup: float) -> None:
    """Until every wait has reached the API once (ours: its shared watches are open; the anchor:
    one status read per Job), then ``warmup`` seconds more."""
    if not process.wait_line("started", START_TIMEOUT):
        raise DidNotStart(f"the {process.label} triggerer did not start its {count} waits in {START_TIMEOUT:.0f} s")
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        counts = cluster.request_counts
        if kind == "job" and counts.get("GET", 0) - counts_start.get("GET", 0) >= count:
            break
        if kind != "job" and counts.get("watch", 0) - counts_start.get("watch", 0) >= 4:
            break
        time.sleep(0.05)
    time.sleep(warmup)


def steady_window(cluster: Any, fleet: Fleet, rng: random.Random, args: argparse.Namespace, count: int) -> tuple[int, float]:
    """Random non-final changes, Poisson at one per workload every ``--change-every`` s; returns
    how many were made and the window's length."""
    started = time.monotonic()
    rate = count / args.change_every
    due: list[float] = []
    moment = rng.expovariate(rate)
    while moment < args.window:
        due.append(moment)
        moment += rng.expovariate(rate)
    changes = 0
    while True:
        now = time.monotonic() - started
        ready = [t for t in due[changes:] if t <= now]
        if ready:
            picks = [rng.choice(fleet.names) for _ in ready]
            cluster.call(lambda p=picks: [fleet.change(n) for n in p])
            changes += len(ready)
        if now >= args.window:
            break
        time.sleep(0.01)
    return changes, time.monotonic() - started


def finish_window(cluster: Any, fleet: Fleet, rng: random.Random, finish: float) -> None:
    """Every workload ends at a uniformly random moment of ``finish`` seconds."""
    finish_times = sorted((rng.uniform(0, finish), name) for name in fleet.names)
    started = time.monotonic()
    index = 0
    while index < len(finish_times):
        now = time.monotonic() - started
        batch = []
        while index < len(finish_times) and finish_times[index][0] <= now:
            batch.append(finish_times[index][1])
            index += 1
        if batch:
            cluster.call(lambda b=batch: [fleet.finish(n) for n in b])
        time.sleep(0.005)


def drive(cluster: Any, process: TriggererProcess, fleet: Fleet, kind: str, poll: float, args: argparse.Namespace, count: int, label: str) -> Timeline:
    """Warm-up, steady window, finish window and drain, with the triggerer told each mark."""
    rng = random.Random(f"{label}-{count}")
    warm_up(cluster, process, kind, count, cluster.request_counts, args.warmup)
    counts_before = cluster.request_counts
    process.send("mark steady")
    changes, steady_seconds = steady_window(cluster, fleet, rng, args, count)
    counts_after = cluster.request_counts
    process.send("mark finish")
    started = time.monotonic()
    finish_window(cluster, fleet, rng, args.finish)
    # The finish window lasts until the last wait reports, or the drain runs out: the failure
    # verdicts that settle after the last write are its load too.
    process.wait_line("done", poll + args.drain)  # which waits reported is read from the triggerer's own record
    counts_drained = cluster.request_counts
    process.send("mark drained")
    finish_seconds = time.monotonic() - started
    process.send("stop")
    process.child.wait(timeout=120)
    return Timeline(counts_before, counts_after, counts_drained, steady_seconds, finish_seconds, changes)


def run_contender(setup: Setup, label: str, kind: str, poll: float, args: argparse.Namespace, count: int) -> dict[str, Any]:
    cluster = setup.cluster
    namespace = f"bench-{label}-{count}"
    namespaces = cluster.kinds.lookup("", "v1", "namespaces")
    cluster.call(lambda: cluster.store.create(namespaces, {"metadata": {"name": namespace}}))
    fleet = Fleet(cluster, setup.templates, setup.hosts, namespace, count, kind, random.Random(f"fleet-{count}"))  # the same fleet for every contender
    began = time.monotonic()
    nodes = setup.hosts.ensure(fleet.names)
    fleet.create()
    setup_seconds = time.monotonic() - began
    workdir = Path(tempfile.mkdtemp(prefix="triggerer-scale-"))
    spec = {
        # Everything a wait will import is imported before the baseline RSS is read, so the
        # per-wait figure is the waits' own memory. (Ours imports its client library on first
        # use: in a triggerer that import would block the loop once, for import_seconds.)
        "modules": ["airflow.providers.cncf.kubernetes.triggers.job"] if kind == "job" else [
            "pathways_airflow.triggers.workload", "kubernetes_asyncio.client", "airflow.providers.cncf.kubernetes.hooks.kubernetes",
        ],
        "triggers": fleet.triggers(poll),
    }
    (workdir / "spec.json").write_text(json.dumps(spec))
    command = [sys.executable, __file__, "--triggerer", str(workdir / "spec.json"), str(workdir / "out.json")]
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        command += ["--profile", str(Path(args.profile, f"{label}-{count}"))]
    process = TriggererProcess(command, triggerer_environment(setup, workdir, args, label, count), label)
    try:
        timeline = drive(cluster, process, fleet, kind, poll, args, count, label)
    finally:
        process.close()
    out = json.loads((workdir / "out.json").read_text())
    row = {
        "contender": label,
        "waits": count,
        "poll_interval_s": poll if kind == "job" else None,
        "ca": CA_SETUP,
        "setup_seconds": round(setup_seconds, 1),
        "side_objects": {"nodes": nodes, "events_in_namespace": fleet.events_made},
    }
    row.update(window_figures(out, timeline, count))
    row.update(wait_figures(out, fleet, kind))
    return row


def difference(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(after) | set(before))}


def window_cpu(marks: dict[str, dict[str, float]], start: str, end: str) -> float:
    """The triggerer's CPU seconds per minute of wall time between two marks."""
    return (marks[end]["cpu"] - marks[start]["cpu"]) / (marks[end]["time"] - marks[start]["time"]) * 60


def ssl_figures(contexts: dict[str, float] | None) -> dict[str, Any]:
    contexts = contexts or {"built": 0, "seconds": 0.0, "ca_certificates": 0}
    built = int(contexts["built"])
    return {
        "built": built,
        "mean_ms": round(contexts["seconds"] / built * 1000, 2) if built else None,
        "ca_certificates": int(contexts["ca_certificates"]),
    }


def window_figures(out: dict[str, Any], timeline: Timeline, count: int) -> dict[str, Any]:
    """Requests, CPU, memory, stalls and collections, by window."""
    marks = out["marks"]
    steady_requests = difference(timeline.counts_after, timeline.counts_before)
    finish_requests = difference(timeline.counts_drained, timeline.counts_after)
    watch_events = marks["finish"]["watch_events"] - marks["steady"]["watch_events"]
    cpu = marks["finish"]["cpu"] - marks["steady"]["cpu"]
    baseline = out["baseline_rss_kb"]
    finish_peak = out["rss_peaks_kb"].get("finish", marks["drained"]["rss_kb"])
    full_collections = {p: c.get("2", {}) for p, c in out["collections"].items()}
    window_stalls = [out["stalls"][p] for p in ("steady", "finish") if p in out["stalls"]]
    peak = out["peak_rss_kb"]
    return {
        "steady_window_s": round(timeline.steady_seconds, 1),
        "state_changes_in_window": timeline.changes,
        "requests_in_window": sum(steady_requests.values()),
        "requests_by_verb": steady_requests,
        "requests_per_s": round(sum(steady_requests.values()) / timeline.steady_seconds, 2),
        "cpu_s_per_min": round(window_cpu(marks, "steady", "finish"), 2),
        "finish_window_s": round(timeline.finish_seconds, 1),
        "finish_requests": sum(finish_requests.values()),
        "finish_requests_by_verb": finish_requests,
        "finish_requests_per_s": round(sum(finish_requests.values()) / timeline.finish_seconds, 2),
        "finish_cpu_s_per_min": round(window_cpu(marks, "finish", "drained"), 2),
        "import_seconds": round(out["import_seconds"], 2),
        "baseline_rss_mb": round(baseline / 1024, 1),
        "peak_rss_mb": round(peak / 1024, 1),
        "rss_kb_per_wait": round((peak - baseline) / count, 1),
        "steady_rss_mb": round(marks["finish"]["rss_kb"] / 1024, 1),
        "steady_rss_kb_per_wait": round((marks["finish"]["rss_kb"] - baseline) / count, 1),
        "finish_peak_rss_mb": round(finish_peak / 1024, 1),
        "finish_peak_rss_kb_per_wait": round((finish_peak - baseline) / count, 1),
        "max_stall_ms": round(max((s["max"] for s in window_stalls), default=0.0) * 1000, 1),
        "stalls_over_100ms": sum(s["over_100ms"] for s in window_stalls),
        "startup_max_stall_ms": round(out["stalls"].get("start", {}).get("max", 0.0) * 1000, 1),
        "watch_events_in_window": watch_events,
        "cpu_us_per_watch_event": round(cpu / watch_events * 1e6, 1) if watch_events else None,
        "looks_in_window": marks["finish"].get("looks", 0) - marks["steady"].get("looks", 0),
        "full_gc": {p: {"count": c.get("count", 0), "max_ms": round(c.get("max", 0.0) * 1000, 1)} for p, c in full_collections.items()},
        "max_full_gc_ms_in_windows": round(max((full_collections.get(p, {}).get("max", 0.0) for p in ("steady", "finish")), default=0.0) * 1000, 1),
        "ssl_contexts": {p: ssl_figures(out["ssl_contexts"].get(p)) for p in ("steady", "finish")},
        "frozen_at_stop": out.get("frozen_at_stop"),
        "cyclic_garbage_at_stop": out.get("cyclic_garbage_at_stop"),
    }


UNREPORTED_NAMED = 5
"""How many of the waits that never reported a row names (it counts them all)."""


def wait_figures(out: dict[str, Any], fleet: Fleet, kind: str) -> dict[str, Any]:
    """Which waits reported, what, and how fast: every wait is accounted for."""
    key = {n: fleet.head_job(n) if kind == "job" else n for n in fleet.names}
    events = {n: out["events"][key[n]] for n in fleet.names if key[n] in out["events"]}
    unreported = [n for n in fleet.names if n not in events]
    raised = {n: out["raised"][key[n]] for n in unreported if key[n] in out["raised"]}
    latencies = {n: events[n]["time"] - t for n, t in fleet.finished_at.items() if n in events}
    by_ending = {}
    for ending in ENDINGS:
        names = [n for n in fleet.names if fleet.ending[n] == ending]
        values = [latencies[n] for n in names if n in latencies]
        by_ending[ending] = {
            "waits": len(names),
            "unreported": sum(1 for n in names if n not in events),
            "p50_s": round(percentile(values, 0.5), 3) if values else None,
            "p99_s": round(percentile(values, 0.99), 3) if values else None,
            "max_s": round(max(values), 3) if values else None,
        }
    values = list(latencies.values())
    return {
        "events": len(events),
        "reported": len(events),
        "unreported": len(unreported),
        "unreported_names": unreported[:UNREPORTED_NAMED],
        "unreported_raised": dict(list(raised.items())[:UNREPORTED_NAMED]),
        "unreported_raised_count": len(raised),
        "all_events_received": not unreported,
        "unexpected_events": sum(1 for n, e in events.items() if (e["status"] if kind == "job" else e["phase"]) not in fleet.expected(n)),
        "endings": {ending: sum(1 for e in fleet.ending.values() if e == ending) for ending in ENDINGS},
        "queued_in_window": len(fleet.queued),
        "reaction_by_ending": by_ending,
        "reaction_p50_s": round(percentile(values, 0.5), 3) if values else None,
        "reaction_p99_s": round(percentile(values, 0.99), 3) if values else None,
        "reaction_max_s": round(max(values), 3) if values else None,
    }


# --- ratios and targets ---------------------------------------------------------------------


def fraction(ours: float | None, anchor: float | None) -> float | None:
    return round(ours / anchor, 3) if ours is not None and anchor else None


def ratios(ours: dict[str, Any], anchor: dict[str, Any], window: float) -> dict[str, Any]:
    floor = 1 / window  # zero requests in the window: count one, so the ratio stays finite (a lower bound)
    return {
        "anchor": anchor["contender"],
        "fewer_requests_x": round(anchor["requests_per_s"] / max(ours["requests_per_s"], floor), 1),
        "requests_ratio_is_lower_bound": ours["requests_in_window"] == 0,
        "cpu_fraction": fraction(ours["cpu_s_per_min"], anchor["cpu_s_per_min"]),
        "finish_cpu_fraction": fraction(ours["finish_cpu_s_per_min"], anchor["finish_cpu_s_per_min"]),
        "finish_requests_fraction": fraction(ours["finish_requests_per_s"], anchor["finish_requests_per_s"]),
        "rss_per_wait_fraction": fraction(ours["rss_kb_per_wait"], anchor["rss_kb_per_wait"] if anchor["rss_kb_per_wait"] > 0 else None),
        "steady_rss_per_wait_fraction": fraction(
            ours["steady_rss_kb_per_wait"], anchor["steady_rss_kb_per_wait"] if anchor["steady_rss_kb_per_wait"] > 0 else None
        ),
        "reaction_p99_fraction": fraction(ours["reaction_p99_s"], anchor["reaction_p99_s"]),
    }


def target(measured: float | None, limit: float | None, unit: str, stated_at: int, failed: str | None, **details: Any) -> dict[str, Any]:
    """One target: measured against its limit (lower is better for every one here). ``margin``
    is ``limit - measured`` in ``unit``: positive is the headroom, negative how much it missed by.
    A run in which some wait never reported (``failed``) misses it whatever was measured."""
    known = measured is not None and limit is not None
    result: dict[str, Any] = {
        "measured": measured,
        "limit": limit,
        "unit": unit,
        "stated_at_waits": stated_at,
        "met": (measured <= limit and failed is None) if known else (False if failed else None),  # type: ignore[operator]
        "margin": round(limit - measured, 3) if known else None,  # type: ignore[operator]
        "margin_of_limit": round((limit - measured) / limit, 3) if known and limit else None,  # type: ignore[operator]
    }
    why = details.pop("why", "not measured in this run")
    if failed:
        result["missed_because"] = failed
    elif not known:
        result["not_measured"] = why
    result.update(details)
    return result


def run_failure(rows: list[dict[str, Any]]) -> str | None:
    """Why the run at this N failed, if a wait of any contender never reported."""
    lost = [f"{r['unreported']} of {r['contender']}'s {r['waits']} waits never reported ({', '.join(r['unreported_names'])}…)" for r in rows if r["unreported"]]
    return "; ".join(lost) or None


def targets(ours: dict[str, Any], anchor10: dict[str, Any] | None, failed: str | None) -> dict[str, Any]:
    """Issue 30's targets for one N, each measured, against its limit, met or not, with its margin."""
    no_anchor = "no anchor at its default 10 s poll in this run"
    reactions = {e: v["p99_s"] for e, v in ours["reaction_by_ending"].items() if e != SETTLING_ENDING}
    known = [v for v in reactions.values() if v is not None]
    ratio = fraction(ours["cpu_s_per_min"], anchor10["cpu_s_per_min"]) if anchor10 else None
    return {
        "no_stall_over_100ms_startup_included": target(
            max(ours["max_stall_ms"], ours["startup_max_stall_ms"]), 100.0, "ms", 10_000, failed,
            windows_ms=ours["max_stall_ms"], startup_ms=ours["startup_max_stall_ms"],
        ),
        "p99_reaction_le_1s_except_user_error": target(
            max(known) if known else None, 1.0, "s", 10_000, failed, by_ending_p99_s=reactions,
            user_error_p99_s=ours["reaction_by_ending"][SETTLING_ENDING]["p99_s"],
        ),
        "steady_rss_le_50kb_per_wait": target(ours["steady_rss_kb_per_wait"], 50.0, "KB", 10_000, failed),
        "finish_peak_rss_le_50kb_per_wait": target(ours["finish_peak_rss_kb_per_wait"], 50.0, "KB", 10_000, failed),
        "steady_rss_per_wait_le_anchor": target(
            ours["steady_rss_kb_per_wait"], anchor10["steady_rss_kb_per_wait"] if anchor10 else None, "KB", 10_000, failed, why=no_anchor,
        ),
        "cpu_le_100us_per_watch_event": target(ours["cpu_us_per_watch_event"], 100.0, "µs", 10_000, failed),
        "steady_cpu_le_1_20_of_anchor": target(ratio, 0.05 if anchor10 else None, "× the anchor's", 1_000, failed, why=no_anchor),
    }


COLUMNS = [
    ("contender", "contender"),
    ("waits", "N"),
    ("unreported", "unreported"),
    ("requests_per_s", "req/s steady"),
    ("finish_requests_per_s", "req/s finish"),
    ("cpu_s_per_min", "CPU s/min steady"),
    ("finish_cpu_s_per_min", "CPU s/min finish"),
    ("steady_rss_kb_per_wait", "KB/wait steady"),
    ("finish_peak_rss_kb_per_wait", "KB/wait finish peak"),
    ("reaction_p50_s", "react p50 s"),
    ("reaction_p99_s", "react p99 s"),
    ("max_stall_ms", "max stall ms"),
    ("startup_max_stall_ms", "start-up stall ms"),
    ("max_full_gc_ms_in_windows", "max full GC ms"),
    ("cpu_us_per_watch_event", "CPU µs/event"),
    ("ssl_ms", "SSL ms/context"),
]


def table_cell(row: dict[str, Any], key: str) -> str:
    if key == "ssl_ms":
        steady = row["ssl_contexts"]["steady"]
        return f"{steady['mean_ms']} ×{steady['built']}, {steady['ca_certificates']} CA" if steady["built"] else "none built"
    return str(row[key])


def print_table(rows: list[dict[str, Any]]) -> None:
    cells = [[table_cell(row, key) for key, _ in COLUMNS] for row in rows]
    widths = [max(len(title), *(len(c[i]) for c in cells)) for i, (_, title) in enumerate(COLUMNS)]
    print("  ".join(title.ljust(w) for (_, title), w in zip(COLUMNS, widths)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))
    for row in rows:
        if row["unreported"]:
            print(f"  {row['contender']}: {row['unreported']} waits never reported: {', '.join(row['unreported_names'])}…")


def print_targets(count: int, result: dict[str, Any]) -> None:
    for name, entry in result.items():
        if entry["met"] is None:
            verdict = f"not measured ({entry.get('not_measured')})"
        else:
            verdict = "met" if entry["met"] else "MISSED"
            verdict += f": {entry['measured']} against {entry['limit']} {entry['unit']} (margin {entry['margin']})"
            if entry.get("missed_because"):
                verdict += f"; the run failed: {entry['missed_because']}"
        print(f"  target {name} (stated at N = {entry['stated_at_waits']:,}; here N = {count:,}): {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", type=int, nargs="+", default=[1000], help="how many deferred waits (one run per value)")
    parser.add_argument("--anchor-polls", type=float, nargs="*", default=[10.0, 2.0], help="KubernetesJobTrigger poll_interval values")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds between starting the triggers and the steady window")
    parser.add_argument("--window", type=float, default=30.0, help="steady window, seconds")
    parser.add_argument("--finish", type=float, default=20.0, help="finish window, seconds")
    parser.add_argument("--drain", type=float, default=20.0, help="seconds (beyond the poll interval) to wait for the last events")
    parser.add_argument("--change-every", type=float, default=60.0, help="mean seconds between state changes of one workload")
    parser.add_argument("--skip-ours", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 waits, short windows, the anchor at 2 s only")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--profile", metavar="DIR", help="run each triggerer process under cProfile; stats go to DIR/<contender>-<N>.{prof,txt}")
    parser.add_argument("--tracemalloc", metavar="DIR", help="trace allocations in each triggerer process; the top lines at the end of the steady window go to DIR")
    parser.add_argument("--gc-freeze", action="store_true", help="run the triggerer processes with [pathways] freeze_gc_after_sync = True")
    parser.add_argument("--triggerer", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.triggerer:
        # A triggerer run with [logging] logging_level = WARNING: Airflow's own set-up, which its
        # structlog loggers (BaseTrigger.log) filter by; the stdlib level alone leaves them at INFO.
        from airflow.sdk.log import configure_logging

        configure_logging(log_level="WARNING")
        logging.basicConfig(level=logging.WARNING)
        if not args.profile:
            asyncio.run(triggerer(*args.triggerer))
            return 0
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(asyncio.run, triggerer(*args.triggerer))
        profiler.dump_stats(args.profile + ".prof")
        with open(args.profile + ".txt", "w") as text:
            stats = pstats.Stats(profiler, stream=text).sort_stats("tottime")
            stats.print_stats(25)
            stats.sort_stats("cumulative").print_stats(40)
        return 0
    if args.quick:
        # The steady window spans a few of the anchor's poll cycles (poll + one status read each),
        # so it always sees the anchor poll however loaded the machine is.
        args.waits, args.anchor_polls = [20], [2.0]
        args.warmup, args.window, args.finish, args.drain, args.change_every = 0.5, 6.0, 1.5, 8.0, 2.0

    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="triggerer-scale-home-"))
    from pathways_airflow_testing import LocalCluster

    ca_directory = Path(tempfile.mkdtemp(prefix="triggerer-scale-ca-"))
    ca_pem = one_ca_certificate()
    trust = trust_environment(*write_ca(ca_pem, ca_directory))
    report: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
        "settings": {k: getattr(args, k) for k in ("waits", "anchor_polls", "warmup", "window", "finish", "drain", "change_every", "quick", "gc_freeze")},
        "ca": ca_setup(trust),
        "runs": [],
        "did_not_start": [],
        "ratios": [],
        "targets": {},
    }
    with LocalCluster(speed=60, gcs=False, kueue=True) as cluster:
        templates = capture_templates(cluster)
        pause_controllers(cluster)
        kubeconfig = one_ca_kubeconfig(cluster.kubeconfig, ca_pem, ca_directory)
        setup = Setup(cluster, templates, SliceHosts(cluster, templates["pods"]), kubeconfig, trust)
        for count in args.waits:
            rows = []
            contenders = [] if args.skip_ours else [("ours", "pathwaysjob", 0.0)]
            contenders += [(f"anchor-{poll:g}s", "job", poll) for poll in args.anchor_polls]
            for label, kind, poll in contenders:
                try:
                    rows.append(run_contender(setup, label, kind, poll, args, count))
                except DidNotStart as error:
                    report["did_not_start"].append({"contender": label, "waits": count, "why": str(error)})
                    print(f"{label} at N = {count}: {error}")
                if args.json:  # what is measured so far survives a later contender's crash
                    Path(args.json).write_text(json.dumps({**report, "runs": [*report["runs"], *rows]}, indent=2) + "\n")
            report["runs"].extend(rows)
            print_table(rows)
            ours = next((r for r in rows if r["contender"] == "ours"), None)
            if ours:
                anchors = [r for r in rows if r is not ours]
                report["ratios"].extend(dict(ratios(ours, a, args.window), waits=count) for a in anchors)
                anchor10 = next((a for a in anchors if a["poll_interval_s"] == 10.0), None)
                report["targets"][str(count)] = targets(ours, anchor10, run_failure(rows))
                for r in report["ratios"]:
                    if r["waits"] == count:
                        print(
                            f"  vs {r['anchor']}: {r['fewer_requests_x']}x fewer requests/s, CPU x{r['cpu_fraction']} steady"
                            f" / x{r['finish_cpu_fraction']} finish, steady RSS/wait x{r['steady_rss_per_wait_fraction']},"
                            f" p99 reaction x{r['reaction_p99_fraction']}"
                        )
                print_targets(count, report["targets"][str(count)])
            print()
    ca = report["ca"]
    print(
        f"CA: {ca['setup']}; one SSL context {ca['ssl_context_ms_one_ca']} ms, {ca['ca_certificates_one_ca']} CA certificate"
        f" (with the system bundle: {ca['ssl_context_ms_system_bundle']} ms, {ca['ca_certificates_system_bundle']})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Admission webhook under load: latency and errors at a fixed request rate, and memory under
the largest reviews.

``python benchmarks/webhook_bench.py`` starts the test control plane (etcd + kube-apiserver,
``hack/build-control-plane.sh``), opens queues ``root`` and ``default``, and runs
``stromboli webhook-manager`` against it with the chart's client limits (``--kube-api-qps=50
--kube-api-burst=100``), serving TLS on 127.0.0.1. A second process sends AdmissionReviews
open-loop (each request at its scheduled time, whatever the answers do) at ``--rate`` per
second for ``--seconds``: a round-robin of ``/jobs/validate``, ``/queues/validate``,
``/pods/mutate`` and ``/pods/validate``, each URL carrying ``?timeout=10s`` as the API server
sends it and waited for at most 10 s. It prints p50/p99/max latency per path and overall, the
answers by HTTP status, timeouts and connection errors, the last answer's lag after the last
send (a backlog shows here), and the server's own outcome counters.

``--enrol`` makes the ``/pods/mutate`` review the enrolment case: a pod with no scheduler in
a namespace labelled ``stromboli.dev/enroll: "true"``, owned by a ReplicaSet the server
follows by watch (the owner chain of a Deployment's pod), so the answer carries the
scheduler, queue and ``podgroup-<uid>`` patch.

The load client models the API server's webhook client: HTTP/1.1 with keep-alive (our server
offers no HTTP/2), a connection reused whenever one is idle and a new one opened when none is,
as Go's transport does (``--connections N`` caps them instead); a pool of eight is opened
before the clock starts, as a running API server has one.
It reports how many connections it opened. The server's CPU time per request (user + system,
from ``/proc``) is printed beside the latencies, with the load average: on a shared machine
the wall-clock tail follows the other work, the CPU per request does not.

``--flood RATE`` runs a third process during the load that opens ``RATE`` new TLS connections
a second (no request on them; each held ``--flood-hold`` seconds unless the server closes it
first), the client that took an unbounded server to 3.8 GiB; the server's peak RSS, its
connection counters and the flood's outcomes are printed. ``--server-arg`` passes a flag to
``webhook-manager`` (``--server-arg=--max-connections=1000000`` for the unbounded case).

``--memory-store`` serves from a memory store instead of the test control plane (same
``WebhookServer``, same TLS, no API server or etcd on the cores): the server's own cost.
``--server-arg`` applies to the control-plane mode only.

``--memory`` then sends reviews just under the 7 MiB body limit, several at once, and prints
the server's peak RSS (``VmHWM``) before and after.

Figures go to stdout; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from pathlib import Path

PATHS = ("/jobs/validate", "/queues/validate", "/pods/mutate", "/pods/validate")
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
ENROLLED = "bench-enrol"
WARM_CONNECTIONS = 8


# --- reviews ---------------------------------------------------------------------------------


def _review(kind: tuple[str, str, str, str], obj: dict, operation: str = "CREATE") -> dict:
    group, version, name, resource = kind
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": name},
            "resource": {"group": group, "version": version, "resource": resource},
            "operation": operation,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "object": obj,
            "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
        },
    }


def _enrolled_pod(container: dict, owner_uid: str) -> dict:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web",
        "uid": owner_uid,
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "web-", "namespace": ENROLLED, "ownerReferences": [owner]},
        "spec": {"containers": [container]},
    }


def reviews(owner_uid: str = "") -> dict[str, bytes]:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}},
    }
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "queue": "default",
            "schedulerName": "volcano",
            "minAvailable": 3,
            "maxRetry": 3,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 3,
                    "minAvailable": 3,
                    "maxRetry": 3,
                    "template": {"spec": {"containers": [container]}},
                }
            ],
        },
    }
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "bench-q"},
        "spec": {"weight": 1, "reclaimable": True, "capability": {"cpu": "100"}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "bench-worker-0",
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": "bench"},
        },
        "spec": {"schedulerName": "volcano", "containers": [container]},
    }
    pod_kind = ("", "v1", "Pod", "pods")
    bodies = {
        "/jobs/validate": _review(("batch.volcano.sh", "v1alpha1", "Job", "jobs"), job),
        "/queues/validate": _review(("scheduling.volcano.sh", "v1beta1", "Queue", "queues"), queue),
        "/pods/mutate": _review(
            pod_kind, _enrolled_pod(container, owner_uid) if owner_uid else pod
        ),
        "/pods/validate": _review(pod_kind, pod),
    }
    return {path: json.dumps(body).encode() for path, body in bodies.items()}


# --- the load process ------------------------------------------------------------------------


async def load(
    base: str, ca: str, rate: float, seconds: float, owner_uid: str = "", connections: int = 0
) -> dict:
    import aiohttp

    trust = ssl.create_default_context(cafile=ca)
    bodies = reviews(owner_uid)
    latencies: dict[str, list[float]] = defaultdict(list)
    statuses: Counter[str] = Counter()
    last_answer = 0.0
    opened = 0

    async def on_create(*_args: object) -> None:
        nonlocal opened
        opened += 1

    tracing = aiohttp.TraceConfig()
    tracing.on_connection_create_end.append(on_create)
    connector = aiohttp.TCPConnector(limit=connections, ssl=trust, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, trace_configs=[tracing]
    ) as http:

        async def one(path: str) -> None:
            nonlocal last_answer
            started = time.perf_counter()
            try:
                async with http.post(
                    f"{base}{path}?timeout=10s",
                    data=bodies[path],
                    headers={"Content-Type": "application/json"},
                ) as response:
                    answer = await response.read()
                    statuses[str(response.status)] += 1
                    if path == "/pods/mutate" and b'"patch"' in answer:
                        statuses["/pods/mutate patched"] += 1
                    if response.status == 200:
                        latencies[path].append(time.perf_counter() - started)
            except TimeoutError:
                statuses["timeout"] += 1
            except aiohttp.ClientError as err:
                statuses[f"error {type(err).__name__}"] += 1
            last_answer = max(last_answer, time.perf_counter())

        # A running API server has its pool already: open it before the clock starts.
        for _ in range(2):
            await asyncio.gather(*(one("/pods/validate") for _ in range(WARM_CONNECTIONS)))
        latencies.clear()
        statuses.clear()
        warm_opened = opened
        print("warm", flush=True)  # the flood may start: this client has its pool
        total = int(rate * seconds)
        tasks = []
        t0 = time.perf_counter()
        for i in range(total):
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(PATHS[i % len(PATHS)])))
        last_send = time.perf_counter()
        await asyncio.gather(*tasks)
    return {
        "sent": total,
        "send_seconds": last_send - t0,
        "lag_after_last_send": last_answer - last_send,
        "latencies": latencies,
        "statuses": dict(statuses),
        "connections_opened": opened - warm_opened,
        "connections_warm": warm_opened,
    }


async def flood(base: str, rate: float, seconds: float, hold: float) -> dict:
    """New TLS connections at ``rate`` a second, no request on any; each held ``hold`` s."""
    host, port = base.removeprefix("https://").rsplit(":", 1)
    careless = ssl.create_default_context()
    careless.check_hostname = False
    careless.verify_mode = ssl.CERT_NONE  # the client's CPU goes to opening, not verifying
    outcomes: Counter[str] = Counter()

    async def one() -> None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, int(port), ssl=careless), 10
            )
        except TimeoutError:
            outcomes["handshake timeout"] += 1
            return
        except (OSError, asyncio.IncompleteReadError) as err:
            outcomes[f"refused ({type(err).__name__})"] += 1
            return
        outcomes["opened"] += 1
        try:
            await asyncio.wait_for(reader.read(), hold)
            outcomes["closed by the server"] += 1
        except TimeoutError:
            outcomes["held to the end"] += 1
        except OSError:
            outcomes["reset by the server"] += 1
        finally:
            writer.transport.abort()

    tasks: set[asyncio.Task[None]] = set()
    t0 = time.perf_counter()
    sent = 0
    while (elapsed := time.perf_counter() - t0) < seconds:
        due = int(elapsed * rate)
        for _ in range(due - sent):
            task = asyncio.create_task(one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        sent = max(sent, due)
        await asyncio.sleep(0.005)
    send_seconds = time.perf_counter() - t0
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"attempted": sent, "seconds": send_seconds, "outcomes": dict(outcomes)}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(result: dict) -> None:
    every = [x for values in result["latencies"].values() for x in values]
    print(f"sent {result['sent']} reviews in {result['send_seconds']:.1f} s")
    print(f"{'path':<18} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for path in (*PATHS, "all"):
        values = every if path == "all" else result["latencies"].get(path, [])
        print(
            f"{path:<18} {len(values):>6} {1000 * _percentile(values, 0.5):>8.2f} "
            f"{1000 * _percentile(values, 0.99):>8.2f} {1000 * max(values, default=0):>8.2f}"
        )
    print("answers:", json.dumps(result["statuses"], sort_keys=True))
    print(
        f"load client connections: {result['connections_warm']} opened before the clock, "
        f"{result['connections_opened']} more during the load (HTTP/1.1 keep-alive)"
    )
    ok = result["statuses"].get("200", 0)
    print(f"errors: {result['sent'] - ok} of {result['sent']}")
    print(f"last answer {result['lag_after_last_send'] * 1000:.0f} ms after the last send")
    if every:
        print(f"mean {1000 * statistics.fmean(every):.2f} ms")


# --- the server ------------------------------------------------------------------------------


def _wait_ready(url: str, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"webhook-manager exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass  # not listening yet
        time.sleep(0.2)
    sys.exit(f"webhook-manager not ready after {timeout:.0f}s:\n{log.read_text()[-3000:]}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_seconds(pid: int) -> float:
    """Seconds the process's threads have waited for a CPU while runnable (schedstat): on
    a shared machine this, not the server's own work, is most of the wall-clock tail."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError):  # a thread may end meanwhile
            total += int(stat.read_text().split()[1])
    return total / 1e9


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def memory_probe(base: str, ca: str, concurrent: int) -> dict[str, int]:
    import aiohttp

    from stromboli.webhooks.limits import MAX_BODY

    # [{},{},...] is the costliest JSON per byte (~27x when parsed).
    filler = b"{}," * ((MAX_BODY - 4096) // 3)
    head = _review(("", "v1", "Pod", "pods"), {"kind": "Pod", "metadata": {"name": "m"}})
    text = json.dumps(head).encode()
    marker = b'"object": {'
    at = text.index(marker) + len(marker)
    body = text[:at] + b'"pad": [' + filler + b"{}], " + text[at:]
    statuses: Counter[str] = Counter()
    trust = ssl.create_default_context(cafile=ca)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as http:

        async def one() -> None:
            async with http.post(f"{base}/pods/validate?timeout=10s", data=body) as response:
                await response.read()
                statuses[str(response.status)] += 1

        for _ in range(3):
            await asyncio.gather(*(one() for _ in range(concurrent)))
    return {"body_bytes": len(body), **statuses}


async def serve_memory(run_dir: Path, port: int, health: int, enrol: bool) -> None:
    """The webhook server as ``webhook-manager`` runs it, on a memory store holding the
    queues (and the enrolled namespace and ReplicaSet): what a review costs the server
    without an API server and etcd on the same cores. Stops on SIGTERM."""
    import signal

    from stromboli.core.clock import SystemClock
    from stromboli.core.cluster.memory import MemoryStore
    from stromboli.webhooks.server import WebhookOptions, WebhookServer
    from stromboli.webhooks.tls import load_files

    store = MemoryStore(SystemClock())
    for name in ("root", "default"):
        made = await store.create(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1, "reclaimable": True},
            }
        )
        made["status"] = {"state": "Open"}
        await store.update_status(made)
    if enrol:
        labels = {"stromboli.dev/enroll": "true"}
        await store.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ENROLLED, "labels": labels},
            }
        )
        owner = await store.create(_replicaset())
        (run_dir / "owner-uid").write_text(owner["metadata"]["uid"])
    certificate = load_files(
        str(run_dir / "tls.crt"), str(run_dir / "tls.key"), str(run_dir / "ca.crt")
    )
    options = WebhookOptions(
        listen_address="127.0.0.1",
        port=port,
        enable_healthz=True,
        healthz_address=f"127.0.0.1:{health}",
    )
    server = WebhookServer(store, options, certificate)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, server.stop)
    await server.run()


def _replicaset() -> dict:
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web",
            "namespace": ENROLLED,
            "annotations": {"scheduling.volcano.sh/group-min-member": "2"},
        },
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": template},
    }


def _enrolment_owner(client) -> str:  # type: ignore[no-untyped-def]
    """An enrolled namespace and a ReplicaSet of no replicas in it; returns its uid."""
    labels = {"stromboli.dev/enroll": "true"}
    client.post(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ENROLLED, "labels": labels}},
    )
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    made = client.post(
        f"/apis/apps/v1/namespaces/{ENROLLED}/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web",
                "annotations": {"scheduling.volcano.sh/group-min-member": "2"},
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template,
            },
        },
    )
    return made["metadata"]["uid"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--memory", action="store_true", help="also the memory probe")
    parser.add_argument("--enrol", action="store_true", help="/pods/mutate enrols (owner chain)")
    parser.add_argument(
        "--connections", type=int, default=0, help="cap on the load client's connections"
    )
    parser.add_argument("--flood", type=float, default=0.0, help="new TLS connections a second")
    parser.add_argument("--flood-hold", type=float, default=30.0, help="seconds each is held")
    parser.add_argument(
        "--server-arg", action="append", default=[], help="extra webhook-manager flag"
    )
    parser.add_argument("--load", nargs=2, metavar=("BASE", "CA"), help=argparse.SUPPRESS)
    parser.add_argument("--flood-of", metavar="BASE", help=argparse.SUPPRESS)
    parser.add_argument(
        "--memory-store",
        action="store_true",
        help="serve from a memory store, no API server (the server's own cost)",
    )
    parser.add_argument("--serve-memory", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--health", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--owner-uid", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:  # the second process
        result = asyncio.run(
            load(
                args.load[0],
                args.load[1],
                args.rate,
                args.seconds,
                args.owner_uid,
                args.connections,
            )
        )
        print(json.dumps(result))
        return
    if args.flood_of:  # the third process
        print(
            json.dumps(asyncio.run(flood(args.flood_of, args.flood, args.seconds, args.flood_hold)))
        )
        return

    if args.serve_memory:  # the server on a memory store
        asyncio.run(
            serve_memory(Path(args.serve_memory), args.port, args.health, args.owner_uid == "True")
        )
        return

    from stromboli.core.api.crds import build_crds
    from stromboli.core.devcluster import ControlPlane, build_control_plane
    from stromboli.core.devcluster.controlplane import free_port
    from stromboli.webhooks.tls import self_signed

    run_dir = Path(tempfile.mkdtemp(prefix="webhook-bench-"))
    certificate = self_signed(["127.0.0.1"])
    for name, data in (
        ("tls.crt", certificate.cert_pem),
        ("tls.key", certificate.key_pem),
        ("ca.crt", certificate.ca_pem),
    ):
        (run_dir / name).write_bytes(data)
    port, health = free_port(), free_port()
    log = run_dir / "webhook-manager.log"
    with contextlib.ExitStack() as stack:
        if args.memory_store:
            server = subprocess.Popen(
                [
                    *(sys.executable, __file__, "--serve-memory", str(run_dir)),
                    *(f"--port={port}", f"--health={health}", f"--owner-uid={args.enrol}"),
                ],
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
            )
            _wait_ready(f"http://127.0.0.1:{health}/readyz", server, log)
            owner_uid = (run_dir / "owner-uid").read_text() if args.enrol else ""
        else:
            cp = stack.enter_context(ControlPlane(build_control_plane(), run_dir=run_dir, nodes=0))
            cp.apply_manifests(build_crds())
            for name in ("root", "default"):
                spec = {"weight": 1, "reclaimable": True}
                body = {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": name},
                    "spec": spec,
                }
                try:
                    cp.client.post(QUEUES, body)
                except Exception as err:  # root may be made by the CRD install in time
                    print(f"queue {name}: {err}", file=sys.stderr)
                cp.client.patch(f"{QUEUES}/{name}/status", {"status": {"state": "Open"}})
            owner_uid = _enrolment_owner(cp.client) if args.enrol else ""
            server = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("stromboli")),
                    "webhook-manager",
                    f"--kubeconfig={cp.kubeconfig_path}",
                    "--listen-address=127.0.0.1",
                    f"--port={port}",
                    f"--tls-cert-file={run_dir / 'tls.crt'}",
                    f"--tls-private-key-file={run_dir / 'tls.key'}",
                    f"--ca-cert-file={run_dir / 'ca.crt'}",
                    "--enable-healthz=true",
                    f"--healthz-address=127.0.0.1:{health}",
                    "--kube-api-qps=50",
                    "--kube-api-burst=100",
                    "--v=1",
                    *args.server_arg,
                ],
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_ready(f"http://127.0.0.1:{health}/readyz", server, log)
            base = f"https://127.0.0.1:{port}"
            print(f"webhook-manager pid {server.pid}, peak RSS {peak_rss_mib(server.pid):.0f} MiB")
            print(f"load: {args.rate:.0f} req/s for {args.seconds:.0f} s, {', '.join(PATHS)}")
            if owner_uid:
                print(f"/pods/mutate: enrolment of a pod owned by ReplicaSet uid {owner_uid}")
            print(f"load average before: {load_average()}")
            cpu_before = cpu_seconds(server.pid)
            waited_before = runqueue_seconds(server.pid)
            loader = subprocess.Popen(
                [
                    *(sys.executable, __file__, "--load", base, str(run_dir / "ca.crt")),
                    *(f"--rate={args.rate}", f"--seconds={args.seconds}"),
                    f"--owner-uid={owner_uid}",
                    f"--connections={args.connections}",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert loader.stdout is not None
            if loader.stdout.readline().strip() != "warm":
                sys.exit("the load client did not start")
            flooder = None
            if args.flood:
                print(
                    f"flood: {args.flood:.0f} new TLS connections/s, "
                    f"each held {args.flood_hold:.0f} s, from when the load client's pool is open"
                )
                flooder = subprocess.Popen(
                    [
                        *(sys.executable, __file__, "--flood-of", base),
                        *(f"--flood={args.flood}", f"--seconds={args.seconds}"),
                        f"--flood-hold={args.flood_hold}",
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
            out, _ = loader.communicate()
            if loader.returncode:
                sys.exit(f"the load client failed ({loader.returncode})")
            cpu = cpu_seconds(server.pid) - cpu_before
            waited = runqueue_seconds(server.pid) - waited_before
            result = json.loads(out.strip().splitlines()[-1])
            report(result)
            print(
                f"server CPU {cpu:.2f} s for {result['sent']} requests: "
                f"{1000 * cpu / max(1, result['sent']):.3f} ms per request; runnable but "
                f"waiting for a CPU {waited:.2f} s; load average after: {load_average()}"
            )
            if flooder is not None:
                out, _ = flooder.communicate(timeout=args.flood_hold + 60)
                flooded = json.loads(out.strip().splitlines()[-1])
                print(
                    f"flood: {flooded['attempted']} connections in {flooded['seconds']:.1f} s: "
                    + json.dumps(flooded["outcomes"], sort_keys=True)
                )
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/metrics") as answer:
                for line in answer.read().decode().splitlines():
                    if line.startswith(
                        (
                            "stromboli_webhook_requests_total",
                            "stromboli_webhook_connections_refused_total",
                            "stromboli_webhook_tls_handshake_failures_total",
                        )
                    ) and not line.endswith(" 0.0"):
                        print("server:", line)
            print(f"webhook-manager peak RSS {peak_rss_mib(server.pid):.0f} MiB")
            if args.memory:
                for concurrent in (1, 2, 8):
                    statuses = asyncio.run(memory_probe(base, str(run_dir / "ca.crt"), concurrent))
                    print(
                        f"memory probe: {concurrent} at once x3, answers {statuses}; "
                        f"peak RSS {peak_rss_mib(server.pid):.0f} MiB"
                    )
        finally:
            server.terminate()
            began = time.monotonic()
            code = server.wait(60)
            print(f"SIGTERM: exited {code} after {time.monotonic() - began:.2f} s")
            os.environ.get("KEEP_BENCH_DIR") or print(f"logs in {run_dir}")


if __name__ == "__main__":
    main()

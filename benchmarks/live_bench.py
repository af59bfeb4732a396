"""Side by side on the test control plane: stromboli scheduler versus kube-scheduler.

Starts etcd, kube-apiserver, kube-controller-manager and kwok with N fake nodes (32 cpu,
256Gi, 110 pods), then runs these cases one after another (``--cases`` picks some), each
with its scheduler started fresh and its objects deleted afterwards:

- ``plain``: P plain pods with ``schedulerName: volcano``; ``stromboli scheduler`` and
  ``stromboli controller`` (which makes Volcano's one-pod PodGroups);
- ``plain-memory``: the same P pods with both run as ``--plain-pod-groups=memory`` (the
  scheduler keeps each one-pod group in memory: no PodGroup create, no pod patch);
- ``kube``: the same P pods with ``schedulerName: default-scheduler`` and the kube-scheduler
  built from the same Kubernetes release (client QPS raised to match);
- ``gangs``: G PodGroups of S pods each (PodGroup + pods), for stromboli;
- ``vcjobs``: J vcjobs of S pods, which the controller turns into PodGroups and pods.

Each case runs in two modes (``--modes``): ``live`` starts the scheduler first, waits until it
has bound a probe pod (started, caches filled: a restart's cost is restart_bench's), and then
creates the objects while it runs (pods/s from the first create to the last bind: the creation
rate of one Python client, about 220 pods/s here, caps every scheduler; CPU and requests counted
from then on); ``backlog`` creates everything first and then starts the scheduler (pods/s
from its start to the last bind, as kube-scheduler's scheduler_perf measures: the scheduler's
own limit).

For each it prints pods/s, p50/p99 latency (create → bound; from scheduler start → bound in
backlog mode), the CPU milliseconds per bound pod of the scheduler, the controller and the
API server (from /proc), and the request budget: API requests per bound pod by verb and
resource, from the API server's ``apiserver_request_total`` (every client together: this
script's creates, kwok's status updates, the schedulers' and controllers' writes).

At the end it judges issue 14's targets (``live_targets.py``): each stromboli case against the
kube-scheduler case of the same mode and run.

Run: .venv/bin/python benchmarks/live_bench.py [--nodes 1000] [--pods 5000] [--gangs 250]
     [--gang-size 20] [--vcjobs 250] [--cases plain,plain-memory,kube,gangs,vcjobs]
     [--modes live,backlog] [--scheduler-arg=--schedule-period=0.5s] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from live_targets import print_verdicts

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster.client import KubeHTTP
from stromboli.core.devcluster.controlplane import ControlPlane

TICKS = os.sysconf("SC_CLK_TCK")
NAMESPACE = "default"
STROMBOLI = Path(sys.executable).with_name("stromboli")
_REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
#: Requests that are the benchmark's own reading, not the schedulers' work.
_OWN = {("GET", "metrics")}
#: Requests no scheduler makes per pod: kwok renewing every node's Lease (as kubelets do,
#: every 10 s) and the controller manager's elections. Reported per second, apart.
BACKGROUND = {("PUT", "leases"), ("GET", "leases")}


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a process and its reaped children, from /proc (0 if gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / TICKS


def request_counts(client: KubeHTTP) -> Counter[tuple[str, str]]:
    """``apiserver_request_total`` summed by (verb, resource[/subresource]); watches left out
    (a watch is one long request, counted when it starts)."""
    status, body = client.request_raw("GET", "/metrics", accept="text/plain")
    if status != 200:
        raise RuntimeError(f"GET /metrics answered {status}")
    counts: Counter[tuple[str, str]] = Counter()
    for line in body.decode().splitlines():
        match = _REQUEST.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            resource = "/".join(filter(None, (labels.get("resource"), labels.get("subresource"))))
            key = (labels.get("verb", ""), resource or labels.get("path", ""))
            if key[0] != "WATCH" and key not in _OWN:
                counts[key] += int(float(match.group(2)))
    return counts


def container(cpu: str = "100m", memory: str = "128Mi") -> dict:
    return {
        "name": "main",
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }


def pod(name: str, scheduler: str, group: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": NAMESPACE, "labels": {"bench": "live"}}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": scheduler, "containers": [container()]},
    }


def podgroup(name: str, members: int) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": members},
    }


def vcjob(name: str, replicas: int) -> dict:
    """A vcjob as the webhook would have defaulted it (no webhook runs here)."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": replicas,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container()]}},
                }
            ],
        },
    }


@dataclass(slots=True)
class Workload:
    """What one case creates: the objects, and for each pod expected to be bound the name of
    the object whose create starts its clock (itself, or its vcjob)."""

    objects: list[dict]
    clock_of: dict[str, str]


def plain_pods(prefix: str, count: int, scheduler: str) -> Workload:
    objects = [pod(f"{prefix}-{i}", scheduler) for i in range(count)]
    return Workload(objects, {o["metadata"]["name"]: o["metadata"]["name"] for o in objects})


def gangs(count: int, size: int) -> Workload:
    objects: list[dict] = []
    clock_of: dict[str, str] = {}
    for g in range(count):
        group = f"gang-{g}"
        objects.append(podgroup(group, size))
        for i in range(size):
            name = f"{group}-{i}"
            objects.append(pod(name, "volcano", group))
            clock_of[name] = name
    return Workload(objects, clock_of)


def vcjobs(count: int, size: int) -> Workload:
    objects = [vcjob(f"vcjob-{j}", size) for j in range(count)]
    clock_of = {f"vcjob-{j}-worker-{i}": f"vcjob-{j}" for j in range(count) for i in range(size)}
    return Workload(objects, clock_of)


async def create_all(
    store: KubeStore, objects: list[dict], concurrency: int = 64
) -> dict[str, float]:
    """Create every object; returns when each create call returned (wall clock), by name."""
    gate = asyncio.Semaphore(concurrency)
    created: dict[str, float] = {}

    async def one(obj: dict) -> None:
        async with gate:
            await store.create(obj)
        created[obj["metadata"]["name"]] = time.time()

    await asyncio.gather(*(one(o) for o in objects))
    return created


async def watch_bound(
    store: KubeStore, names: set[str], timeout: float, ready: asyncio.Event
) -> dict[str, float]:
    """When (wall clock) each pod in ``names`` was seen bound; ``ready`` is set once the
    watch is open."""
    bound: dict[str, float] = {}
    listed = await store.list("v1", "Pod", NAMESPACE)
    stream = store.watch("v1", "Pod", NAMESPACE, resource_version=listed.resource_version)
    deadline = time.monotonic() + timeout
    for item in listed.items:
        name = item["metadata"]["name"]
        if name in names and item["spec"].get("nodeName"):
            bound[name] = time.time()
    ready.set()
    try:
        while len(bound) < len(names) and time.monotonic() < deadline:
            try:
                event = await asyncio.wait_for(anext(stream), deadline - time.monotonic())
            except TimeoutError:
                break
            if event.type not in ("ADDED", "MODIFIED"):
                continue
            name = event.object["metadata"]["name"]
            if name in names and event.object["spec"].get("nodeName") and name not in bound:
                bound[name] = time.time()
    finally:
        await stream.aclose()
    return bound


def scheduler_name(work: Workload) -> str:
    """The scheduler a case's pods name (a vcjob's pods name ``volcano``)."""
    for obj in work.objects:
        if obj["kind"] == "Pod":
            return obj["spec"]["schedulerName"]
    return "volcano"


async def wait_until_scheduling(
    store: KubeStore, name: str, scheduler: str, timeout: float
) -> float:
    """Create one plain pod for ``scheduler`` and wait until it is bound: the scheduler (and
    for stromboli its controller) has started, filled its caches and written a binding.
    Returns the seconds that took."""
    started = time.monotonic()
    await store.create(pod(name, scheduler))
    while time.monotonic() - started < timeout:
        found = await store.get("v1", "Pod", name, NAMESPACE)
        if found["spec"].get("nodeName"):
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{scheduler} bound no pod within {timeout:.0f}s of its start")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclass(slots=True)
class Scheduler:
    """How a case starts and stops its scheduler, and the processes whose CPU it reports."""

    start: Callable[[], None]
    stop: Callable[[], None]
    pids: Callable[[], dict[str, int | None]]


@dataclass(slots=True)
class CaseResult:
    case: str
    mode: str
    bound: int
    expected: int
    pods_per_s: float
    p50_s: float
    p99_s: float
    #: CPU milliseconds per bound pod, by process (scheduler, controller, kube-apiserver).
    cpu_ms_per_pod: dict[str, float] = field(default_factory=dict)
    #: API requests per bound pod, by "VERB resource" (background requests left out).
    requests_per_pod: dict[str, float] = field(default_factory=dict)
    #: Background requests (:data:`BACKGROUND`) per second of the case.
    background_per_s: float = 0.0

    @property
    def requests_total(self) -> float:
        return sum(self.requests_per_pod.values())


async def run_case(
    cp: ControlPlane,
    store: KubeStore,
    case: str,
    mode: str,
    work: Workload,
    scheduler: Scheduler,
    timeout: float,
    settle: float = 0.0,
) -> CaseResult:
    api_pid = cp.components["kube-apiserver"].pid
    names = set(work.clock_of)
    requests_before = request_counts(cp.client)
    api_before = cpu_seconds(api_pid)
    ready = asyncio.Event()
    watching = asyncio.create_task(watch_bound(store, names, timeout, ready))
    await ready.wait()
    if mode == "live":
        scheduler.start()
        # Pods are created once the scheduler runs: its start is the restart benchmark's.
        await wait_until_scheduling(store, f"{case}-probe", scheduler_name(work), timeout)
        requests_before = request_counts(cp.client)
        api_before = cpu_seconds(api_pid)
        cpu_before = {name: cpu_seconds(pid) for name, pid in scheduler.pids().items()}
        started = time.time()
        created = await create_all(store, work.objects)
        clock = {name: created[obj] for name, obj in work.clock_of.items() if obj in created}
    else:
        await create_all(store, work.objects)
        started = time.time()
        scheduler.start()
        cpu_before = {name: cpu_seconds(pid) for name, pid in scheduler.pids().items()}
        clock = dict.fromkeys(names, started)
    bound = await watching
    cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in scheduler.pids().items()}
    cpu["kube-apiserver"] = cpu_seconds(api_pid) - api_before
    # The writes that follow the last binding (its event, statuses) land before counting.
    await asyncio.sleep(settle)
    requests = request_counts(cp.client) - requests_before
    scheduler.stop()
    latencies = [at - clock[name] for name, at in bound.items() if name in clock]
    elapsed = max(bound.values(), default=started) - started
    count = len(bound)
    per_pod = max(count, 1)
    background = sum(n for key, n in requests.items() if key in BACKGROUND)
    budget = {key: n for key, n in requests.items() if key not in BACKGROUND}
    return CaseResult(
        case,
        mode,
        count,
        len(names),
        count / elapsed if elapsed > 0 else 0.0,
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        {name: seconds * 1000 / per_pod for name, seconds in cpu.items()},
        {
            f"{verb} {resource}": n / per_pod
            for (verb, resource), n in sorted(budget.items(), key=lambda kv: -kv[1])
        },
        background / max(time.time() - started, 1e-9),
    )


def clean(cp: ControlPlane, timeout: float = 180.0) -> None:
    """Delete the case's objects, so that every case starts from the same empty nodes."""
    jobs = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NAMESPACE}/jobs"
    groups = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NAMESPACE}/podgroups"
    pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    for path in (jobs, groups, pods):
        cp.client.request("DELETE", path, params={"gracePeriodSeconds": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = sum(len(cp.client.get(path, limit=1)["items"]) for path in (jobs, groups, pods))
        if not left:
            time.sleep(5)  # the garbage collector's last deletes land before the next case
            return
        for path in (groups, pods):  # what the garbage collector made meanwhile
            cp.client.request("DELETE", path, params={"gracePeriodSeconds": 0})
        time.sleep(1)
    print(f"warning: objects of the last case still present after {timeout:.0f}s")


def print_result(r: CaseResult, top: int = 8) -> None:
    latency = "create→bound" if r.mode == "live" else "start→bound"
    cpu = "  ".join(f"{name} {ms:6.1f}" for name, ms in r.cpu_ms_per_pod.items())
    print(
        f"{r.case:<16} {r.mode:<8} {r.bound:>6}/{r.expected:<6} {r.pods_per_s:8.1f} pods/s  "
        f"{latency} p50 {r.p50_s:6.2f}s p99 {r.p99_s:6.2f}s"
    )
    print(f"    cpu ms/pod: {cpu}")
    shown = list(r.requests_per_pod.items())[:top]
    rest = sum(v for _, v in list(r.requests_per_pod.items())[top:])
    budget = ", ".join(f"{key} {n:.2f}" for key, n in shown)
    other = f", other {rest:.2f}" if rest else ""
    print(f"    requests/pod {r.requests_total:.2f}: {budget}{other}")
    print(f"    background (node leases): {r.background_per_s:.0f} requests/s")


async def main_async(args: argparse.Namespace) -> list[CaseResult]:
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(nodes=0) as cp:
        cp.add_nodes(args.nodes)
        cp.apply_manifests(build_crds())
        store = KubeStore(KubeConfig.load(str(cp.kubeconfig_path)), qps=5000, burst=5000)
        process: dict[str, subprocess.Popen] = {}
        common = [
            f"--kubeconfig={cp.kubeconfig_path}",
            "--healthz-address=",
            "--listen-address=",
            "--kube-api-qps=5000",
            "--kube-api-burst=5000",
            "-v",
            "1",
        ]

        def start_ours(plain_pod_groups: str = "object") -> None:
            mode = f"--plain-pod-groups={plain_pod_groups}"
            process["scheduler"] = subprocess.Popen(
                [str(STROMBOLI), "scheduler", *common, mode, *args.scheduler_arg]
            )
            # Plain pods reach the scheduler through a one-pod PodGroup the controller makes,
            # as with Volcano's pg-controller (unless in memory), and vcjobs through it: its
            # work counts as ours.
            process["controller"] = subprocess.Popen(
                [str(STROMBOLI), "controller", *common, mode, *args.controller_arg]
            )

        def stop_ours() -> None:
            for proc in process.values():
                proc.terminate()
            for proc in process.values():
                proc.wait(30)
            process.clear()

        config = Path(tmp) / "kube-scheduler.yaml"
        config.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            f"clientConnection: {{kubeconfig: {cp.kubeconfig_path}, qps: 5000, burst: 5000}}\n"
            "leaderElection: {leaderElect: false}\n"
        )
        ours = Scheduler(
            start_ours, stop_ours, lambda: {name: p.pid for name, p in process.items()}
        )
        ours_memory = Scheduler(
            lambda: start_ours("memory"),
            stop_ours,
            lambda: {name: p.pid for name, p in process.items()},
        )
        kube = Scheduler(
            lambda: cp.start_scheduler([f"--config={config}"]),
            cp.stop_scheduler,
            lambda: {"scheduler": cp.components["kube-scheduler"].pid},
        )
        cases: dict[str, tuple[Callable[[], Workload], Scheduler]] = {
            "plain": (lambda: plain_pods("ours", args.pods, "volcano"), ours),
            "plain-memory": (lambda: plain_pods("mem", args.pods, "volcano"), ours_memory),
            "kube": (lambda: plain_pods("kube", args.pods, "default-scheduler"), kube),
            "gangs": (lambda: gangs(args.gangs, args.gang_size), ours),
            "vcjobs": (lambda: vcjobs(args.vcjobs, args.gang_size), ours),
        }
        print(
            f"{args.nodes} kwok nodes; {os.cpu_count()} cpus shared by every process; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        for _ in range(args.rounds):
            for mode in args.modes.split(","):
                for case in args.cases.split(","):
                    make, scheduler = cases[case]
                    result = await run_case(
                        cp, store, case, mode, make(), scheduler, args.timeout, args.settle
                    )
                    print_result(result)
                    results.append(result)
                    clean(cp)
        await store.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=250)
    parser.add_argument("--gang-size", type=int, default=20)
    parser.add_argument("--vcjobs", type=int, default=250)
    parser.add_argument("--cases", default="plain,kube,gangs,vcjobs")
    parser.add_argument("--modes", default="live,backlog")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per case")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds after the last binding before requests are counted and the scheduler "
        "stopped (its background event writes land)",
    )
    parser.add_argument("--scheduler-arg", action="append", default=[])
    parser.add_argument("--controller-arg", action="append", default=[])
    parser.add_argument("--json", type=Path, help="write every case's figures here")
    args = parser.parse_args()
    unknown = set(args.cases.split(",")) - {"plain", "plain-memory", "kube", "gangs", "vcjobs"}
    if unknown or set(args.modes.split(",")) - {"live", "backlog"}:
        parser.error(f"unknown case or mode: {sorted(unknown) or args.modes}")
    results = asyncio.run(main_async(args))
    print_verdicts(results)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()

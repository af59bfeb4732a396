"""Restart at scale on the test control plane: how soon a restarted scheduler (and controller)
is ready on a full cluster, and how much memory it takes.

Starts etcd, kube-apiserver, kube-controller-manager and kwok, then fills the cluster:
N kwok nodes (32 cpu, 256Gi, 110 pods), P/S PodGroups of S members and P pods already bound
(``spec.nodeName`` set, so kwok runs them without any scheduler), created in parallel.

Scheduler: ``stromboli scheduler`` is started twice. The first start settles what a fresh fill
leaves to do (the PodGroups' status); the second is the restart measured, as Volcano's
tracker measures it. For each start it prints the seconds from process start to

- ``ready``: the first scheduling cycle finished (``volcano_e2e_scheduling_latency_milliseconds``
  counted on /metrics), i.e. the cache is filled from the initial lists;
- ``first bind``: a new one-pod gang, created the moment the process starts, seen bound;

and the peak resident memory (``VmHWM`` of /proc/<pid>/status) and CPU seconds at that point.

Controller: ``--vcjobs`` vcjobs of one replica are created and ``stromboli controller`` run
until their pods exist (with the scheduler binding them), then it is restarted: seconds from
process start to a new vcjob's pod created, peak RSS and CPU.

Intake (``--parts intake``, no control plane): the same nodes, PodGroups and pods folded into
a fresh scheduler cache in process, from one JSON list: the CPU floor of a restart at the full
size when the live fill takes too long on the machine at hand.

Run: .venv/bin/python benchmarks/restart_bench.py [--nodes 5000] [--pods 50000]
     [--group-size 10] [--vcjobs 5000] [--parts intake,scheduler,controller]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import resource
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
from live_bench import BACKGROUND, request_counts

from stromboli.core.api.crds import build_crds
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster import jsondecode
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.job.controller import JobController
from stromboli.core.devcluster.controlplane import ControlPlane, free_port
from stromboli.core.runtime import tune_gc
from stromboli.core.scheduler.api.build import TEMPLATES
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.conf import ConfigSource
from stromboli.core.scheduler.scheduler import Scheduler, builtin_queue

NAMESPACE = "default"
PODGROUP_KIND = ("scheduling.volcano.sh/v1beta1", "PodGroup")
STROMBOLI = Path(sys.executable).with_name("stromboli")
TICKS = os.sysconf("SC_CLK_TCK")
_CYCLES = re.compile(r"^volcano_e2e_scheduling_latency_milliseconds_count(?:\{[^}]*\})? (\S+)$")


def container() -> dict:
    return {
        "name": "main",
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }


def bound_pod(name: str, group: str, node: str | None) -> dict:
    spec: dict = {"schedulerName": "volcano", "containers": [container()]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"bench": "restart"},
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": spec,
    }


def podgroup(name: str, members: int, running: bool = False) -> dict:
    """A PodGroup; ``running``: with the status a scheduler gives a gang whose members all
    run (PodGroups have no status subresource, so it is created so), which spares the first
    start thousands of status writes that the restart measured would not make anyway."""
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": members, "queue": "default"},
    }
    if running:
        pg["status"] = {"phase": "Running", "running": members}
    return pg


def vcjob(name: str) -> dict:
    """A one-replica vcjob as the webhook would have defaulted it (no webhook runs here)."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container()]}},
                }
            ],
        },
    }


async def create_all(store: KubeStore, objects: list[dict], concurrency: int = 64) -> float:
    """Create every object (an existing one is left as it is); returns the seconds taken."""
    began = time.monotonic()
    queue = iter(objects)

    async def worker() -> None:
        for obj in queue:
            try:
                await store.create(obj)
            except Exception as err:  # AlreadyExists on a rerun, or a transient error
                if "AlreadyExists" not in type(err).__name__:
                    print(f"create {obj['kind']} {obj['metadata']['name']}: {err}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.monotonic() - began


def proc_status(pid: int) -> tuple[float, float]:
    """(peak RSS MiB from VmHWM, user+system CPU seconds) of a live process; zeros if gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0, 0.0
    hwm = next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")), "0")
    return int(hwm) / 1024, (int(stat[11]) + int(stat[12])) / TICKS


def cycles(port: int) -> float:
    """Scheduling cycles finished so far, from the scheduler's /metrics (0 while not serving)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return 0.0
    for line in text.splitlines():
        match = _CYCLES.match(line)
        if match:
            return float(match.group(1))
    return 0.0


@dataclass(slots=True)
class Start:
    """What one start of a process measured (seconds from its start)."""

    label: str
    ready_s: float
    first_s: float
    peak_mib: float
    cpu_s: float
    #: API requests every client made meanwhile, by "VERB resource" (node leases left out).
    requests: dict[str, int]

    def print(self) -> None:
        ready = f"ready {self.ready_s:6.1f}s  " if self.ready_s == self.ready_s else ""
        print(
            f"  {self.label:<22} {ready}first new pod {self.first_s:6.1f}s  "
            f"peak RSS {self.peak_mib:7.0f} MiB  cpu {self.cpu_s:6.1f}s  "
            f"(load {os.getloadavg()[0]:.1f})"
        )
        top = sorted(self.requests.items(), key=lambda kv: -kv[1])[:6]
        print("    requests meanwhile: " + ", ".join(f"{key} {n}" for key, n in top))


def requests_since(cp: ControlPlane, before: Counter[tuple[str, str]]) -> dict[str, int]:
    after = request_counts(cp.client) - before
    return {f"{v} {r}": n for (v, r), n in after.items() if (v, r) not in BACKGROUND}


async def pod_appears(store: KubeStore, name: str, bound: bool, timeout: float) -> float:
    """Monotonic time at which pod ``name`` exists (and, with ``bound``, has a node)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = await store.get("v1", "Pod", name, NAMESPACE)
        except Exception:
            found = None
        if found is not None and (not bound or found["spec"].get("nodeName")):
            return time.monotonic()
        await asyncio.sleep(0.1)
    raise TimeoutError(f"pod {NAMESPACE}/{name} not {'bound' if bound else 'created'}")


def spawn(cp: ControlPlane, command: str, metrics_port: int, extra: list[str]) -> subprocess.Popen:
    """Start ``stromboli COMMAND``, its log appended to the control plane's log folder."""
    log = (cp.log_dir / f"stromboli-{command}.log").open("ab")
    return subprocess.Popen(
        [
            str(STROMBOLI),
            command,
            f"--kubeconfig={cp.kubeconfig_path}",
            "--healthz-address=",
            f"--listen-address=127.0.0.1:{metrics_port}",
            "--kube-api-qps=5000",
            "--kube-api-burst=5000",
            "-v",
            "1",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def scheduler_start(
    cp: ControlPlane, store: KubeStore, label: str, probe: str, args: argparse.Namespace
) -> tuple[Start, subprocess.Popen]:
    """Start the scheduler, create a one-pod gang at once, and time readiness and its bind."""
    port = free_port()
    before = request_counts(cp.client)
    began = time.monotonic()
    proc = spawn(cp, "scheduler", port, args.scheduler_arg)
    await create_all(store, [podgroup(probe, 1), bound_pod(probe, probe, None)], 2)
    ready = float("nan")
    first = asyncio.create_task(pod_appears(store, probe, True, args.timeout))
    deadline = began + args.timeout
    while (not first.done() or ready != ready) and time.monotonic() < deadline:
        if ready != ready and cycles(port) > 0:
            ready = time.monotonic() - began
        if proc.poll() is not None:
            raise RuntimeError(f"scheduler exited with {proc.returncode}")
        await asyncio.sleep(0.5)  # rendering /metrics costs the scheduler CPU: poll gently
    peak, cpu = proc_status(proc.pid)
    if not first.done():
        first.cancel()
        raise TimeoutError(f"{label}: probe {probe} not bound in {args.timeout:.0f}s")
    start = Start(label, ready, first.result() - began, peak, cpu, requests_since(cp, before))
    return start, proc


async def measure_scheduler(
    cp: ControlPlane, store: KubeStore, args: argparse.Namespace
) -> subprocess.Popen:
    """Time a first start and a restart; returns the restarted scheduler, still running."""
    print("scheduler:")
    first, proc = await scheduler_start(cp, store, "first start", "probe-0", args)
    first.print()
    stop(proc)
    again, proc = await scheduler_start(cp, store, "restart", "probe-1", args)
    again.print()
    if args.profile:
        stop(proc)
        await profile_restart(cp, args.profile)
        proc = spawn(cp, "scheduler", free_port(), args.scheduler_arg)
    return proc


async def profile_restart(cp: ControlPlane, path: str) -> None:
    """One more restart under cProfile, stopped once ready: where start-up time goes."""
    port = free_port()
    began = time.monotonic()
    profiled = subprocess.Popen(
        [
            *(sys.executable, "-m", "cProfile", "-o", path, str(STROMBOLI), "scheduler"),
            f"--kubeconfig={cp.kubeconfig_path}",
            "--healthz-address=",
            f"--listen-address=127.0.0.1:{port}",
            "-v",
            "1",
        ]
    )
    while cycles(port) == 0:
        await asyncio.sleep(0.5)
    print(f"  profiled restart ready {time.monotonic() - began:.1f}s; profile in {path}")
    stop(profiled)


async def vcjobs_running(store: KubeStore, count: int, timeout: float) -> None:
    """Wait until ``count`` vcjobs report Running: the restart then meets a settled cluster,
    not the first start's status writes still to make."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = (await store.list("batch.volcano.sh/v1alpha1", "Job", NAMESPACE)).items
        phases = Counter(((j.get("status") or {}).get("state") or {}).get("phase") for j in jobs)
        if phases["Running"] >= count:
            return
        await asyncio.sleep(10)
    raise TimeoutError(f"fewer than {count} vcjobs Running after {timeout:.0f}s")


async def measure_controller(cp: ControlPlane, store: KubeStore, args: argparse.Namespace) -> None:
    """Time a first start on the vcjobs and a restart, with a scheduler binding their pods."""
    print(f"controller ({args.vcjobs} vcjobs of one pod):")
    took = await create_all(store, [vcjob(f"vcjob-{j}") for j in range(args.vcjobs)])
    print(f"  created {args.vcjobs} vcjobs in {took:.0f}s")
    for label, probe in (("first start", "probe-job-0"), ("restart", "probe-job-1")):
        before = request_counts(cp.client)
        began = time.monotonic()
        proc = spawn(cp, "controller", free_port(), args.controller_arg)
        await create_all(store, [vcjob(probe)], 1)
        created = await pod_appears(store, f"{probe}-worker-0", False, args.timeout)
        peak, cpu = proc_status(proc.pid)
        requests = requests_since(cp, before)
        Start(label, float("nan"), created - began, peak, cpu, requests).print()
        if label == "first start":
            await all_pods_created(store, args.vcjobs, args.timeout)
            peak, cpu = proc_status(proc.pid)
            requests = requests_since(cp, before)
            Start(
                "every vcjob's pod", float("nan"), time.monotonic() - began, peak, cpu, requests
            ).print()
            print("    requests per vcjob: " + per_vcjob(requests, args.vcjobs + 1), flush=True)
            if args.first_start_only:
                stop(proc)
                return
            await vcjobs_running(store, args.vcjobs, args.timeout)
            print(f"  every vcjob Running {time.monotonic() - began:.0f}s after start", flush=True)
        stop(proc)


async def all_pods_created(store: KubeStore, count: int, timeout: float) -> None:
    """Wait until every one of the ``count`` vcjobs has its pod (in whatever order the
    controller made them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = await store.list("v1", "Pod", NAMESPACE, label_selector="volcano.sh/job-name")
        names = {p["metadata"]["name"] for p in pods.items}
        if all(f"vcjob-{j}-worker-0" in names for j in range(count)):
            return
        await asyncio.sleep(2)
    raise TimeoutError(f"not every vcjob's pod created after {timeout:.0f}s")


def per_vcjob(requests: dict[str, int], jobs: int) -> str:
    """Writes (and reads) per vcjob, by "VERB resource", largest first."""
    top = sorted(requests.items(), key=lambda kv: -kv[1])
    total = sum(n for key, n in top if not key.startswith(("GET", "LIST", "WATCH")))
    shown = ", ".join(f"{key} {n / jobs:.2f}" for key, n in top if n / jobs >= 0.01)
    return f"writes {total / jobs:.2f} ({shown})"


async def fill(cp: ControlPlane, store: KubeStore, args: argparse.Namespace) -> None:
    nodes = []
    for i in range(args.nodes):
        node = cp.node_manifest(f"kwok-node-{i}", i, cpu="32", memory="256Gi", pods=110)
        node["kind"], node["apiVersion"] = "Node", "v1"
        nodes.append(node)
    took = await create_all(store, nodes)
    print(f"fill: {args.nodes} nodes in {took:.0f}s", flush=True)
    groups = args.pods // args.group_size
    took = await create_all(
        store, [podgroup(f"pg-{g}", args.group_size, running=True) for g in range(groups)]
    )
    print(f"fill: {groups} PodGroups in {took:.0f}s", flush=True)
    pods = [
        bound_pod(
            f"pg-{i // args.group_size}-{i % args.group_size}",
            f"pg-{i // args.group_size}",
            f"kwok-node-{i % args.nodes}",
        )
        for i in range(groups * args.group_size)
    ]
    took = await create_all(store, pods)
    print(
        f"fill: {len(pods)} bound pods in {took:.0f}s ({len(pods) / took:.0f}/s); "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def measure_intake(args: argparse.Namespace) -> None:
    """The scheduler cache's CPU floor, in process, no API server: decode a pod list the size
    of the fill and fold nodes, PodGroups and pods into a fresh cache, as a restart does."""
    nodes = [
        ControlPlane(nodes=0).node_manifest(f"kwok-node-{i}", i, cpu="32", memory="256Gi", pods=110)
        for i in range(args.nodes)
    ]
    groups = args.pods // args.group_size
    pods = []
    for i in range(groups * args.group_size):
        group = f"pg-{i // args.group_size}"
        item = bound_pod(f"{group}-{i % args.group_size}", group, f"kwok-node-{i % args.nodes}")
        item["metadata"]["uid"] = f"uid-{i}"
        item["status"] = {"phase": "Running"}
        pods.append(item)
    blob = orjson.dumps({"items": pods})
    del pods
    began = time.process_time()
    pods = jsondecode.loads(blob)["items"]
    decoded = time.process_time() - began
    cache = SchedulerCache()
    began = time.process_time()
    for node in nodes:
        cache.apply(("v1", "Node"), "ADDED", node)
    for g in range(groups):
        cache.apply(PODGROUP_KIND, "ADDED", podgroup(f"pg-{g}", args.group_size))
    for item in pods:
        cache.apply(("v1", "Pod"), "ADDED", item)
    applied = time.process_time() - began
    began = time.process_time()
    cache.snapshot()
    snapshot = time.process_time() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"intake in process ({args.nodes} nodes, {len(pods)} pods, {len(blob) / 1e6:.0f} MB of "
        f"JSON): decode {decoded:.2f} cpu-s, cache {applied:.2f} cpu-s "
        f"({applied / max(len(pods), 1) * 1e6:.0f} us/pod), first snapshot {snapshot:.2f} cpu-s, "
        f"peak RSS of this process {peak:.0f} MiB (load {os.getloadavg()[0]:.1f})"
    )


def memory_store_fill(args: argparse.Namespace) -> tuple[MemoryStore, VirtualClock]:
    """A memory store holding the fill: nodes, Running PodGroups, Running bound pods."""

    async def fill_store() -> tuple[MemoryStore, VirtualClock]:
        clock = VirtualClock(1000.0)
        store = MemoryStore(clock, seed=1, history_limit=10)
        template = ControlPlane(nodes=0)
        for i in range(args.nodes):
            node = template.node_manifest(f"kwok-node-{i}", i, cpu="32", memory="256Gi", pods=110)
            node["kind"], node["apiVersion"] = "Node", "v1"
            await store.create(node)
        groups = args.pods // args.group_size
        for g in range(groups):
            pg = await store.create(podgroup(f"pg-{g}", args.group_size))
            pg["status"] = {"phase": "Running", "running": args.group_size}
            await store.update(pg)
        for i in range(groups * args.group_size):
            group = f"pg-{i // args.group_size}"
            name = f"{group}-{i % args.group_size}"
            pod = await store.create(bound_pod(name, group, f"kwok-node-{i % args.nodes}"))
            pod["status"] = {"phase": "Running"}
            await store.update_status(pod)
        return store, clock

    return asyncio.run(fill_store())


def measure_scheduler_in_process(args: argparse.Namespace) -> None:
    """A scheduler restarted on a memory store of the full size: CPU seconds of its start
    (lists and cache fill), of its first cycle, and what that cycle writes; then a new
    one-pod gang, bound by the next cycle."""
    register_builtins()
    tune_gc()
    store, clock = memory_store_fill(args)

    async def restart() -> None:
        settle = Scheduler(store, clock, ConfigSource(None))
        await settle.start()
        await settle.run_once()  # a fresh fill's PodGroup statuses, as the live first start
        del settle
        gc.collect()
        began = time.process_time()
        scheduler = Scheduler(store, clock, ConfigSource(None))
        await scheduler.start()
        started = time.process_time()
        first = await scheduler.run_once()
        cycled = time.process_time()
        await store.create(podgroup("probe", 1))
        await store.create(bound_pod("probe", "probe", None))
        second = await scheduler.run_once()
        bound = time.process_time()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        templates = TEMPLATES.hits, TEMPLATES.misses
        print(
            f"scheduler restart in process ({args.nodes} nodes, {args.pods} pods, memory "
            f"store): start {started - began:.2f} cpu-s, first cycle {cycled - started:.2f} "
            f"cpu-s ({first.status_writes} status writes, {first.bind_attempts} binds), next "
            f"cycle with a new gang {bound - cycled:.2f} cpu-s ({second.bound} bound); task "
            f"templates shared {templates[0]}, parsed {templates[1]}; peak RSS of this "
            f"process {peak:.0f} MiB (load {os.getloadavg()[0]:.1f})"
        )

    asyncio.run(restart())


def measure_controller_in_process(args: argparse.Namespace) -> None:
    """The vcjob controller restarted on a memory store of ``--vcjobs`` settled vcjobs: CPU
    seconds of its start, and of reconciling until a new vcjob has its PodGroup and pod."""

    async def run() -> None:
        tune_gc()
        clock = VirtualClock(1000.0)
        store = MemoryStore(clock, seed=1, history_limit=10)
        for name in ("root", "default"):
            queue = await store.create(builtin_queue(name))
            queue["status"] = {"state": "Open"}
            await store.update_status(queue)
        for j in range(args.vcjobs):
            await store.create(vcjob(f"vcjob-{j}"))
        first = JobController(store, clock)
        await first.step()
        await admit_groups(store)
        await first.step()
        for pod in (await store.list("v1", "Pod")).items:
            pod["spec"]["nodeName"] = "kwok-node-0"
            pod = await store.update(pod)
            pod["status"] = {"phase": "Running"}
            await store.update_status(pod)
        await first.step()
        del first
        gc.collect()
        began = time.process_time()
        restarted = JobController(store, clock)
        await restarted.start()
        started = time.process_time()
        await store.create(vcjob("probe-job"))
        writes = await restarted.step()
        await admit_groups(store)
        writes += await restarted.step()
        done = time.process_time()
        await store.get("v1", "Pod", "probe-job-worker-0", NAMESPACE)  # raises if missing
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"controller restart in process ({args.vcjobs} settled vcjobs, memory store): "
            f"start {started - began:.2f} cpu-s, new vcjob's PodGroup and pod "
            f"{done - started:.2f} cpu-s, {writes} writes; peak RSS of this process "
            f"{peak:.0f} MiB (load {os.getloadavg()[0]:.1f})"
        )

    asyncio.run(run())


async def admit_groups(store: MemoryStore) -> None:
    """What the scheduler's enqueue does: every Pending PodGroup moves to Inqueue."""
    for pg in (await store.list(*PODGROUP_KIND)).items:
        if (pg.get("status") or {}).get("phase") in (None, "", "Pending"):
            pg["status"] = {**(pg.get("status") or {}), "phase": "Inqueue"}
            await store.update(pg)


async def main_async(args: argparse.Namespace) -> None:
    # kwok renews every node's Lease each quarter of its duration: at 5,000 nodes the default
    # (40 s) alone is 500 writes/s, which would measure the machine, not the restart.
    kwok = [f"--node-lease-duration-seconds={args.lease_seconds}"]
    with ControlPlane(nodes=0, kwok_args=kwok) as cp:
        cp.apply_manifests(build_crds())
        store = KubeStore(KubeConfig.load(str(cp.kubeconfig_path)), qps=5000, burst=5000)
        print(
            f"{args.nodes} kwok nodes, {args.pods} bound pods; {os.cpu_count()} cpus shared; "
            f"load average {os.getloadavg()[0]:.1f}; logs in {cp.log_dir}",
            flush=True,
        )
        await fill(cp, store, args)
        parts = args.parts.split(",")
        if "scheduler" in parts:
            scheduler = await measure_scheduler(cp, store, args)
        else:
            scheduler = spawn(cp, "scheduler", free_port(), args.scheduler_arg)
        if "controller" in parts:
            await measure_controller(cp, store, args)
        stop(scheduler)
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--group-size", type=int, default=10)
    parser.add_argument("--vcjobs", type=int, default=5000)
    parser.add_argument(
        "--parts",
        default="intake,scheduler,controller",
        help="any of intake, controller-intake (in process), scheduler, controller (live)",
    )
    parser.add_argument("--lease-seconds", type=int, default=600)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per wait")
    parser.add_argument("--profile", help="also profile one restart of the scheduler into FILE")
    parser.add_argument("--scheduler-arg", action="append", default=[])
    parser.add_argument("--controller-arg", action="append", default=[])
    parser.add_argument(
        "--first-start-only",
        action="store_true",
        help="controller: stop once every vcjob has its pod (no Running wait, no restart)",
    )
    args = parser.parse_args()
    parts = args.parts.split(",")
    if "intake" in parts:
        measure_intake(args)
        measure_scheduler_in_process(args)
    if "controller-intake" in parts:
        measure_controller_in_process(args)
    if set(args.parts.split(",")) & {"scheduler", "controller"}:
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()

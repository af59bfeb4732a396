"""The vcjob controller under a burst: J vcjobs of P pods submitted at once on the test control
plane (etcd + kube-apiserver + kwok with N fake nodes of 32 cpu / 256Gi / 110 pods).

``stromboli scheduler`` and ``stromboli controller`` run as subprocesses; once both are up (the
``default`` queue is Open) every job is created with 64 concurrent calls, each job one task
of P pods of 100m / 128Mi into the ``default`` queue, gang ``minAvailable`` P. One watch on the
pods records when each pod was first seen, bound and Running. Printed:

- wall time from the first create until all J x P pods exist, are bound, are Running;
- job-to-pod creation latency p50 / p99 three ways: from the API objects (the pod's
  creationTimestamp minus its job's, whole seconds, what Volcano's histogram observes), from
  the wall clock (pod first seen by the watch minus its job's create call returning), and from
  the controller's own ``volcano_controller_job_to_pod_creation_latency_milliseconds``
  histogram scraped at its ``--listen-address`` (bucket-interpolated, as ``histogram_quantile``);
- CPU seconds (user + system, /proc) of the controller, the scheduler and kube-apiserver over
  the run; the machine's cores are shared by all of them and by this script.

Run: .venv/bin/python benchmarks/controller_bench.py [--jobs 1000] [--pods-per-job 10]
[--nodes 1000] [--timeout 1200] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from stromboli.core.api.crds import build_crds
from stromboli.core.clock import parse_time
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster.controlplane import ControlPlane, free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_bench import cpu_seconds, percentile

JOB = ("batch.volcano.sh/v1alpha1", "Job")
QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")
NAMESPACE = "default"
LATENCY = "volcano_controller_job_to_pod_creation_latency_milliseconds"


def vcjob(name: str, replicas: int) -> dict[str, Any]:
    """A vcjob as the webhook would have defaulted it (no webhook runs here)."""
    return {
        "apiVersion": JOB[0],
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": replicas,
            "maxRetry": 3,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox:1.36",
                                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


@dataclass(slots=True)
class PodTimes:
    """Wall-clock times at which the watches saw each pod appear, bound and Running, and each
    PodGroup appear and leave Pending (admitted by the scheduler's enqueue)."""

    seen: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    pg_seen: dict[str, float] = field(default_factory=dict)
    pg_admitted: dict[str, float] = field(default_factory=dict)


async def follow_podgroups(store: KubeStore, times: PodTimes, done: asyncio.Event) -> None:
    listed = await store.list(*PODGROUP, NAMESPACE)
    stream = store.watch(*PODGROUP, NAMESPACE, resource_version=listed.resource_version)
    try:
        while not done.is_set():
            try:
                event = await asyncio.wait_for(anext(stream), 1.0)
            except TimeoutError:
                continue
            if event.type not in ("ADDED", "MODIFIED"):
                continue
            name = event.object["metadata"]["name"]
            now = time.time()
            times.pg_seen.setdefault(name, now)
            if (event.object.get("status") or {}).get("phase") not in (None, "", "Pending"):
                times.pg_admitted.setdefault(name, now)
    finally:
        await stream.aclose()


async def follow_pods(store: KubeStore, expected: int, times: PodTimes, deadline: float) -> None:
    def note(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        now = time.time()
        times.seen.setdefault(name, now)
        if pod["spec"].get("nodeName"):
            times.bound.setdefault(name, now)
        if (pod.get("status") or {}).get("phase") == "Running":
            times.running.setdefault(name, now)

    listed = await store.list("v1", "Pod", NAMESPACE)
    for pod in listed.items:
        note(pod)
    stream = store.watch("v1", "Pod", NAMESPACE, resource_version=listed.resource_version)
    try:
        while len(times.running) < expected and time.monotonic() < deadline:
            try:
                event = await asyncio.wait_for(anext(stream), deadline - time.monotonic())
            except TimeoutError:
                break
            if event.type in ("ADDED", "MODIFIED"):
                note(event.object)
    finally:
        await stream.aclose()


async def submit(store: KubeStore, jobs: list[dict[str, Any]], concurrency: int = 64) -> dict:
    """Create the jobs; returns when (wall clock) each create call returned."""
    gate = asyncio.Semaphore(concurrency)
    returned: dict[str, float] = {}

    async def one(job: dict[str, Any]) -> None:
        async with gate:
            await store.create(job)
        returned[job["metadata"]["name"]] = time.time()

    await asyncio.gather(*(one(j) for j in jobs))
    return returned


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' ``histogram_quantile`` over cumulative (upper bound, count) buckets."""
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower
            return lower + (upper - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = upper, count
    return lower


def scrape_latency(url: str) -> tuple[list[tuple[float, float]], float]:
    """The controller's job-to-pod histogram buckets and its observation count."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    buckets: list[tuple[float, float]] = []
    count = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != LATENCY:
            continue
        for s in family.samples:
            if s.name == f"{LATENCY}_bucket":
                buckets.append((float(s.labels["le"]), s.value))
            elif s.name == f"{LATENCY}_count":
                count = s.value
    return buckets, count


async def wait_ready(store: KubeStore, metrics_url: str, procs: list[subprocess.Popen]) -> None:
    """Until the default queue is Open (scheduler made it, controller opened it) and the
    controller serves /metrics; fails if a process died."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[1]} exited with {proc.returncode}")
        try:
            queue = await store.get(*QUEUE, "default")
            if (queue.get("status") or {}).get("state") == "Open":
                urllib.request.urlopen(metrics_url, timeout=2).close()
                return
        except Exception:  # not there yet: keep waiting
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError("the default queue did not open within 120 s")


def fmt(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds:.2f}s"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    expected = args.jobs * args.pods_per_job
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(nodes=0) as cp:
        cp.add_nodes(args.nodes)
        cp.apply_manifests(build_crds())
        store = KubeStore(KubeConfig.load(str(cp.kubeconfig_path)), qps=5000, burst=5000)
        stromboli = Path(sys.executable).with_name("stromboli")
        port = free_port()
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        common = [
            f"--kubeconfig={cp.kubeconfig_path}",
            "--healthz-address=",
            f"--kube-api-qps={args.qps}",
            f"--kube-api-burst={args.qps}",
        ]
        logs = Path(tmp)
        scheduler = subprocess.Popen(
            [str(stromboli), "scheduler", "--listen-address=", *common],
            stdout=(logs / "scheduler.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        controller = subprocess.Popen(
            [
                str(stromboli),
                "controller",
                f"--listen-address=127.0.0.1:{port}",
                *common,
                *args.controller_arg,
            ],
            stdout=(logs / "controller.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        procs = [scheduler, controller]
        try:
            await wait_ready(store, metrics_url, procs)
            api_pid = cp.components["kube-apiserver"].pid
            assert api_pid is not None
            cpu_before = {
                "controller": cpu_seconds(controller.pid),
                "scheduler": cpu_seconds(scheduler.pid),
                "kube-apiserver": cpu_seconds(api_pid),
            }
            jobs = [vcjob(f"bench-{i}", args.pods_per_job) for i in range(args.jobs)]
            times = PodTimes()
            started = time.time()
            deadline = time.monotonic() + args.timeout
            watching = asyncio.create_task(follow_pods(store, expected, times, deadline))
            pods_done = asyncio.Event()
            groups = asyncio.create_task(follow_podgroups(store, times, pods_done))
            returned = await submit(store, jobs)
            submitted = time.time() - started
            await watching
            pods_done.set()
            await groups
            cpu = {
                "controller": cpu_seconds(controller.pid) - cpu_before["controller"],
                "scheduler": cpu_seconds(scheduler.pid) - cpu_before["scheduler"],
                "kube-apiserver": cpu_seconds(api_pid) - cpu_before["kube-apiserver"],
            }
            buckets, observed = scrape_latency(metrics_url)
            listed_jobs = await store.list(*JOB, NAMESPACE)
            listed_pods = await store.list("v1", "Pod", NAMESPACE)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            await store.close()
            for proc in procs:
                if proc.returncode not in (0, -15):  # died, or did not stop on SIGTERM
                    log = logs / f"{proc.args[1]}.log"
                    print(f"--- {log.name}\n{log.read_text()[-3000:]}", file=sys.stderr)

    job_created = {
        j["metadata"]["name"]: parse_time(j["metadata"]["creationTimestamp"])
        for j in listed_jobs.items
    }
    api_latency: list[float] = []
    wall_latency: list[float] = []
    for pod in listed_pods.items:
        meta = pod["metadata"]
        job_name = (meta.get("annotations") or {}).get("volcano.sh/job-name")
        if job_name not in job_created:
            continue
        pod_created = parse_time(meta["creationTimestamp"])
        api_latency.append((pod_created - job_created[job_name]).total_seconds())
        if meta["name"] in times.seen and job_name in returned:
            wall_latency.append(times.seen[meta["name"]] - returned[job_name])

    def until_all(stage: dict[str, float], count: int = expected) -> float:
        return max(stage.values()) - started if len(stage) >= count else math.nan

    result = {
        "jobs": args.jobs,
        "pods_per_job": args.pods_per_job,
        "nodes": args.nodes,
        "cpus": os.cpu_count(),
        "submit_s": submitted,
        "pods_seen": len(times.seen),
        "pods_bound": len(times.bound),
        "pods_running": len(times.running),
        "all_podgroups_created_s": until_all(times.pg_seen, args.jobs),
        "all_podgroups_admitted_s": until_all(times.pg_admitted, args.jobs),
        "all_created_s": until_all(times.seen),
        "all_bound_s": until_all(times.bound),
        "all_running_s": until_all(times.running),
        "latency_api_p50_s": percentile(api_latency, 0.5),
        "latency_api_p99_s": percentile(api_latency, 0.99),
        "latency_wall_p50_s": percentile(wall_latency, 0.5),
        "latency_wall_p99_s": percentile(wall_latency, 0.99),
        "latency_metric_count": observed,
        "latency_metric_p50_s": histogram_quantile(0.5, buckets) / 1000,
        "latency_metric_p99_s": histogram_quantile(0.99, buckets) / 1000,
        "cpu_s": cpu,
    }
    return result


def report(r: dict[str, Any]) -> None:
    expected = r["jobs"] * r["pods_per_job"]
    print(
        f"{r['jobs']} vcjobs x {r['pods_per_job']} pods on {r['nodes']} kwok nodes; "
        f"{r['cpus']} cpus shared by every process"
    )
    print(f"  jobs submitted in            {r['submit_s']:.2f}s")
    print(f"  all PodGroups created after  {fmt(r['all_podgroups_created_s'])}")
    print(f"  all PodGroups admitted after {fmt(r['all_podgroups_admitted_s'])}")
    for stage in ("created", "bound", "running"):
        count = r[f"pods_{'seen' if stage == 'created' else stage}"]
        print(f"  all pods {stage:<8} after     {fmt(r[f'all_{stage}_s'])}  ({count}/{expected})")
    print("  job->pod creation latency   p50 / p99")
    print(
        f"    API timestamps (1 s grain) {fmt(r['latency_api_p50_s'])} / "
        f"{fmt(r['latency_api_p99_s'])}"
    )
    print(
        f"    wall clock (watch)         {fmt(r['latency_wall_p50_s'])} / "
        f"{fmt(r['latency_wall_p99_s'])}"
    )
    print(
        f"    controller histogram       {fmt(r['latency_metric_p50_s'])} / "
        f"{fmt(r['latency_metric_p99_s'])}  ({r['latency_metric_count']:.0f} observations)"
    )
    cpu = r["cpu_s"]
    print(
        f"  CPU seconds: controller {cpu['controller']:.1f}  scheduler {cpu['scheduler']:.1f}  "
        f"kube-apiserver {cpu['kube-apiserver']:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pods-per-job", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--qps", type=int, default=5000, help="client QPS/burst of both processes")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds to wait for Running")
    parser.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        help="extra argument for `stromboli controller` (repeatable), e.g. --driver=native",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    for flag in ("jobs", "pods_per_job", "nodes"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    result = asyncio.run(main_async(args))
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

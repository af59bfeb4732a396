"""Many RayClusters at once through the real KubeRay operator: time until every gang is bound.

Starts a control plane of its own (etcd, kube-apiserver, kube-controller-manager, kwok with N
fake nodes), ``stromboli scheduler`` and ``stromboli controller``, and KubeRay v1.5.0 built from
its Go module (``core/devcluster/operators.py``) with ``--batch-scheduler=volcano``. Then submits
C RayClusters of one head and W workers (1 cpu, 1Gi each) at once and follows the pods by a
watch. KubeRay makes each cluster's ``ray-<name>-pg`` and pods; our scheduler binds each gang
whole.

Prints, API requests first (as every live benchmark here): requests per pod by verb and
resource (the API server's ``apiserver_request_total``, all clients together), then the time
from the first submission until all PodGroups exist, all pods exist and every gang is bound,
per-gang submit-to-bound p50/p99, and the CPU seconds of each process (they share the cores).

Run: .venv/bin/python benchmarks/ray_gang_bench.py [--clusters 200] [--workers 8] [--nodes 40]
     [--reconcile-concurrency 1] [--schedule-period 1s]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster.client import KubeHTTP
from stromboli.core.devcluster.controlplane import ControlPlane, free_port
from stromboli.core.devcluster.operators import build_operator

STROMBOLI = Path(sys.executable).with_name("stromboli")
TICKS = os.sysconf("SC_CLK_TCK")
NAMESPACE = "ray-bench"
_REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / TICKS


def request_counts(client: KubeHTTP) -> Counter[tuple[str, str]]:
    """``apiserver_request_total`` summed by (verb, resource[/subresource])."""
    status, body = client.request_raw("GET", "/metrics", accept="text/plain")
    if status != 200:
        raise RuntimeError(f"GET /metrics answered {status}")
    counts: Counter[tuple[str, str]] = Counter()
    for line in body.decode().splitlines():
        match = _REQUEST.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            resource = "/".join(filter(None, (labels.get("resource"), labels.get("subresource"))))
            counts[(labels.get("verb", ""), resource)] += int(float(match.group(2)))
    return counts


def ray_cluster(name: str, workers: int) -> dict[str, Any]:
    def template(container: str) -> dict[str, Any]:
        resources = {"cpu": "1", "memory": "1Gi"}
        return {
            "spec": {
                "containers": [
                    {
                        "name": container,
                        "image": "rayproject/ray:2.46.0",
                        "resources": {"requests": resources, "limits": resources},
                    }
                ]
            }
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": template("ray-head")},
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": workers,
                    "minReplicas": workers,
                    "maxReplicas": workers,
                    "rayStartParams": {},
                    "template": template("ray-worker"),
                }
            ],
        },
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def follow(
    store: KubeStore, clusters: int, size: int, timeout: float
) -> tuple[dict[str, float], dict[str, float], dict[str, set[str]]]:
    """(pod → first seen, pod → seen bound, cluster → its bound pods) until every gang is
    bound or ``timeout`` passes."""
    seen: dict[str, float] = {}
    placed: dict[str, float] = {}
    gangs: dict[str, set[str]] = {}
    listed = await store.list("v1", "Pod", NAMESPACE)
    stream = store.watch("v1", "Pod", NAMESPACE, resource_version=listed.resource_version)
    deadline = time.monotonic() + timeout

    def note(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        seen.setdefault(name, time.time())
        if pod["spec"].get("nodeName") and name not in placed:
            placed[name] = time.time()
            cluster = (pod["metadata"].get("labels") or {}).get("ray.io/cluster", "")
            gangs.setdefault(cluster, set()).add(name)

    for item in listed.items:
        note(item)
    try:
        while sum(len(p) >= size for p in gangs.values()) < clusters:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                event = await asyncio.wait_for(anext(stream), left)
            except TimeoutError:
                break
            if event.type in ("ADDED", "MODIFIED"):
                note(event.object)
    finally:
        await stream.aclose()
    return seen, placed, gangs


async def submit(store: KubeStore, clusters: int, workers: int) -> dict[str, float]:
    """Create every RayCluster at once (64 in flight); when each create returned."""
    gate = asyncio.Semaphore(64)
    done: dict[str, float] = {}

    async def one(i: int) -> None:
        name = f"rc-{i:04d}"
        async with gate:
            await store.create(ray_cluster(name, workers))
        done[name] = time.time()

    await asyncio.gather(*(one(i) for i in range(clusters)))
    return done


def start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


async def run(args: argparse.Namespace) -> None:
    build = build_operator("kuberay")
    run_dir = Path(tempfile.mkdtemp(prefix="ray-gang-bench-"))
    size = args.workers + 1
    with ControlPlane(run_dir=run_dir) as cp:
        cp.apply_manifests(build_crds())
        cp.apply_manifests(build.crds)
        cp.add_nodes(args.nodes, cpu=str(args.node_cpu), memory="512Gi", pods=250)
        cp.client.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        kube = str(cp.kubeconfig_path)
        common = [f"--kubeconfig={kube}", "--healthz-address=", "--listen-address="]
        procs = {
            "scheduler": start(
                [str(STROMBOLI), "scheduler", *common, f"--schedule-period={args.schedule_period}"],
                run_dir / "scheduler.log",
            ),
            "controller": start(
                [str(STROMBOLI), "controller", *common, "--leader-elect=false"],
                run_dir / "controller.log",
            ),
            "kuberay": start(
                [
                    str(build.binary),
                    "--batch-scheduler=volcano",
                    "--enable-leader-election=false",
                    f"--reconcile-concurrency={args.reconcile_concurrency}",
                    f"--metrics-addr=127.0.0.1:{free_port()}",
                    f"--health-probe-bind-address=127.0.0.1:{free_port()}",
                ],
                run_dir / "kuberay.log",
                {**os.environ, "KUBECONFIG": kube},
            ),
        }
        apiserver_pid = cp.components["kube-apiserver"].pid
        store = KubeStore(KubeConfig.load(kube))
        try:
            await asyncio.sleep(5)  # let the processes list and watch before the burst
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited; see {run_dir}/{name}.log")
            cpu0 = {n: cpu_seconds(p.pid) for n, p in procs.items()}
            api_cpu0 = cpu_seconds(apiserver_pid) if apiserver_pid else 0.0
            requests0 = request_counts(cp.client)
            t0 = time.time()
            watcher = asyncio.create_task(follow(store, args.clusters, size, args.timeout))
            submitted = await submit(store, args.clusters, args.workers)
            seen, placed, gangs = await watcher
            t_end = time.time()
            requests = request_counts(cp.client) - requests0
            cpu = {n: cpu_seconds(p.pid) - cpu0[n] for n, p in procs.items()}
            api_cpu = (cpu_seconds(apiserver_pid) if apiserver_pid else 0.0) - api_cpu0
            groups = cp.client.get(
                f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NAMESPACE}/podgroups"
            )["items"]
        finally:
            await store.close()
            for proc in procs.values():
                proc.terminate()
            for proc in procs.values():
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()

    pods = len(seen)
    whole = [c for c, p in gangs.items() if len(p) >= size]
    print(
        f"machine: {os.cpu_count()} cores; {args.clusters} RayClusters x (1 head + "
        f"{args.workers} workers) = {args.clusters * size} pods on {args.nodes} kwok nodes; "
        f"KubeRay {build.version} --reconcile-concurrency={args.reconcile_concurrency}; "
        f"scheduler period {args.schedule_period}"
    )
    print(f"API requests per pod ({sum(requests.values())} in all, {pods} pods):")
    for (verb, resource), count in sorted(requests.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {verb:>7} {resource:<24} {count / max(pods, 1):7.2f}")
    print(f"submitted all {len(submitted)} in {max(submitted.values()) - t0:.1f}s")
    print(f"PodGroups made by KubeRay: {len(groups)}")
    if seen:
        print(f"all {pods} pods created by {max(seen.values()) - t0:.1f}s")
    print(
        f"gangs bound whole: {len(whole)}/{args.clusters}; every gang bound at {t_end - t0:.1f}s"
        if len(whole) == args.clusters
        else f"gangs bound whole: {len(whole)}/{args.clusters} (timed out at {args.timeout}s)"
    )
    latency = [max(placed[p] for p in gangs[c]) - submitted[c] for c in whole if c in submitted]
    print(
        f"per gang, submit to bound: p50 {percentile(latency, 0.5):.1f}s "
        f"p99 {percentile(latency, 0.99):.1f}s"
    )
    print(
        "CPU seconds: "
        + ", ".join(f"{n} {s:.1f}" for n, s in cpu.items())
        + f", kube-apiserver {api_cpu:.1f}"
    )
    print(f"logs: {run_dir}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--node-cpu", type=int, default=48)
    parser.add_argument("--reconcile-concurrency", type=int, default=1)
    parser.add_argument("--schedule-period", default="1s")
    parser.add_argument("--timeout", type=float, default=1200.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

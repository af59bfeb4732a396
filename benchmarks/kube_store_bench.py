"""Throughput of the Kubernetes store against a real API server: pod creates and binds per second.

Starts etcd + kube-apiserver + kwok on loopback (``ControlPlane``, binaries cached under
``~/.cache/stromboli``), then for each client rate limit creates N pods in a fresh namespace and
binds them round-robin to kwok nodes, ``--concurrency`` requests in flight (as the scheduler's
binder). It prints creates/s and binds/s, the client-side latency median, and the CPU seconds
this process and the API server spent, so a figure can be told apart from a starved machine:
all of them share the same cores.

Run: ``.venv/bin/python benchmarks/kube_store_bench.py [--pods 1000] [--qps 50,200,2000,0]``
(``0`` means no client limit). Binds go to kwok nodes that mark pods Running, so the API server
also serves kwok's status patches meanwhile, as in a real cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a process (``/proc``); 0 if it is gone."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def make_pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"volcano.sh/job-name": "bench", "volcano.sh/task-spec": "worker"},
            "annotations": {"scheduling.k8s.io/group-name": "bench"},
        },
        "spec": {
            "schedulerName": "stromboli-bench-nobody",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/sleep:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


async def timed_all(
    items: Iterable[Any], call: Callable[[Any], Awaitable[None]], concurrency: int
) -> tuple[float, list[float]]:
    """Run ``call`` on every item, ``concurrency`` at a time; (wall seconds, latencies)."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(item: Any) -> None:
        async with gate:
            started = time.perf_counter()
            await call(item)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one(item) for item in items))
    return time.perf_counter() - started, latencies


async def run_case(
    cp: ControlPlane, qps: float, pods: int, nodes: list[str], concurrency: int
) -> None:
    burst = max(1, int(qps)) if qps > 0 else 1
    store = KubeStore(KubeConfig.load(cp.kubeconfig_path), qps=qps, burst=burst)
    api_pid = cp.components["kube-apiserver"].pid
    try:
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        await store.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        # The namespace's own request spent a token; start each phase with a full bucket.
        await asyncio.sleep(1 / qps if qps > 0 else 0)
        names = [f"p-{i}" for i in range(pods)]
        cpu_self, cpu_api = time.process_time(), cpu_seconds(api_pid)
        create_wall, create_lat = await timed_all(
            names, lambda n: store.create(make_pod(n, namespace)), concurrency
        )
        if qps > 0:
            await asyncio.sleep(min(burst / qps, 5.0))  # refill, so binds get the same burst
        bind_wall, bind_lat = await timed_all(
            enumerate(names),
            lambda item: store.bind(namespace, item[1], nodes[item[0] % len(nodes)]),
            concurrency,
        )
        cpu_self = time.process_time() - cpu_self
        cpu_api = cpu_seconds(api_pid) - cpu_api
        listed = await store.list("v1", "Pod", namespace, field_selector="spec.nodeName!=")
        bound = len(listed.items)
    finally:
        await store.close()
    label = f"qps={qps:g} burst={burst}" if qps > 0 else "no limit"
    print(
        f"{label:<24} {pods / create_wall:9.1f} creates/s {pods / bind_wall:9.1f} binds/s   "
        f"median create {statistics.median(create_lat) * 1000:6.1f} ms  "
        f"bind {statistics.median(bind_lat) * 1000:6.1f} ms   "
        f"cpu: bench {cpu_self:5.1f}s apiserver {cpu_api:5.1f}s   bound {bound}/{pods}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--qps", default="50,200,2000,0", help="comma-separated client limits (0: none)"
    )
    args = parser.parse_args()
    settings = [float(q) for q in args.qps.split(",") if q.strip()]
    with ControlPlane(nodes=0) as cp:
        nodes = cp.add_nodes(args.nodes, pods=max(110, args.pods))
        print(
            f"kube-apiserver {cp.kube_version} on {cp.server_url}; {args.pods} pods, "
            f"{args.nodes} kwok nodes, {args.concurrency} requests in flight, "
            f"{os.cpu_count()} cpus shared by everything",
            flush=True,
        )
        for qps in settings:
            asyncio.run(run_case(cp, qps, args.pods, nodes, args.concurrency))


if __name__ == "__main__":
    main()

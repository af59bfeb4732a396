"""Create → bound latency of pods that arrive one by one into a cluster with room, with and
without early cycles (issue 14 point 5), in process: the real ``SchedulerServer`` loop over the
in-memory store, so the figures are the loop's own timing, free of the API server's and of
the machine's load.

A pod (one-member PodGroup, then the pod) is created every ``1/--rate`` seconds; a watch on pods
notes when each gets its node. With ``--early-cycle-gap 0`` a pod waits for the next period
(``--schedule-period``, half of it on average); with early cycles it waits for the gap and a
cycle. Prints p50/p99/max latency, cycles run, and the process CPU seconds per pod.

Run: .venv/bin/python benchmarks/arrival_latency_bench.py [--pods 200] [--rate 20]
     [--schedule-period 1] [--gaps 0,0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.server import SchedulerOptions, SchedulerServer


def node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"}},
    }


def group_and_pod(name: str) -> list[dict]:
    return [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": 1},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}
                ],
            },
        },
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run(pods: int, rate: float, period: float, gap: float) -> None:
    store = MemoryStore(SystemClock())
    for i in range(10):
        await store.create(node(f"n{i}"))
    options = SchedulerOptions(
        schedule_period=period, listen_address="", healthz_address="", early_cycle_gap=gap
    )
    server = SchedulerServer(store, options)
    running = asyncio.create_task(server.run())
    while server.cycles < 1:
        await asyncio.sleep(0.01)
    created: dict[str, float] = {}
    bound: dict[str, float] = {}

    async def watch() -> None:
        async with store.watch("v1", "Pod") as events:
            async for event in events:
                name = event.object["metadata"]["name"]
                if event.object["spec"].get("nodeName") and name not in bound:
                    bound[name] = time.monotonic()
                    if len(bound) == pods:
                        return

    watching = asyncio.create_task(watch())
    cpu_started, cycles_started = time.process_time(), server.cycles
    for i in range(pods):
        name = f"p{i}"
        for obj in group_and_pod(name):
            await store.create(obj)
        created[name] = time.monotonic()
        await asyncio.sleep(1 / rate)
    await asyncio.wait_for(watching, 60 + 2 * period)
    cpu = time.process_time() - cpu_started
    server.stop()
    await running
    latencies = [(bound[n] - created[n]) * 1000 for n in created]
    print(
        f"early-cycle-gap {gap * 1000:5.0f} ms  period {period:.1f} s  {pods} pods at {rate:g}/s:"
        f"  create→bound p50 {percentile(latencies, 0.5):7.1f} ms"
        f"  p99 {percentile(latencies, 0.99):7.1f} ms  max {max(latencies):7.1f} ms"
        f"  cycles {server.cycles - cycles_started} ({server.early_cycles} early)"
        f"  CPU {cpu * 1000 / pods:.2f} ms/pod"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="pods created per second")
    parser.add_argument("--schedule-period", type=float, default=1.0)
    parser.add_argument("--gaps", default="0,0.02", help="early-cycle gaps to compare, seconds")
    args = parser.parse_args()
    register_builtins()
    for gap in (float(g) for g in args.gaps.split(",")):
        asyncio.run(run(args.pods, args.rate, args.schedule_period, gap))


if __name__ == "__main__":
    main()

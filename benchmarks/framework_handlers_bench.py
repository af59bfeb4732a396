"""The framework adapters' live handlers (``integrations/live.py``) under a burst, in process.

N PyTorchJobs (Master ×1, Worker ×W) and N RayClusters (head + W workers) are stored at once on
the in-memory store, then the handlers run until every PodGroup exists; then every job's
workers are scaled by one and the handlers run until every PodGroup follows. The store is the
simulator's (no API server): the figures are the handlers' own cost per object — conversion,
adoption check, write — which on a cluster adds one create (or patch) request per object.

Printed: objects, wall seconds and objects/s for the first pass and the scale pass, writes
made, and the process's peak RSS (the in-memory store included).

Run: .venv/bin/python benchmarks/framework_handlers_bench.py [--objects 2000] [--workers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from typing import Any

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.integrations.kinds import with_framework_kinds
from stromboli.integrations.live import PODGROUP, FrameworkController

TEMPLATE = {
    "spec": {
        "containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
        ]
    }
}


def pytorchjob(n: int, workers: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": f"job-{n}", "namespace": "bench"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": TEMPLATE},
                "Worker": {"replicas": workers, "template": TEMPLATE},
            }
        },
    }


def raycluster(n: int, workers: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": f"ray-{n}", "namespace": "bench"},
        "spec": {
            "headGroupSpec": {"template": TEMPLATE},
            "workerGroupSpecs": [{"groupName": "w", "replicas": workers, "template": TEMPLATE}],
        },
    }


async def run(objects: int, workers: int) -> None:
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds(), seed=0)
    await store.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "bench", "labels": {"stromboli.dev/enroll": "true"}},
        }
    )
    adapters = FrameworkController(store)
    await adapters.prepare()
    await adapters.informer.start()
    for n in range(objects):
        await store.create(pytorchjob(n, workers))
        await store.create(raycluster(n, workers))
    started = time.perf_counter()
    while await adapters.pump():
        pass
    first = time.perf_counter() - started
    groups = len((await store.list(*PODGROUP, "bench")).items)
    assert groups == 2 * objects, groups
    for n in range(objects):
        job = await store.get("kubeflow.org/v1", "PyTorchJob", f"job-{n}", "bench")
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers + 1
        await store.update(job)
    started = time.perf_counter()
    while await adapters.pump():
        pass
    scale = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    total = 2 * objects
    print(
        f"objects: {total} ({objects} PyTorchJobs, {objects} RayClusters; {workers} workers each)"
    )
    print(f"first pass: {first:.2f}s, {total / first:.0f} objects/s, {adapters.created} created")
    print(f"scale pass: {scale:.2f}s, {objects / scale:.0f} jobs/s, {adapters.updated} patched")
    print(f"peak RSS of the process (store included): {peak / 1024:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(run(args.objects, args.workers))


if __name__ == "__main__":
    main()

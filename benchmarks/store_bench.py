"""Cost of the memory store's hot path: create + get + bind per pod, and list/watch throughput.

Run: ``.venv/bin/python benchmarks/store_bench.py [PODS]``. Prints microseconds per operation;
the simulator pushes ~20,000 objects and ~10,000 bindings through the store, so a cycle must stay
far below 100 µs per pod.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import sys
import time
from typing import Any

import orjson

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore


def make_pod(index: int) -> dict[str, Any]:
    """A pod shaped like the ones vcjobs create: labels, annotations, one resourced container."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job-{index // 8}-worker-{index % 8}",
            "namespace": "team-a",
            "labels": {
                "volcano.sh/job-name": f"job-{index // 8}",
                "volcano.sh/task-spec": "worker",
                "volcano.sh/queue-name": "default",
            },
            "annotations": {
                "scheduling.k8s.io/group-name": f"job-{index // 8}",
                "volcano.sh/task-spec": "worker",
                "volcano.sh/job-version": "0",
            },
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "OnFailure",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", "sleep 60"],
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                    },
                }
            ],
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


async def cycle(pods: int) -> dict[str, float]:
    store = MemoryStore(VirtualClock(), seed=0)
    objects = [make_pod(i) for i in range(pods)]
    t0 = time.perf_counter()
    for pod in objects:
        await store.create(pod)
    t1 = time.perf_counter()
    for pod in objects:
        await store.get("v1", "Pod", pod["metadata"]["name"], "team-a")
    t2 = time.perf_counter()
    for index, pod in enumerate(objects):
        await store.bind("team-a", pod["metadata"]["name"], f"node-{index % 500}")
    t3 = time.perf_counter()
    listed = await store.list("v1", "Pod", "team-a", label_selector="volcano.sh/task-spec=worker")
    t4 = time.perf_counter()
    assert len(listed.items) == pods
    del listed
    gc.disable()  # what a list costs without collector pauses (the simulator may gc.freeze())
    t5 = time.perf_counter()
    await store.list("v1", "Pod", "team-a", label_selector="volcano.sh/task-spec=worker")
    t6 = time.perf_counter()
    gc.enable()
    watch = store.watch("v1", "Pod", resource_version="0")
    for _ in range(pods):
        await watch.__anext__()
    t7 = time.perf_counter()
    await watch.aclose()
    per = 1e6 / pods
    return {
        "create": (t1 - t0) * per,
        "get": (t2 - t1) * per,
        "bind": (t3 - t2) * per,
        "create+get+bind": (t3 - t0) * per,
        "list (per item)": (t4 - t3) * per,
        "list (per item, gc paused)": (t6 - t5) * per,
        "watch replay (per event)": (t7 - t6) * per,
    }


def copy_costs(rounds: int = 20_000) -> dict[str, float]:
    """Why reads decode bytes: the copy strategies the store could use, per pod."""
    pod = make_pod(0)
    raw = orjson.dumps(pod)
    t0 = time.perf_counter()
    for _ in range(rounds):
        copy.deepcopy(pod)
    t1 = time.perf_counter()
    for _ in range(rounds):
        orjson.loads(orjson.dumps(pod))
    t2 = time.perf_counter()
    for _ in range(rounds):
        orjson.loads(raw)
    t3 = time.perf_counter()
    per = 1e6 / rounds
    return {
        "copy.deepcopy": (t1 - t0) * per,
        "orjson dumps+loads": (t2 - t1) * per,
        "orjson loads (stored bytes)": (t3 - t2) * per,
    }


def main() -> None:
    pods = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    print(f"memory store, {pods} pods (µs per pod)")
    for name, value in asyncio.run(cycle(pods)).items():
        print(f"  {name:28s} {value:8.2f}")
    print("copy strategies (µs per pod)")
    for name, value in copy_costs().items():
        print(f"  {name:28s} {value:8.2f}")


if __name__ == "__main__":
    main()

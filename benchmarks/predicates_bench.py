"""Cost of one placement decision's node work: predicates + scores, per task.

Builds clusters of 1,000 / 5,000 / 10,000 nodes (10 zones, 5% tainted, 2 running pods per
node), opens a session with ``predicates``, ``nodeorder`` and ``binpack``, and for a few pod
shapes prints microseconds per call of:
- ``predicate``: ``ssn.predicate(task)`` over every node;
- ``score``: ``ssn.node_scores`` over the first 100 feasible nodes (what Volcano's adaptive
  sampling looks at on large clusters) and over all feasible nodes.
Each task of a shape is a new pod of that shape, and is allocated after scoring, so the
dynamic filters (anti-affinity, spread, ports) see the pods placed before it. Also prints the
session's one-off cost of building the placed-pod views on the first predicate call.

Run: ``.venv/bin/python benchmarks/predicates_bench.py [TASKS_PER_SHAPE]``
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from stromboli.core.scheduler.api.build import node_info_from, task_info_from
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.conf import PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.snapshot import Snapshot
from stromboli.core.scheduler.plugins import binpack, nodeorder, predicates  # noqa: F401

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
SAMPLE = 100


def make_node(i: int) -> dict:
    taints = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}] if i % 20 == 0 else []
    return {
        "metadata": {
            "name": f"node-{i:05d}",
            "labels": {HOST: f"node-{i:05d}", ZONE: f"zone-{i % 10}", "pool": f"p{i % 4}"},
        },
        "spec": {"taints": taints},
        "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
    }


def make_pod(name: str, labels: dict[str, str], on: str = "", **spec: Any) -> dict:
    container = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    ports = spec.pop("ports", None)
    if ports:
        container["ports"] = ports
    body: dict[str, Any] = {"containers": [container], **spec}
    if on:
        body["nodeName"] = on
    return {
        "metadata": {"name": name, "namespace": "bench", "uid": name, "labels": labels},
        "spec": body,
        "status": {"phase": "Running" if on else "Pending"},
    }


def anti(labels: dict[str, str]) -> dict:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


SHAPES: dict[str, Callable[[str], dict]] = {
    "plain": lambda n: make_pod(n, {"app": "plain"}),
    "selector+toleration": lambda n: make_pod(
        n,
        {"app": "sel"},
        nodeSelector={"pool": "p1"},
        tolerations=[{"key": "dedicated", "operator": "Exists"}],
    ),
    "node-affinity": lambda n: make_pod(
        n,
        {"app": "aff"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": ZONE, "operator": "In", "values": ["zone-1", "zone-2"]},
                                {"key": "pool", "operator": "NotIn", "values": ["p0"]},
                            ]
                        }
                    ]
                }
            }
        },
    ),
    "self-anti-affinity": lambda n: make_pod(n, {"app": "solo"}, affinity=anti({"app": "solo"})),
    "zone-spread": lambda n: make_pod(
        n,
        {"app": "spread"},
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            }
        ],
    ),
    "host-port": lambda n: make_pod(
        n, {"app": "port"}, ports=[{"containerPort": 9100, "hostPort": 9100}]
    ),
}


class Bench:
    def __init__(self, size: int) -> None:
        table = NodeTable()
        for i in range(size):
            table.add_node(node_info_from(make_node(i)))
        self.jobs: dict[str, JobInfo] = {}
        for i in range(size * 2):
            raw = make_pod(f"run-{i}", {"app": f"svc-{i % 50}"}, on=f"node-{i % size:05d}")
            task = task_info_from(raw, "running")
            table.add_task(task.node_name, task)
        tiers = [
            [PluginOption(name, Arguments(name)) for name in ("predicates", "nodeorder", "binpack")]
        ]
        started = time.perf_counter()
        self.ssn = Session(
            Snapshot(self.jobs, {}, table),
            SchedulerConfig([], tiers, {}),
            datetime(2024, 1, 1, tzinfo=UTC),
        )
        self.ssn.open()
        self.open_ms = (time.perf_counter() - started) * 1e3
        self.table = table

    def task(self, raw: dict) -> TaskInfo:
        task = task_info_from(raw, raw["metadata"]["uid"])
        job = JobInfo(task.job_id, task.name, task.namespace, "default", 0, 1, {}, "")
        job.add_task(task)
        self.jobs[task.job_id] = job
        return task

    def run(self, shape: str, count: int) -> tuple[float, float, float]:
        make = SHAPES[shape]
        tasks = [self.task(make(f"{shape}-{i}")) for i in range(count)]
        predicate = sample = full = 0.0
        for task in tasks:
            started = time.perf_counter()
            feasible = np.flatnonzero(self.ssn.predicate(task).passed)
            predicate += time.perf_counter() - started
            if not feasible.size:
                continue
            started = time.perf_counter()
            scores = self.ssn.node_scores(task, feasible[:SAMPLE])
            sample += time.perf_counter() - started
            started = time.perf_counter()
            self.ssn.node_scores(task, feasible)
            full += time.perf_counter() - started
            best = feasible[int(np.argmax(scores))]
            self.ssn.statement().allocate(task, self.table.nodes[best].name)
        return predicate / count * 1e6, sample / count * 1e6, full / count * 1e6


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    for size in (1_000, 5_000, 10_000):
        bench = Bench(size)
        started = time.perf_counter()
        bench.ssn.predicate(bench.task(make_pod("warm", {"app": "warm"})))
        build_ms = (time.perf_counter() - started) * 1e3
        print(
            f"\n{size:,} nodes, {size * 2:,} running pods: session open {bench.open_ms:.1f} ms, "
            f"first predicate (builds placed-pod views) {build_ms:.1f} ms"
        )
        print(f"  {'shape':<22}{'predicate µs':>14}{'score 100 µs':>14}{'score all µs':>14}")
        for shape in SHAPES:
            predicate, sample, full = bench.run(shape, count)
            print(f"  {shape:<22}{predicate:>14.1f}{sample:>14.1f}{full:>14.1f}")


if __name__ == "__main__":
    main()

"""Cost of one placement decision's node work: predicates + scores, per task.

Builds clusters of 1,000 / 5,000 / 10,000 nodes (10 zones, 5% tainted, 2 running pods per
node), opens a session with ``predicates``, ``nodeorder`` and ``binpack``, and for a few pod
shapes prints microseconds per call of:
- ``first call``: the first predicate + scoring of a shape (per-shape masks are built);
- ``predicate``: later ``ssn.predicate(task)`` calls over every node;
- ``score``: the plugins' ``node_order`` and ``batch_node_order`` callbacks, called directly
  (without the session's per-shape score cache), over the first 100 feasible nodes and over
  all feasible nodes (Volcano's adaptive sampling scores 100 to 50% of them).
Each task of a shape is a new pod of that shape, and is allocated after scoring, so the
dynamic filters (anti-affinity, spread, ports) see the pods placed before it. Also prints the
session's one-off cost of building the placed-pod views on the first predicate call, and the
first-call cost per shape in a following session over unchanged nodes (per-shape masks and
label columns are then reused).

Run: ``.venv/bin/python benchmarks/predicates_bench.py [TASKS_PER_SHAPE]``
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from stromboli.core.scheduler.api.build import node_info_from, task_info_from
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.options import PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.snapshot import Snapshot

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
        # A long-lived scheduler keeps its cache out of the cyclic collector's way; without
        # this, collections over the 10,000s of pod dicts dominate every figure below.
        gc.collect()
        gc.freeze()

    def next_session(self) -> float:
        """Open another session over an unchanged copy of the nodes; returns its open ms."""
        self.table = self.table.copy()
        started = time.perf_counter()
        self.ssn = Session(
            Snapshot(self.jobs, {}, self.table), self.ssn.config, datetime(2024, 1, 1, tzinfo=UTC)
        )
        self.ssn.open()
        return (time.perf_counter() - started) * 1e3

    def task(self, raw: dict) -> TaskInfo:
        task = task_info_from(raw, raw["metadata"]["uid"])
        job = JobInfo(task.job_id, task.name, task.namespace, "default", 0, 1, {}, "")
        job.add_task(task)
        self.jobs[task.job_id] = job
        return task

    def score(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        """Every plugin's scores, called directly (the session's per-shape cache bypassed)."""
        total = np.zeros(positions.shape[0])
        for point in ("node_order", "batch_node_order"):
            for tier in self.ssn.chain(point):
                for fn in tier:
                    total += fn(task, positions)
        return total

    def run(self, shape: str, count: int) -> dict[str, float]:
        """Microseconds: the shape's first call (per-shape masks built) and per later call."""
        make = SHAPES[shape]
        tasks = [self.task(make(f"{shape}-{i}")) for i in range(count + 1)]
        started = time.perf_counter()
        self.score(tasks[0], np.flatnonzero(self.ssn.predicate(tasks[0]).passed))
        first = time.perf_counter() - started
        predicate = sample = full = 0.0
        for task in tasks[1:]:
            started = time.perf_counter()
            passed = self.ssn.predicate(task).passed
            predicate += time.perf_counter() - started
            feasible = np.flatnonzero(passed)
            if not feasible.size:
                continue
            started = time.perf_counter()
            scores = self.score(task, feasible[:SAMPLE])
            sample += time.perf_counter() - started
            started = time.perf_counter()
            self.score(task, feasible)
            full += time.perf_counter() - started
            best = feasible[int(np.argmax(scores))]
            self.ssn.statement().allocate(task, self.table.nodes[best].name)
        return {
            "first": first * 1e6,
            "predicate": predicate / count * 1e6,
            "sample": sample / count * 1e6,
            "full": full / count * 1e6,
        }


def main() -> None:
    register_builtins()
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
        print(
            f"  {'shape':<22}{'first call µs':>14}{'predicate µs':>14}"
            f"{'score 100 µs':>14}{'score all µs':>14}"
        )
        for shape in SHAPES:
            t = bench.run(shape, count)
            print(
                f"  {shape:<22}{t['first']:>14.0f}{t['predicate']:>14.1f}"
                f"{t['sample']:>14.1f}{t['full']:>14.1f}"
            )
        open_ms = bench.next_session()
        started = time.perf_counter()
        bench.ssn.predicate(bench.task(make_pod("warm-2", {"app": "warm"})))
        build_ms = (time.perf_counter() - started) * 1e3
        firsts = {shape: bench.run(shape, 1)["first"] for shape in SHAPES}
        print(
            f"  next session, nodes unchanged: open {open_ms:.1f} ms, placed-pod views "
            f"{build_ms:.1f} ms, first call per shape "
            + ", ".join(f"{shape} {us:.0f}" for shape, us in firsts.items())
            + " µs"
        )


if __name__ == "__main__":
    main()

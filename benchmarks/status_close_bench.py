"""Cost of what a session writes at close when many gangs wait (issue 16's Volcano words).

Every cycle Volcano's scheduler words a sentence for each group short of running (the
PodGroup's ``Unschedulable`` event, each pending pod's condition); this measures that pass,
``status.collect``, over a session where J gangs of S pods all wait (one node, too small for
any gang), and the allocate + close that precede it, for scale.

With ``--settled N`` it measures instead the close of a live-like cycle: N one-pod jobs already
Running with nothing to do and ``--new K`` one-pod jobs arriving each cycle, through the real
scheduler on the in-memory store, closing only the jobs that changed (``settled.py``) and, in
turns on an identical second scheduler, every job (as before): gang's close, ``collect`` and
the per-job metrics, per cycle, wall and CPU time (gang's close is timed in wall time only;
``close sum`` adds it to the CPU time of the other two).

Run: .venv/bin/python benchmarks/status_close_bench.py [--jobs J] [--size S]
     .venv/bin/python benchmarks/status_close_bench.py --settled 5000 [--new 5] [--cycles 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from stromboli.core import clock as clocks
from stromboli.core.api import constants as k
from stromboli.core.clock import EPOCH, format_time
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler import scheduler as scheduler_module
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.conf import DEFAULT_CONFIG, ConfigSource, parse_config
from stromboli.core.scheduler.framework.plugin import ACTIONS
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.metrics import SchedulerMetrics
from stromboli.core.scheduler.scheduler import Scheduler, builtin_queue
from stromboli.core.scheduler.status import collect

SCHED = k.SCHEDULING_V1BETA1


def objects(jobs: int, size: int) -> list[tuple[tuple[str, str], dict]]:
    out: list[tuple[tuple[str, str], dict]] = [
        ((SCHED, "Queue"), builtin_queue(k.ROOT_QUEUE)),
        ((SCHED, "Queue"), builtin_queue(k.DEFAULT_QUEUE)),
        (
            ("v1", "Node"),
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n0"},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
            },
        ),
    ]
    for j in range(jobs):
        name = f"pg-{j}"
        out.append(
            (
                (SCHED, "PodGroup"),
                {
                    "apiVersion": SCHED,
                    "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "default", "uid": f"u-{j}"},
                    "spec": {"minMember": size, "queue": "default"},
                    "status": {"phase": "Inqueue"},
                },
            )
        )
        for i in range(size):
            out.append(
                (
                    ("v1", "Pod"),
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{name}-{i}",
                            "namespace": "default",
                            "uid": f"u-{j}-{i}",
                            "annotations": {k.GROUP_NAME_ANNOTATION: name},
                        },
                        "spec": {
                            "schedulerName": "volcano",
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                        },
                        "status": {"phase": "Pending"},
                    },
                )
            )
    return out


def one_pod_job(name: str) -> list[dict]:
    return [
        {
            "apiVersion": SCHED,
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
                "annotations": {k.GROUP_NAME_ANNOTATION: name},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            },
        },
    ]


async def fill_settled(store: MemoryStore, scheduler: Scheduler, nodes: int, settled: int) -> None:
    """``nodes`` roomy nodes and ``settled`` one-pod jobs bound, Running and settled (their
    statuses written and folded back in), on a started ``scheduler`` over ``store``."""
    for i in range(nodes):
        await store.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"}},
            }
        )
    for j in range(settled):
        for obj in one_pod_job(f"s{j}"):
            await store.create(obj)
    await scheduler.run_once()
    for item in (await store.list("v1", "Pod")).items:
        item["status"] = {**(item.get("status") or {}), "phase": "Running"}
        await store.update_status(item)
    for _ in range(3):  # the watch brings the writes and Running pods; all settle
        await scheduler.run_once()


class Timed:
    """Wall and CPU seconds of ``collect`` calls made by the scheduler module."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.inner = scheduler_module.collect

    def __call__(self, *args: object) -> object:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner(*args)  # type: ignore[arg-type]
        finally:
            self.wall += time.perf_counter() - wall
            self.cpu += time.process_time() - cpu


async def settled_run(settled: int, new: int, cycles: int) -> None:
    timed = Timed()
    scheduler_module.collect = timed  # type: ignore[assignment]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for incremental in (True, False):
            clock = clocks.VirtualClock(1000.0)
            store = MemoryStore(clock, seed=3)
            path = Path(tmp) / f"{incremental}.conf"
            path.write_text(DEFAULT_CONFIG)
            scheduler = Scheduler(store, clock, ConfigSource(path), settled_close=incremental)
            await scheduler.start()
            await fill_settled(store, scheduler, settled // 100 + 1, settled)
            runs.append((incremental, store, scheduler, SchedulerMetrics()))
        figures: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
        for cycle in range(cycles):
            for incremental, store, scheduler, metrics in runs:
                for i in range(new):
                    for obj in one_pod_job(f"new-{cycle}-{i}"):
                        await store.create(obj)
                timed.wall = timed.cpu = 0.0
                stats = await scheduler.run_once()
                ssn = stats.session
                assert ssn is not None
                wall, cpu = time.perf_counter(), time.process_time()
                metrics.observe(stats)
                observe = (time.perf_counter() - wall, time.process_time() - cpu)
                gang = ssn.plugin_seconds.get(("gang", "OnSessionClose"), 0.0)
                closed = len(ssn.closing.jobs) if ssn.closing is not None else len(ssn.jobs)
                row = figures[incremental]
                for key, value in (
                    ("gang close ms", gang * 1000),
                    ("collect ms", timed.wall * 1000),
                    ("collect cpu ms", timed.cpu * 1000),
                    ("metrics ms", observe[0] * 1000),
                    ("metrics cpu ms", observe[1] * 1000),
                    ("close sum ms", (gang + timed.cpu + observe[1]) * 1000),
                    ("jobs closed", closed),
                    ("bound", stats.bound),
                ):
                    row.setdefault(key, []).append(value)
        for _incremental, _store, scheduler, _metrics in runs:
            await scheduler.informer.stop()
    print(f"{settled} settled one-pod jobs, {new} new per cycle, {cycles} cycles (medians)")
    print(f"  {'':22}{'changed jobs':>14}{'every job':>12}")
    for key in figures[True]:
        medians = [statistics.median(figures[incremental][key]) for incremental in (True, False)]
        print(f"  {key:22}{medians[0]:14.2f}{medians[1]:12.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--size", type=int, default=10)
    parser.add_argument("--settled", type=int, default=0)
    parser.add_argument("--new", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    register_builtins()
    if args.settled:
        asyncio.run(settled_run(args.settled, args.new, args.cycles))
        return
    cache = SchedulerCache()
    for kind, obj in objects(args.jobs, args.size):
        cache.apply(kind, "ADDED", obj)
    config = parse_config(DEFAULT_CONFIG, "<default>")
    ssn = Session(cache.snapshot(), config, EPOCH, uid="bench")
    ssn.open()
    started = time.perf_counter()
    for name in config.actions:
        ACTIONS[name]().execute(ssn)
    acted = time.perf_counter()
    ssn.close()
    closed = time.perf_counter()
    changes = collect(ssn, format_time(EPOCH))
    collected = time.perf_counter()
    pods = args.jobs * args.size
    print(f"{args.jobs} waiting gangs of {args.size} pods ({pods} pods), one 4-cpu node")
    print(f"  actions        {acted - started:8.3f} s")
    print(f"  plugins close  {closed - acted:8.3f} s")
    print(
        f"  status collect {collected - closed:8.3f} s"
        f"  ({(collected - closed) / args.jobs * 1e6:.0f} us per gang)"
    )
    print(
        f"  written: {len(changes.podgroups)} PodGroups, {len(changes.pod_conditions)} pod "
        f"conditions, {len(changes.events)} events"
    )


if __name__ == "__main__":
    main()

"""Cost of a cycle's snapshot when most jobs are settled (issue 14: the live p50 at 1,000 nodes).

N one-pod jobs already Running with nothing to do on M nodes, and K one-pod jobs arriving each
cycle, through the real scheduler on the in-memory store with the default configuration: per
cycle, ``SchedulerCache.snapshot()`` alone, the session's open (snapshot + plugins' open, as
``CycleStats.snapshot_seconds`` counts it) and the whole cycle (intake, actions, writes), in
wall and CPU milliseconds. Cycles run pipelined, as the server loop runs them: a cycle is
decided while the previous one's writes are still to come.

Run: .venv/bin/python benchmarks/snapshot_bench.py [--settled 5000] [--nodes 1000] [--new 5]
     [--cycles 20] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import tempfile
import time
from pathlib import Path

from status_close_bench import fill_settled, one_pod_job

from stromboli.core import clock as clocks
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.conf import DEFAULT_CONFIG, ConfigSource
from stromboli.core.scheduler.framework.snapshot import Snapshot
from stromboli.core.scheduler.scheduler import Decided, Scheduler


class TimedSnapshot:
    """Wall and CPU seconds of the cache's ``snapshot`` calls."""

    def __init__(self, cache: SchedulerCache) -> None:
        self.wall = self.cpu = 0.0
        self.inner = cache.snapshot
        cache.snapshot = self  # type: ignore[method-assign]

    def __call__(self) -> Snapshot:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner()
        finally:
            self.wall += time.perf_counter() - wall
            self.cpu += time.process_time() - cpu


async def run(settled: int, nodes: int, new: int, cycles: int, profile: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = clocks.VirtualClock(1000.0)
        store = MemoryStore(clock, seed=3)
        path = Path(tmp) / "scheduler.conf"
        path.write_text(DEFAULT_CONFIG)
        scheduler = Scheduler(store, clock, ConfigSource(path))
        await scheduler.start()
        await fill_settled(store, scheduler, nodes, settled)
        timed = TimedSnapshot(scheduler.cache)
        rows: dict[str, list[float]] = {}
        profiler = cProfile.Profile() if profile else None
        decided: Decided | None = None
        for cycle in range(cycles):
            for i in range(new):
                for obj in one_pod_job(f"new-{cycle}-{i}"):
                    await store.create(obj)
            timed.wall = timed.cpu = 0.0
            wall, cpu = time.perf_counter(), time.process_time()
            if profiler is not None:
                profiler.enable()
            this = await scheduler.decide()
            scheduler.reserve(this)
            decide = time.perf_counter() - wall, time.process_time() - cpu
            bound = 0
            if decided is not None:
                bound = (await scheduler.commit(decided)).bound
            decided = this
            if profiler is not None:
                profiler.disable()
            whole = time.perf_counter() - wall, time.process_time() - cpu
            clock.advance(1)
            for key, value in (
                ("snapshot ms", timed.wall * 1000),
                ("snapshot cpu ms", timed.cpu * 1000),
                ("open ms (snapshot + plugins)", this.stats.snapshot_seconds * 1000),
                ("decide ms", decide[0] * 1000),
                ("decide cpu ms", decide[1] * 1000),
                ("cycle ms", whole[0] * 1000),
                ("cycle cpu ms", whole[1] * 1000),
                ("jobs in session", len(this.ssn.jobs)),
                ("bound", bound),
            ):
                rows.setdefault(key, []).append(value)
        if decided is not None:
            await scheduler.commit(decided)
        await scheduler.informer.stop()
    if profiler is not None and profile:
        profiler.dump_stats(profile)
    print(
        f"{settled} settled one-pod jobs on {nodes} nodes, {new} new per cycle, "
        f"{cycles} cycles (median, min)"
    )
    for key, values in rows.items():
        print(f"  {key:30}{statistics.median(values):10.2f}{min(values):10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settled", type=int, default=5000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--new", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--profile", help="write a cProfile of the measured cycles here")
    args = parser.parse_args()
    register_builtins()
    asyncio.run(run(args.settled, args.nodes, args.new, args.cycles, args.profile))


if __name__ == "__main__":
    main()

"""Scheduler decision throughput and the cost of `stromboli simulate` at scale.

Default input: 5,000 nodes (32 cpu, 256Gi, 110 pods), 1,000 gang jobs of 10 pods in mixed
shapes, the default scheduler configuration. Prints:
- decision throughput: pods placed per second of scheduling time (snapshot + actions, loading
  and store writes excluded), by the wall clock and by the process's CPU clock (on a shared,
  loaded machine the wall clock counts time the process waited for a core; CPU time does not);
- the whole `stromboli simulate --output json` run, loading included, with its peak memory;
- the time of one cycle at 1,000, 5,000 and 10,000 nodes for the same jobs.

``--profile N`` adds cProfile's N costliest functions (own time) of the decision part only,
and ``--only-decisions`` skips the CLI run and the scaling runs.

Run: .venv/bin/python benchmarks/scheduler_bench.py [--nodes N] [--jobs J] [--size S]
     [--profile 30] [--only-decisions]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import write_workload

from stromboli.core.runtime import tune_gc
from stromboli.core.scheduler.builtins import BUILTIN_ACTIONS
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load


class DecisionClock:
    """CPU seconds (and optionally a profile) of the decision part of the scheduler's cycles:
    the snapshot, the session's opening and each action, the parts ``decision_seconds``
    times by the wall clock. Installed by wrapping those three entry points on the classes
    for the duration of one run."""

    def __init__(self, profile: cProfile.Profile | None = None) -> None:
        self.cpu_seconds = 0.0
        self.profile = profile
        self._undo: list[tuple[type, str, object]] = []

    def _wrap(self, cls: type, name: str) -> None:
        original = cls.__dict__[name]

        def timed(*args: object, **kwargs: object) -> object:
            started = time.process_time()
            if self.profile is not None:
                self.profile.enable()
            try:
                return original(*args, **kwargs)
            finally:
                if self.profile is not None:
                    self.profile.disable()
                self.cpu_seconds += time.process_time() - started

        self._undo.append((cls, name, original))
        setattr(cls, name, timed)

    def __enter__(self) -> DecisionClock:
        self._wrap(SchedulerCache, "snapshot")
        self._wrap(Session, "open")
        for action in _action_classes():
            self._wrap(action, "execute")
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in reversed(self._undo):
            setattr(cls, name, original)
        self._undo.clear()


def _action_classes() -> list[type]:
    """Every built-in action class that defines its own ``execute``."""
    return [cls for cls in BUILTIN_ACTIONS if "execute" in cls.__dict__]


async def in_process(path: Path, profile: cProfile.Profile | None = None) -> dict:
    started = time.perf_counter()
    objects = load([path])
    loaded = time.perf_counter() - started
    with DecisionClock(profile) as clock:
        result = await Simulation(objects).run()
    return {
        "load_s": loaded,
        "pods_bound": result.pods_bound,
        "decision_cpu_s": clock.cpu_seconds,
        "decision_s": result.decision_seconds,
        "write_s": result.write_seconds,
        "cycles": result.cycles,
        "sim_wall_s": result.wall_seconds,
        "busiest_cycle": max(result.cycle_figures, key=lambda f: f[1]),
    }


def whole_run(path: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MiB) and output size of the CLI run, as a user runs it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    stromboli = Path(sys.executable).with_name("stromboli")
    done = subprocess.run(
        [str(stromboli), "simulate", str(path), "--output", "json", "--no-progress"],
        check=True,
        stdout=subprocess.PIPE,
    )
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024, len(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--size", type=int, default=10)
    parser.add_argument("--scale", default="1000,5000,10000", help="node counts for cycle cost")
    parser.add_argument("--profile", type=int, default=0, help="print the N costliest functions")
    parser.add_argument("--profile-out", type=Path, help="also write the profile here (pstats)")
    parser.add_argument("--only-decisions", action="store_true")
    args = parser.parse_args()
    tune_gc()  # as the stromboli command does
    print(
        f"machine: {os.cpu_count()} cpus; python {sys.version.split()[0]}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    profile = cProfile.Profile(time.process_time) if args.profile else None
    with tempfile.TemporaryDirectory() as tmp:
        path = write_workload(Path(tmp) / "workload.yaml", args.nodes, args.jobs, args.size)
        figures = asyncio.run(in_process(path, profile))
        pods = figures["pods_bound"]
        print(
            f"{args.nodes} nodes, {args.jobs} gangs x {args.size} pods: {pods} pods placed in "
            f"{figures['cycles']:.0f} cycles"
        )
        print(f"  load (parse + validate)   {figures['load_s']:8.2f} s")
        rate = pods / figures["decision_s"]
        print(f"  scheduling decisions      {figures['decision_s']:8.2f} s  -> {rate:,.0f} pods/s")
        cpu = figures["decision_cpu_s"]
        print(f"    of which CPU time       {cpu:8.2f} s  -> {pods / cpu:,.0f} pods/s")
        print(f"  binding + status writes   {figures['write_s']:8.2f} s")
        if profile is not None:
            print("  profile of the decisions (CPU clock, cProfile's overhead included):")
            pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
            if args.profile_out is not None:
                profile.dump_stats(args.profile_out)
        if args.only_decisions:
            return
        wall, peak, size = whole_run(path)
        print(
            f"  stromboli simulate -o json: {wall:.2f} s wall, peak RSS {peak:,.0f} MiB, "
            f"{size / 1e6:.1f} MB output"
        )
        for count in [int(n) for n in args.scale.split(",") if n]:
            scaled = write_workload(Path(tmp) / f"scale-{count}.yaml", count, args.jobs, args.size)
            figures = asyncio.run(in_process(scaled))
            seconds, placed = figures["busiest_cycle"]
            print(
                f"  {count:>6} nodes: one cycle placing {placed} pods took {seconds * 1000:,.0f} ms"
            )


if __name__ == "__main__":
    main()

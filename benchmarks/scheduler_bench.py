"""Scheduler decision throughput and the cost of `stromboli simulate` at scale.

Default input: 5,000 nodes (32 cpu, 256Gi, 110 pods), 1,000 gang jobs of 10 pods in mixed
shapes, the default scheduler configuration. Prints:
- decision throughput: pods placed per second of scheduling time (snapshot + actions, loading
  and store writes excluded);
- the whole `stromboli simulate --output json` run, loading included, with its peak memory;
- the time of one cycle at 1,000, 5,000 and 10,000 nodes for the same jobs.

Run: .venv/bin/python benchmarks/scheduler_bench.py [--nodes N] [--jobs J] [--size S]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import write_workload

from stromboli.core.runtime import tune_gc
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load


async def in_process(path: Path) -> dict:
    started = time.perf_counter()
    objects = load([path])
    loaded = time.perf_counter() - started
    result = await Simulation(objects).run()
    return {
        "load_s": loaded,
        "pods_bound": result.pods_bound,
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
    args = parser.parse_args()
    tune_gc()  # as the stromboli command does
    print(f"machine: {os.cpu_count()} cpus; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_workload(Path(tmp) / "workload.yaml", args.nodes, args.jobs, args.size)
        figures = asyncio.run(in_process(path))
        pods = figures["pods_bound"]
        print(
            f"{args.nodes} nodes, {args.jobs} gangs x {args.size} pods: {pods} pods placed in "
            f"{figures['cycles']:.0f} cycles"
        )
        print(f"  load (parse + validate)   {figures['load_s']:8.2f} s")
        rate = pods / figures["decision_s"]
        print(f"  scheduling decisions      {figures['decision_s']:8.2f} s  -> {rate:,.0f} pods/s")
        print(f"  binding + status writes   {figures['write_s']:8.2f} s")
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

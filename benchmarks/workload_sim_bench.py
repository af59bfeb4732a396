"""The simulator's workload controllers at scale: Deployments and batch Jobs on many nodes.

Builds ``--nodes`` nodes of 32 cpu, ``--deployments`` Deployments of ``--replicas`` pods each
(1 cpu, running to the end) and ``--jobs`` batch Jobs of ``--completions`` completions,
``--parallelism`` at a time (1 cpu, 60 s each), all for ``schedulerName: volcano``; runs the
simulator and prints the wall time, the pods made and bound, the cycles and the virtual time,
and the wall time per pod made. Nothing is asserted: the figures are for the record.

Run: .venv/bin/python benchmarks/workload_sim_bench.py [--nodes 100] [--deployments 20]
     [--replicas 50] [--jobs 20] [--completions 100] [--parallelism 20]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import yaml

from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load


def manifest(args: argparse.Namespace) -> list[dict]:
    docs: list[dict] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"node-{i}"},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
        }
        for i in range(args.nodes)
    ]
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    for i in range(args.deployments):
        labels = {"app": f"web-{i}"}
        docs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"web-{i}"},
                "spec": {
                    "replicas": args.replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"schedulerName": "volcano", "containers": [container]},
                    },
                },
            }
        )
    for i in range(args.jobs):
        docs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"batch-{i}"},
                "spec": {
                    "completions": args.completions,
                    "parallelism": args.parallelism,
                    "template": {
                        "metadata": {"annotations": {"sim.stromboli.dev/runtime": "60s"}},
                        "spec": {
                            "schedulerName": "volcano",
                            "restartPolicy": "Never",
                            "containers": [container],
                        },
                    },
                },
            }
        )
    return docs


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "workloads.yaml"
        path.write_text(yaml.safe_dump_all(manifest(args)))
        started = time.perf_counter()
        result = await Simulation(load([path]), max_workload_pods=100_000).run()
        wall = time.perf_counter() - started
    made = len(result.lifecycle.times)
    print(
        f"nodes={args.nodes} deployments={args.deployments}x{args.replicas} "
        f"jobs={args.jobs}x{args.completions} (parallelism {args.parallelism})"
    )
    print(f"pods made={made} bound={result.pods_bound} cycles={result.cycles}")
    print(f"virtual time={result.end_time:.0f}s wall={wall:.2f}s")
    print(f"wall per pod made={wall / max(made, 1) * 1e3:.2f}ms")
    print(f"scheduler decisions={result.decision_seconds:.2f}s writes={result.write_seconds:.2f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--deployments", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--completions", type=int, default=100)
    parser.add_argument("--parallelism", type=int, default=20)
    asyncio.run(main(parser.parse_args()))

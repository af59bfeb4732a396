"""Decision throughput of GPU gang jobs under a 3-tier HyperNode tree.

Default input: 5,000 nodes of 8 GPUs (``nvidia.com/gpu``, 96 cpu, 768Gi), racks of 16 nodes
(tier 1), spines of 10 racks (tier 2), zones of 8 spines (tier 3); 1,000 gang PodGroups of 8
pods of one GPU each, each with ``networkTopology`` hard within tier 1 (a rack), so every gang
must find one rack that holds it whole. Volcano's default configuration with
``network-topology-aware``. Prints pods placed per second of scheduling time (snapshot and
actions; loading and store writes excluded) in wall time and in process CPU time of the same
stages (the machine is shared: CPU time is the steadier figure), the cycles, and the load
average. ``--profile FILE`` writes a cProfile of the simulation (print it with ``pstats``).

``--partitions P`` makes each job a partitioned one instead (a vcjob ``partitionPolicy`` as
the job controller writes it into the PodGroup's ``subGroupPolicy``): ``P`` partitions of
``--size`` pods, each partition with the ``networkTopology`` (within a rack), the job as a
whole with ``--job-topology`` (within a spine, or none); e.g. ``--jobs 250 --partitions 4``.
``--search exhaustive`` tries every HyperNode for each gang and partition, as allocate did
before the bounded search, for a before/after figure in the same run conditions.

Run: .venv/bin/python benchmarks/gpu_topology_bench.py [--nodes N] [--jobs J] [--size S]
[--topology hard|soft|none] [--partitions P] [--job-topology hard|soft|none]
[--search bounded|exhaustive] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import os
import sys
import tempfile
import time
from pathlib import Path

from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.builtins import BUILTIN_ACTIONS
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load

CONFIG = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""
RACK, SPINE, ZONE = 16, 10, 8


def workload(
    nodes: int,
    jobs: int,
    size: int,
    mode: str = "hard",
    partitions: int = 0,
    job_mode: str = "none",
) -> str:
    """The cluster and the jobs as YAML; with ``partitions``, partitioned jobs."""
    docs = tree(nodes)
    for j in range(jobs):
        if partitions:
            docs += partitioned_job(j, partitions, size, mode, job_mode)
        else:
            docs += gang_job(j, size, mode)
    return "\n---\n".join(docs) + "\n"


def tree(nodes: int) -> list[str]:
    """The 8-GPU nodes and the racks, spines and zones over them."""
    docs: list[str] = []
    for i in range(nodes):
        docs.append(
            f"""apiVersion: v1
kind: Node
metadata:
  name: gpu-{i}
  labels: {{bench.dev/rack: rack-{i // RACK}, nvidia.com/gpu.product: A100}}
status: {{allocatable: {{cpu: "96", memory: 768Gi, pods: "110", nvidia.com/gpu: "8"}}}}"""
        )
    racks = -(-nodes // RACK)
    for r in range(racks):
        docs.append(
            f"""apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {{name: rack-{r}}}
spec:
  tier: 1
  tierName: rack
  members:
  - {{type: Node, selector: {{labelMatch: {{matchLabels: {{bench.dev/rack: rack-{r}}}}}}}}}"""
        )
    spines = -(-racks // SPINE)
    for s in range(spines):
        members = "\n".join(
            f"  - {{type: HyperNode, selector: {{exactMatch: {{name: rack-{r}}}}}}}"
            for r in range(s * SPINE, min(racks, (s + 1) * SPINE))
        )
        docs.append(
            f"""apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {{name: spine-{s}}}
spec:
  tier: 2
  tierName: spine
  members:
{members}"""
        )
    for z in range(-(-spines // ZONE)):
        members = "\n".join(
            f"  - {{type: HyperNode, selector: {{exactMatch: {{name: spine-{s}}}}}}}"
            for s in range(z * ZONE, min(spines, (z + 1) * ZONE))
        )
        docs.append(
            f"""apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {{name: zone-{z}}}
spec:
  tier: 3
  tierName: zone
  members:
{members}"""
        )
    return docs


def gang_job(j: int, size: int, mode: str) -> list[str]:
    """One gang PodGroup of ``size`` one-GPU pods, hard or soft within a rack."""
    topology = f"\n  networkTopology: {{mode: {mode}, highestTierAllowed: 1}}"
    group = f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: train-{j}, namespace: default}}
spec:
  minMember: {size}
  queue: default""" + (topology if mode != "none" else "")
    return [group, *(gpu_pod(f"train-{j}-{p}", f"train-{j}") for p in range(size))]


def partitioned_job(j: int, partitions: int, size: int, mode: str, job_mode: str) -> list[str]:
    """One job of ``partitions`` partitions of ``size`` one-GPU pods, as the job controller
    writes a vcjob task with ``partitionPolicy``: one ``subGroupPolicy`` selecting the task's
    pods by ``volcano.sh/task-spec`` and splitting them by ``volcano.sh/partition-id``, every
    partition needed (``minPartitions`` = ``totalPartitions``)."""
    name = f"train-{j}"
    policy_topology = (
        f"\n    networkTopology: {{mode: {mode}, highestTierAllowed: 1}}" if mode != "none" else ""
    )
    job_topology = (
        f"\n  networkTopology: {{mode: {job_mode}, highestTierAllowed: 2}}"
        if job_mode != "none"
        else ""
    )
    group = (
        f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec:
  minMember: {partitions * size}
  minTaskMember: {{worker: {partitions * size}}}
  queue: default{job_topology}
  subGroupPolicy:
  - name: worker
    subGroupSize: {size}
    minSubGroups: {partitions}
    labelSelector: {{matchLabels: {{volcano.sh/task-spec: worker}}}}
    matchLabelKeys: [volcano.sh/partition-id]"""
        + policy_topology
    )
    pods = [
        gpu_pod(
            f"{name}-worker-{p}",
            name,
            labels={"volcano.sh/task-spec": "worker", "volcano.sh/partition-id": str(p // size)},
        )
        for p in range(partitions * size)
    ]
    return [group, *pods]


def gpu_pod(name: str, group: str, labels: dict[str, str] | None = None) -> str:
    """A pod asking for one whole GPU, 8 cpu and 64Gi."""
    annotations = f"scheduling.k8s.io/group-name: {group}"
    label_text = ""
    if labels:
        annotations += f", volcano.sh/task-spec: {labels['volcano.sh/task-spec']}"
        pairs = ", ".join(f"{key}: {value!r}" for key, value in labels.items())
        label_text = f"\n  labels: {{{pairs}}}"
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  annotations: {{{annotations}}}{label_text}
spec:
  schedulerName: volcano
  containers:
  - name: main
    image: trainer
    resources:
      requests: {{cpu: "8", memory: 64Gi, nvidia.com/gpu: "1"}}
      limits: {{nvidia.com/gpu: "1"}}"""


def count_cpu(cls: type, method: str, totals: list[float]) -> None:
    """Add the process CPU time of every call of ``cls.method`` to ``totals[0]``."""
    original = getattr(cls, method)

    @functools.wraps(original)
    def counted(*args: object, **kwargs: object) -> object:
        started = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            totals[0] += time.process_time() - started

    setattr(cls, method, counted)


def count_decision_cpu() -> list[float]:
    """CPU seconds of the stages the decision time covers: snapshot, session open, actions."""
    totals = [0.0]
    count_cpu(SchedulerCache, "snapshot", totals)
    count_cpu(Session, "open", totals)
    for action in BUILTIN_ACTIONS:
        count_cpu(action, "execute", totals)
    return totals


async def run(path: Path, conf: Path, profile: str | None = None) -> dict:
    started = time.perf_counter()
    objects = load([path])
    loaded = time.perf_counter() - started
    cpu = count_decision_cpu()
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    result = await Simulation(objects, scheduler_conf=conf).run()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    return {
        "decision_cpu_s": cpu[0],
        "load_s": loaded,
        "pods_bound": result.pods_bound,
        "decision_s": result.decision_seconds,
        "cycles": result.cycles,
        "busiest_cycle": max(result.cycle_figures, key=lambda f: f[1]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument(
        "--topology",
        choices=("hard", "soft", "none"),
        default="hard",
        help="the gangs' networkTopology mode (none: no networkTopology, for comparison)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="partitioned jobs: this many partitions of --size pods each (0: plain gangs)",
    )
    parser.add_argument(
        "--job-topology",
        choices=("hard", "soft", "none"),
        default="none",
        help="a partitioned job's own networkTopology mode, within a spine (tier 2)",
    )
    parser.add_argument(
        "--search",
        choices=("bounded", "exhaustive"),
        default="bounded",
        help="exhaustive: a trial in every HyperNode of a tier, as before the bounded search",
    )
    parser.add_argument("--profile", help="write a cProfile of the simulation to this file")
    args = parser.parse_args()
    AllocateAction.exhaustive_search = args.search == "exhaustive"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gpu-topology.yaml"
        path.write_text(
            workload(
                args.nodes, args.jobs, args.size, args.topology, args.partitions, args.job_topology
            )
        )
        conf = Path(folder) / "conf.yaml"
        conf.write_text(CONFIG)
        figures = asyncio.run(run(path, conf, args.profile))
    bound, seconds = figures["pods_bound"], figures["decision_s"]
    cpu = figures["decision_cpu_s"]
    load = os.getloadavg()
    if args.partitions:
        shape = (
            f"{args.jobs} jobs of {args.partitions} partitions x {args.size} "
            f"(partition networkTopology {args.topology} tier 1, job {args.job_topology} "
            f"tier 2)"
        )
    else:
        shape = f"{args.jobs} gangs of {args.size} (networkTopology {args.topology})"
    print(
        f"{args.nodes} nodes x 8 GPUs, 3-tier HyperNodes, {shape}, {args.search} search: "
        f"{bound} pods bound in {figures['cycles']} cycles"
    )
    print(
        f"decision throughput: {bound / seconds if seconds else 0:.0f} pods/s "
        f"({seconds:.2f} s scheduling); {bound / cpu if cpu else 0:.0f} pods per CPU second "
        f"({cpu:.2f} s CPU); loading {figures['load_s']:.1f} s; busiest cycle "
        f"{figures['busiest_cycle'][0]:.2f} s for {figures['busiest_cycle'][1]} pods; "
        f"load average {load[0]:.2f} {load[1]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The openb benchmark: GPU allocation of the real scheduler on Alibaba's GPU-sharing traces,
beside the published results of FGD (Weng et al., *Beware of Fragmentation*, USENIX ATC 2023).

Reads ``../shared/traces/openb/`` (``--traces``) where it lies; nothing of it is copied here.
The protocol is the paper's artifact's (its ``generate_run_scripts.py`` and simulator): the
trace's pods shuffled (``--seed``; ``--trace-order`` keeps the trace's order, as the traces'
README describes), then tuned to ``--tune`` (1.3) × the cluster's GPU capacity of demand —
pods re-sampled at random and appended, or, for a trace asking for more (multigpu50), pods
removed at random; pods arrive one at a time; nothing finishes; a pod that fits nowhere fails
and is not retried. Each pod is its own PodGroup, created in arrival order, and one session of
the real scheduler (``allocate`` over the configured plugins) places them in that order, so
every pod sees the placements of all before it. The GPU model of a node is its
``nvidia.com/gpu.product`` label and the type of the cards it registers in
``volcano.sh/node-vgpu-register``; a pod's ``gpu_spec`` is its ``nvidia.com/use-gputype``; a
shared pod is one vGPU with ``gpu_milli`` / 10 as both ``volcano.sh/vgpu-memory-percentage``
and ``volcano.sh/vgpu-cores``; a pod of whole GPUs asks for that many whole vGPUs.

Every node is scored (Volcano's ``--percentage-nodes-to-find=100``), as the paper's simulator
does. Prints, per trace, the GPUs allocated (% of capacity) at every 10% of arrived demand for
our ``fragmentation`` policy, ``deviceshare`` binpack and spread, plain ``binpack``, beside the
paper's six policies (mean over its seeds, from ``fgd_expected_allocation.csv``), then the
allocation at 100% arrived per seed with its mean and range beside FGD's over its seeds, and
the replay times (process CPU seconds, wall seconds) with the load average. ``--seeds 10``
replays the paper's seeds (42-51); every policy sees the same arrival sequence per seed.

Run: .venv/bin/python benchmarks/fragmentation_bench.py [--trace default] [--policy ours]
[--seeds 10]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from stromboli.core.api import constants as k
from stromboli.core.clock import EPOCH
from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.conf import parse_config
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.scheduler import builtin_queue
from stromboli.core.scheduler.util import placement

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fgd_reference import replay_reference

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb"
NODE_FILE = "openb_node_list_gpu_node.csv"
EXPECTED_FILE = "fgd_expected_allocation.csv"
WORKLOADS = {
    "default": "openb_pod_list_default",
    "gpushare100": "openb_pod_list_gpushare100",
    "multigpu50": "openb_pod_list_multigpu50",
}
#: Card memory (MiB) registered per GPU model; any value divisible by 100 keeps percentages
#: exact. The models G2 and G3 are anonymised in the trace.
MODEL_MEMORY = {"V100M32": 32000, "A10": 24000, "T4": 15000}
DEFAULT_MEMORY = 16000
#: How many pods may share one card (``count`` in the registration).
CARD_SLOTS = 16
POINTS = tuple(range(10, 101, 10))

_BASE = """\
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
"""
_VGPU = '"deviceshare.VGPUEnable": true'
POLICIES = {
    "ours": _BASE
    + f"""  - name: deviceshare
    arguments: {{{_VGPU}}}
  - name: fragmentation
""",
    "ours-exact": _BASE
    + f"""  - name: deviceshare
    arguments: {{{_VGPU}}}
  - name: fragmentation
    arguments: {{fragmentation.resolution: 0}}
""",
    "ours-demand": _BASE
    + f"""  - name: deviceshare
    arguments: {{{_VGPU}}}
  - name: fragmentation
    arguments: {{fragmentation.mixWeight: demand}}
""",
    "deviceshare-binpack": _BASE
    + f"""  - name: deviceshare
    arguments: {{{_VGPU}, "deviceshare.SchedulePolicy": binpack, "deviceshare.ScheduleWeight": 1}}
""",
    "deviceshare-spread": _BASE
    + f"""  - name: deviceshare
    arguments: {{{_VGPU}, "deviceshare.SchedulePolicy": spread, "deviceshare.ScheduleWeight": 1}}
""",
    "binpack": _BASE
    + f"""  - name: deviceshare
    arguments: {{{_VGPU}}}
  - name: binpack
""",
}
#: The reference FGD placer outside the scheduler (``fgd_reference.py``), by its scoring.
REFERENCES = {"fgd-reference": "int/fit", "fgd-reference-exact": "exact/fit"}


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: str = ""

    @property
    def gpu_demand(self) -> float:
        """GPUs the pod asks for (a shared pod: its fraction of one)."""
        if self.num_gpu == 1:
            return self.gpu_milli / 1000
        return float(self.num_gpu)


def read_nodes(path: Path) -> list[TraceNode]:
    with path.open(newline="") as handle:
        return [
            TraceNode(
                row["sn"],
                int(row["cpu_milli"]),
                int(row["memory_mib"]),
                int(row["gpu"]),
                row["model"],
            )
            for row in csv.DictReader(handle)
        ]


def read_pods(path: Path) -> list[TracePod]:
    with path.open(newline="") as handle:
        return [
            TracePod(
                row["name"],
                int(row["cpu_milli"]),
                int(row["memory_mib"]),
                int(row["num_gpu"]),
                int(row["gpu_milli"]),
                (row.get("gpu_spec") or "").strip(),
            )
            for row in csv.DictReader(handle)
        ]


def arrivals(
    pods: Sequence[TracePod], capacity: float, seed: int, tune: float, shuffle: bool = True
) -> list[TracePod]:
    """The arrival sequence: the trace (shuffled with ``seed``, as the paper's artifact runs
    it with ``--shuffle-pod=true``; in trace order when not ``shuffle``), then tuned to
    ``tune`` × ``capacity`` of GPU demand: pods re-sampled at random and appended while the
    next one still fits under it, or, for a trace asking for more, pods removed at random
    until it no longer does."""
    target = tune * capacity
    rng = random.Random(seed)
    out = sorted(pods, key=lambda p: p.name) if shuffle else list(pods)
    if shuffle:
        rng.shuffle(out)
    demand = sum(p.gpu_demand for p in out)
    while demand > target + 1e-9 and out:
        demand -= out.pop(rng.randrange(len(out))).gpu_demand
    while pods:
        extra = rng.choice(pods)
        if demand + extra.gpu_demand > target + 1e-9:
            break
        out.append(extra)
        demand += extra.gpu_demand
    return out


def node_object(node: TraceNode) -> dict:
    memory = MODEL_MEMORY.get(node.model, DEFAULT_MEMORY)
    cards = [
        {
            "id": f"{node.name}-gpu{i}",
            "index": i,
            "count": CARD_SLOTS,
            "devmem": memory,
            "devcore": 100,
            "type": node.model,
            "numa": 0,
            "mode": "hami-core",
            "health": True,
        }
        for i in range(node.gpus)
    ]
    allocatable = {
        "cpu": f"{node.cpu_milli}m",
        "memory": f"{node.memory_mib}Mi",
        "pods": "1000",
        "volcano.sh/vgpu-number": str(node.gpus * CARD_SLOTS),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {"kubernetes.io/hostname": node.name, "nvidia.com/gpu.product": node.model},
            "annotations": {k.NODE_VGPU_REGISTER_KEY: json.dumps(cards)},
        },
        "spec": {},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def _created(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"1970-{1 + days // 28:02d}-{1 + days % 28:02d}T{hours:02d}:{minutes:02d}:{secs:02d}Z"


def pod_objects(position: int, pod: TracePod) -> tuple[dict, dict]:
    """The PodGroup and pod of the ``position``-th arrival (names stay unique when a trace
    pod is re-sampled)."""
    name = f"a{position:06d}-{pod.name}"
    created = _created(position)
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.num_gpu == 1 and pod.gpu_milli < 1000:
        share = str(max(1, pod.gpu_milli // 10))
        requests["volcano.sh/vgpu-number"] = "1"
        requests["volcano.sh/vgpu-memory-percentage"] = share
        requests["volcano.sh/vgpu-cores"] = share
    elif pod.num_gpu:
        requests["volcano.sh/vgpu-number"] = str(pod.num_gpu)
        requests["volcano.sh/vgpu-memory-percentage"] = "100"
        requests["volcano.sh/vgpu-cores"] = "100"
    notes = {k.GROUP_NAME_ANNOTATION: name}
    if pod.gpu_spec:
        notes[k.USE_GPU_TYPE_KEY] = ",".join(m for m in pod.gpu_spec.split("|") if m)
    group = {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"minMember": 1, "queue": "default"},
        "status": {"phase": "Inqueue"},
    }
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "annotations": notes,
        },
        "spec": {
            "schedulerName": k.DEFAULT_SCHEDULER_NAME,
            "containers": [{"name": "main", "image": "trace", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Pending"},
    }
    return group, obj


@dataclass(slots=True)
class Replay:
    placed: list[bool]
    #: Wall seconds of the session (open and allocate), and the process's CPU seconds in it
    #: (the figure to compare on a shared machine).
    seconds: float
    build_seconds: float
    cpu_seconds: float = 0.0


def replay(nodes: Sequence[TraceNode], sequence: Sequence[TracePod], config: str) -> Replay:
    """Place ``sequence`` in order with one session of the scheduler under ``config``;
    which arrivals were placed."""
    register_builtins()
    # The paper's simulator scores every node; the module setting is given back afterwards,
    # so a caller in the same process (the tests) keeps Volcano's adaptive default.
    adaptive = placement.PERCENTAGE_NODES_TO_FIND
    placement.PERCENTAGE_NODES_TO_FIND = 100
    try:
        return _replay(nodes, sequence, config)
    finally:
        placement.PERCENTAGE_NODES_TO_FIND = adaptive


def _replay(nodes: Sequence[TraceNode], sequence: Sequence[TracePod], config: str) -> Replay:
    started = time.perf_counter()
    cache = SchedulerCache()
    for name in (k.ROOT_QUEUE, k.DEFAULT_QUEUE):
        queue = builtin_queue(name)
        cache.apply((queue["apiVersion"], queue["kind"]), "ADDED", queue)
    for node in nodes:
        cache.apply(("v1", "Node"), "ADDED", node_object(node))
    names = []
    for position, pod in enumerate(sequence):
        group, obj = pod_objects(position, pod)
        cache.apply((group["apiVersion"], "PodGroup"), "ADDED", group)
        cache.apply(("v1", "Pod"), "ADDED", obj)
        names.append(obj["metadata"]["name"])
    ssn = Session(cache.snapshot(), parse_config(config, "<fragmentation_bench>"), EPOCH)
    built, cpu = time.perf_counter(), time.process_time()
    ssn.open()
    AllocateAction().execute(ssn)
    done, cpu = time.perf_counter(), time.process_time() - cpu
    status = {}
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            status[task.name] = task.status in ALLOCATED_STATUS and bool(task.node_name)
    ssn.close()
    return Replay([status.get(n, False) for n in names], done - built, built - started, cpu)


def curve(
    sequence: Sequence[TracePod], placed: Sequence[bool], capacity: float, points: Iterable[int]
) -> dict[int, float]:
    """GPUs allocated (% of capacity) once the arrived demand reaches each point (%)."""
    out: dict[int, float] = {}
    wanted = sorted(points)
    arrived = allocated = 0.0
    at = 0
    for pod, ok in zip(sequence, placed, strict=True):
        if at < len(wanted) and arrived >= wanted[at] / 100 * capacity:
            out[wanted[at]] = 100 * allocated / capacity
            at += 1
        arrived += pod.gpu_demand
        if ok:
            allocated += pod.gpu_demand
    while at < len(wanted):
        out[wanted[at]] = 100 * allocated / capacity
        at += 1
    return out


def expected(path: Path, workload: str, points: Iterable[int]) -> dict[str, dict[int, float]]:
    """The paper's mean allocation per policy at each point, over its seeds."""
    sums: dict[str, dict[int, float]] = {}
    runs: dict[str, int] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["workload"] != workload:
                continue
            policy = row["sc_policy"].split("-", 1)[-1]
            runs[policy] = runs.get(policy, 0) + 1
            into = sums.setdefault(policy, {})
            for point in points:
                into[point] = into.get(point, 0.0) + float(row[str(point)])
    return {p: {x: v / runs[p] for x, v in into.items()} for p, into in sums.items()}


@dataclass(slots=True)
class SeedRuns:
    """One policy's curves over several seeds: the mean at each point, and per seed the value
    at 100% arrived (the paper reports its mean over seeds 42-51)."""

    curves: list[dict[int, float]]
    replays: list[Replay]

    def mean(self, point: int) -> float:
        return sum(c[point] for c in self.curves) / len(self.curves)

    def at(self, point: int) -> list[float]:
        return [c[point] for c in self.curves]


def run_seeds(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    policies: Sequence[str],
    seeds: Sequence[int],
    tune: float,
    shuffle: bool = True,
) -> dict[str, SeedRuns]:
    """Each policy replayed on the arrival sequence of each seed (the same sequences for all
    policies, so that they compare pod for pod)."""
    capacity = float(sum(n.gpus for n in nodes))
    out = {p: SeedRuns([], []) for p in policies}
    for seed in seeds:
        sequence = arrivals(pods, capacity, seed, tune, shuffle=shuffle)
        for policy in policies:
            if policy in REFERENCES:
                began, cpu = time.perf_counter(), time.process_time()
                placed = replay_reference(nodes, pods, sequence, REFERENCES[policy], seed)
                result = Replay(placed, time.perf_counter() - began, 0.0, time.process_time() - cpu)
            else:
                result = replay(nodes, sequence, POLICIES[policy])
            out[policy].curves.append(curve(sequence, result.placed, capacity, POINTS))
            out[policy].replays.append(result)
    return out


def paper_seeds(path: Path, workload: str, policy: str = "FGD", point: int = 100) -> list[float]:
    """The paper's value at ``point`` for each of its seeds, for one policy."""
    with path.open(newline="") as handle:
        return [
            float(row[str(point)])
            for row in csv.DictReader(handle)
            if row["workload"] == workload and row["sc_policy"].split("-", 1)[-1] == policy
        ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--trace", action="append", choices=sorted(WORKLOADS))
    parser.add_argument("--policy", action="append", choices=sorted([*POLICIES, *REFERENCES]))
    parser.add_argument("--seed", type=int, default=42, help="the first seed")
    parser.add_argument(
        "--seeds", type=int, default=1, help="how many seeds from --seed (the paper: 10 from 42)"
    )
    parser.add_argument("--tune", type=float, default=1.3)
    parser.add_argument("--trace-order", action="store_true", help="do not shuffle the trace")
    args = parser.parse_args(argv)
    nodes = read_nodes(args.traces / NODE_FILE)
    capacity = float(sum(n.gpus for n in nodes))
    seeds = list(range(args.seed, args.seed + max(1, args.seeds)))
    order = "trace order" if args.trace_order else "shuffled"
    print(
        f"openb: {len(nodes)} nodes, {capacity:.0f} GPUs; seeds {seeds[0]}-{seeds[-1]}, "
        f"tune {args.tune}, pods {order}"
    )
    for trace in args.trace or list(WORKLOADS):
        workload = WORKLOADS[trace]
        pods = read_pods(args.traces / f"{workload}.csv")
        paper = expected(args.traces / EXPECTED_FILE, workload, POINTS)
        runs = run_seeds(
            nodes, pods, args.policy or list(POLICIES), seeds, args.tune, not args.trace_order
        )
        arrived = len(arrivals(pods, capacity, seeds[0], args.tune, not args.trace_order))
        print(
            f"\n{trace}: {arrived} arrivals (seed {seeds[0]}); GPUs allocated (% of capacity) by "
            f"arrived demand, mean over {len(seeds)} seed(s)"
        )
        columns = [*runs, *paper]
        print("arrived  " + " ".join(f"{c[:13]:>13}" for c in columns))
        for point in POINTS:
            cells = [runs[c].mean(point) for c in runs] + [paper[c][point] for c in paper]
            print(f"{point:>6}%  " + " ".join(f"{v:>13.1f}" for v in cells))
        fgd = paper_seeds(args.traces / EXPECTED_FILE, workload)
        if fgd:
            print(
                f"at 100% arrived, mean [range] over seeds; FGD {sum(fgd) / len(fgd):.2f} "
                f"[{min(fgd):.2f}-{max(fgd):.2f}] over its {len(fgd)} seeds:"
            )
            for policy, run in runs.items():
                values = run.at(100)
                mean = sum(values) / len(values)
                print(
                    f"  {policy:<20} {mean:6.2f} [{min(values):.2f}-{max(values):.2f}] "
                    f"({mean - sum(fgd) / len(fgd):+.2f} vs FGD); per seed "
                    + " ".join(f"{v:.2f}" for v in values)
                )
        load = os.getloadavg()
        for policy, run in runs.items():
            cpu = [r.cpu_seconds for r in run.replays]
            wall = [r.seconds for r in run.replays]
            print(
                f"  {policy:<20} replay CPU {sum(cpu) / len(cpu):.1f} s mean, {max(cpu):.1f} s "
                f"max; wall {sum(wall) / len(wall):.1f} s mean (+{run.replays[0].build_seconds:.1f}"
                f" s to build the cache); load average {load[0]:.2f} {load[1]:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

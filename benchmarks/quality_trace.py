"""Workload traces for the scheduling quality benchmark, and their simulator objects.

A trace is a list of gang jobs (submit time, pods, runtime, queue) plus the cluster and
queues it runs on. Every pod asks for one GPU, so a job's size in pods is its GPU count and
GPUs are the resource queues compete for. Two sources:

* ``synthetic_trace``: a fixed-seed mix of 1..64-pod jobs arriving over two hours on 128
  GPUs, three weighted queues, one of them capped;
* ``csv_trace``: a small CSV derived from a public GPU cluster trace (see
  ``traces/README.md``), one row per job.

Jobs become Volcano ``Job`` objects (vcjobs) with ``minAvailable`` equal to their size, so the
vcjob controller creates the pods once the job is admitted and recreates evicted ones, as on a
cluster.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass
from pathlib import Path

GPU = "nvidia.com/gpu"
#: What one pod asks for besides its GPU; a node has eight times that, so GPUs bind first.
POD_CPU, POD_MEMORY_GI = 4, 32
NODE_GPUS = 8
MAX_PODS = 64
CSV_COLUMNS = ("job", "queue", "submit_s", "gpus", "duration_s")


@dataclass(frozen=True, slots=True)
class TraceJob:
    name: str
    queue: str
    submit: float
    pods: int
    duration: float


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    weight: int
    #: Most GPUs the queue may hold (Queue ``spec.capability``); None for no limit.
    capability_gpus: int | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    nodes: int
    queues: tuple[QueueSpec, ...]
    jobs: tuple[TraceJob, ...]
    source: str = "synthetic"

    @property
    def gpus(self) -> int:
        return self.nodes * NODE_GPUS


#: Job size classes drawn by the synthetic trace: (probability, smallest, largest) pods.
SIZE_MIX = ((0.40, 1, 1), (0.35, 2, 8), (0.18, 9, 32), (0.07, 33, 64))
SYNTHETIC_QUEUES = (
    QueueSpec("production", weight=4),
    QueueSpec("research", weight=2),
    QueueSpec("sandbox", weight=1, capability_gpus=16),
)


def synthetic_trace(
    jobs: int = 200, seed: int = 7, nodes: int = 16, window: float = 2 * 3600.0
) -> Trace:
    """``jobs`` jobs arriving as a Poisson stream over ``window`` seconds.

    Sizes follow ``SIZE_MIX``, runtimes are log-normal around ten minutes (one minute to an
    hour), and queues are drawn 45/35/20% (production, research, sandbox); the sandbox queue
    only sends jobs of up to 8 pods, which its 16-GPU cap can hold. With the defaults the
    offered load is about 1.2 times the cluster, so queues compete and large gangs wait.
    """
    rng = random.Random(seed)
    out: list[TraceJob] = []
    now = 0.0
    for i in range(jobs):
        now += rng.expovariate(jobs / window)
        queue = rng.choices(["production", "research", "sandbox"], weights=[45, 35, 20])[0]
        mix = SIZE_MIX[:2] if queue == "sandbox" else SIZE_MIX
        _, low, high = rng.choices(mix, weights=[m[0] for m in mix])[0]
        pods = rng.randint(low, high)
        duration = min(3600.0, max(60.0, rng.lognormvariate(math.log(600.0), 0.8)))
        out.append(TraceJob(f"job-{i:04d}", queue, round(now), pods, round(duration)))
    return Trace("synthetic", nodes, SYNTHETIC_QUEUES, tuple(out))


def csv_trace(path: str | Path, nodes: int, name: str | None = None) -> Trace:
    """A trace from a CSV with columns ``job,queue,submit_s,gpus,duration_s``.

    Lines starting with ``#`` are comments (the source and derivation). Every queue weighs 1:
    the public traces do not give the virtual clusters' quotas.
    """
    path = Path(path)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    jobs: list[TraceJob] = []
    for number, row in enumerate(rows, start=1):
        where = f"{path} job {row.get('job') or number}"
        missing = [c for c in CSV_COLUMNS if not row.get(c)]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        try:
            submit, gpus, duration = (
                float(row["submit_s"]),
                int(row["gpus"]),
                float(row["duration_s"]),
            )
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if submit < 0 or duration <= 0 or not 1 <= gpus <= MAX_PODS:
            raise ValueError(
                f"{where}: needs submit_s >= 0, duration_s > 0 and gpus in 1..{MAX_PODS}"
                f" (got {submit:g}, {duration:g}, {gpus})"
            )
        jobs.append(TraceJob(row["job"], row["queue"], submit, gpus, duration))
    queues = tuple(QueueSpec(q, weight=1) for q in sorted({j.queue for j in jobs}))
    return Trace(name or path.stem, nodes, queues, tuple(jobs), source=str(path.name))


# -- simulator objects ---------------------------------------------------------------------


def _node(i: int) -> dict:
    name = f"gpu-node-{i:03d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {
                "cpu": str(POD_CPU * NODE_GPUS),
                "memory": f"{POD_MEMORY_GI * NODE_GPUS}Gi",
                GPU: str(NODE_GPUS),
                "pods": "110",
            }
        },
    }


def _queue(spec: QueueSpec) -> dict:
    queue: dict = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": spec.name},
        "spec": {"weight": spec.weight, "reclaimable": True},
    }
    if spec.capability_gpus is not None:
        queue["spec"]["capability"] = {GPU: str(spec.capability_gpus)}
    return queue


def _vcjob(job: TraceJob) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": "default",
            "annotations": {"sim.stromboli.dev/submit-at": f"{job.submit:g}s"},
        },
        "spec": {
            "schedulerName": "volcano",
            "queue": job.queue,
            "minAvailable": job.pods,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": job.pods,
                    "template": {
                        "metadata": {
                            "annotations": {"sim.stromboli.dev/runtime": f"{job.duration:g}s"}
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "trainer:1",
                                    "resources": {
                                        "requests": {
                                            "cpu": str(POD_CPU),
                                            "memory": f"{POD_MEMORY_GI}Gi",
                                            GPU: "1",
                                        }
                                    },
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def documents(trace: Trace) -> list[dict]:
    """The trace as simulator input: nodes, queues, then one vcjob per job."""
    return (
        [_node(i) for i in range(trace.nodes)]
        + [_queue(q) for q in trace.queues]
        + [_vcjob(j) for j in trace.jobs]
    )

"""Samples of the simulated cluster over time, for the report and its charts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from stromboli.core.scheduler.api.resource import CPU, MEMORY, Resource
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.simulate.gpus import GpuSample, sampler_for


@dataclass(slots=True)
class Sample:
    time: float
    #: Fraction of allocatable cpu and memory in use (0..1).
    cpu: float
    memory: float
    pending_pods: int
    running_pods: int
    #: Queue name → (share of the cluster's dominant resource it holds, share it deserves;
    #: NaN when no queue plugin of the configuration computes a deserved share, e.g. drf).
    queues: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: The cluster's GPUs (None while no node has any, or when not sampled).
    gpu: GpuSample | None = None


def _fraction(used: float, total: float) -> float:
    return used / total if total > 0 else 0.0


def _dominant(amount: Resource, total: Resource) -> float:
    return max(
        (_fraction(amount.get(name), total.get(name)) for name in (CPU, MEMORY)), default=0.0
    )


def sample(now: float, scheduler: Scheduler, gpus: bool = True) -> Sample:
    """The cluster now; with ``gpus``, its GPUs too (through the scheduler's GPU sampler,
    which keeps the workload mix of the run)."""
    cache = scheduler.cache
    nodes = cache.nodes
    total = nodes.allocatable.sum(axis=0) if len(nodes) else None
    used = nodes.used.sum(axis=0) if len(nodes) else None
    pending = running = 0
    for record in cache.pods.values():
        status = record.task.status
        if record.job_id is None:
            continue
        if status == TaskStatus.PENDING:
            pending += 1
        elif status & (TaskStatus.RUNNING | TaskStatus.BOUND):
            running += 1
    queues: dict[str, tuple[float, float]] = {}
    session = scheduler.last_session
    if session is not None and total is not None:
        cluster = session.total_resource
        for name, figures in session.queue_figures.items():
            allocated = figures.get("allocated")
            deserved = figures.get("deserved")
            if isinstance(allocated, Resource) and isinstance(deserved, Resource):
                queues[name] = (_dominant(allocated, cluster), _dominant(deserved, cluster))
        # Queues no plugin reported on (no proportion or capacity): what their jobs hold.
        held: dict[str, Resource] = {}
        for job in session.jobs.values():
            if job.queue not in queues:
                held.setdefault(job.queue, Resource()).add(job.allocated)
        for name, allocated in held.items():
            queues[name] = (_dominant(allocated, cluster), math.nan)
    return Sample(
        time=now,
        cpu=_fraction(float(used[0]), float(total[0]))
        if total is not None and used is not None
        else 0.0,
        memory=_fraction(float(used[1]), float(total[1]))
        if total is not None and used is not None
        else 0.0,
        pending_pods=pending,
        running_pods=running,
        queues=queues,
        gpu=sampler_for(scheduler).sample(now, scheduler) if gpus else None,
    )

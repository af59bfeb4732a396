"""proportion: queues share the cluster by weight.

Each queue's *deserved* share is found by weighted water-filling of the cluster total over the
queues that have work: every round hands out what is left in proportion to weight, a queue
stops growing once it reaches its request or its real capability (capability, less what other
queues are guaranteed), and never falls below its guarantee. Queues are then ordered by how
much of their deserved share they use, and a queue may not allocate past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.resource import EPSILON, PODS, Resource
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS, TaskStatus, members
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import (
    PERMIT,
    REJECT,
    EventHandler,
    Session,
)
from stromboli.core.scheduler.util.inqueue import (
    format_resource_names,
    short_resources,
    without_gated,
)

_ALLOCATED = members(ALLOCATED_STATUS)

#: Volcano's enqueue refusal, posted as a Normal ``Unschedulable`` event on the PodGroup.
QUOTA_MESSAGE = "queue resource quota insufficient"


@dataclass(slots=True)
class QueueAttr:
    name: str
    weight: int
    priority: int
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    deserved: Resource = field(default_factory=Resource)
    guarantee: Resource = field(default_factory=Resource)
    capability: Resource | None = None
    real_capability: Resource = field(default_factory=Resource)
    share: float = 0.0


def share_of(allocated: Resource, deserved: Resource) -> float:
    """Largest fraction of the deserved amount in use; using what one deserves none of is 1."""
    share = 0.0
    for name in set(allocated.amounts) | set(deserved.amounts):
        if name == PODS:
            continue
        used, fair = allocated.get(name), deserved.get(name)
        if fair > EPSILON:
            share = max(share, used / fair)
        elif used > EPSILON:
            share = max(share, 1.0)
    return share


def capped(value: Resource, limit: Resource) -> Resource:
    """Per-name minimum where ``limit`` names the resource; other names pass unchanged."""
    return Resource(
        {n: min(v, limit.amounts[n]) if n in limit.amounts else v for n, v in value.amounts.items()}
    )


def water_fill(attrs: list[QueueAttr], total: Resource) -> None:
    """Set ``deserved`` on every attr by weighted water-filling of ``total``."""
    remaining = total.clone()
    remaining.amounts.pop(PODS, None)
    met: set[str] = set()
    for attr in attrs:
        attr.deserved = Resource()
    while True:
        active = [a for a in attrs if a.name not in met]
        total_weight = sum(a.weight for a in active)
        if not active or total_weight <= 0:
            break
        before = remaining.clone()
        handed_out = Resource()
        for attr in active:
            old = attr.deserved.clone()
            grown = attr.deserved + remaining.clone().multi(attr.weight / total_weight)
            deserved = capped(grown, attr.real_capability)
            if not grown.less_equal(attr.real_capability, missing_is_infinite=True):
                met.add(attr.name)
            deserved = capped(deserved, attr.request)
            # Names the queue does not request at all deserve nothing.
            deserved = Resource({n: v for n, v in deserved.amounts.items() if attr.request.get(n)})
            if attr.request.less_equal(deserved, missing_is_infinite=False):
                met.add(attr.name)
            deserved = deserved.max_with(attr.guarantee)
            attr.deserved = deserved
            for name in set(deserved.amounts) | set(old.amounts):
                delta = deserved.get(name) - old.get(name)
                handed_out.amounts[name] = handed_out.get(name) + delta
        for name, delta in handed_out.amounts.items():
            remaining.amounts[name] = max(0.0, remaining.get(name) - delta)
        if remaining.is_empty() or remaining == before:
            break


class ProportionPlugin(Plugin):
    name = "proportion"

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource
        total_guarantee = Resource()
        for queue in ssn.queues.values():
            if queue.guarantee is not None:
                total_guarantee.add(queue.guarantee)
        attrs: dict[str, QueueAttr] = {}
        self.attrs = attrs
        ssn.queue_accounts[self.name] = attrs
        for job in ssn.jobs.values():
            job_queue = ssn.queues.get(job.queue)
            if job_queue is None:
                continue
            attr = attrs.get(job_queue.name)
            if attr is None:
                attr = attrs[job_queue.name] = self._new_attr(job_queue, total, total_guarantee)
            for status, bucket in job.by_status.items():
                # The status is tested once per bucket, not per task: flag arithmetic is slow,
                # and this loop sees every task of the cluster each cycle.
                if status in _ALLOCATED:
                    for task in bucket.values():
                        attr.allocated.add(task.resreq)
                        attr.request.add(task.resreq)
                elif status == TaskStatus.PENDING:
                    for task in bucket.values():
                        attr.request.add(task.resreq)
            if job.min_resources is not None:
                if job.phase == "Inqueue":
                    attr.inqueue.add(without_gated(job, job.min_resources))
                elif job.phase == "Running":
                    attr.inqueue.add(without_gated(job, job.min_resources - job.allocated))
                    attr.elastic.add(job.allocated - job.min_resources)
        water_fill(list(attrs.values()), total)
        for attr in attrs.values():
            attr.share = share_of(attr.allocated, attr.deserved)
            self._publish(ssn, attr)

        def queue_order(left: QueueInfo, right: QueueInfo) -> int:
            if left.priority != right.priority:
                return -1 if left.priority > right.priority else 1
            ls = attrs[left.name].share if left.name in attrs else 0.0
            rs = attrs[right.name].share if right.name in attrs else 0.0
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def overused(queue: QueueInfo) -> bool:
            attr = attrs.get(queue.name)
            if attr is None:
                return False
            return attr.deserved.less_equal(attr.allocated)

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            if not queue.is_open():
                return False
            attr = attrs.get(queue.name)
            if attr is None:
                return True
            # What the queue would hold with the task, resource by resource, without building
            # that sum as a Resource: asked once per task placed.
            allocated, deserved = attr.allocated, attr.deserved
            for name, v in task.resreq.amounts.items():
                if (
                    v > EPSILON
                    and name != PODS
                    and (allocated.get(name) + v > deserved.get(name) + EPSILON)
                ):
                    return False
            return True

        def job_enqueueable(job: JobInfo) -> int:
            queue = ssn.queues.get(job.queue)
            if queue is None or not queue.is_open():
                return REJECT
            if job.min_resources is None:
                return PERMIT
            attr = attrs.get(queue.name) or self._new_attr(queue, total, total_guarantee)
            wanted = job.min_resources + attr.allocated + attr.inqueue
            wanted.sub(attr.elastic)
            short = short_resources(wanted, attr.real_capability, job.min_resources)
            if not short:
                return PERMIT
            message = format_resource_names(QUOTA_MESSAGE, "insufficient", short)
            ssn.job_events.append((job.uid, "Normal", "Unschedulable", message))
            return REJECT

        def job_enqueued(job: JobInfo) -> None:
            attr = attrs.get(job.queue)
            if attr is not None and job.min_resources is not None:
                attr.inqueue.add(job.min_resources)

        def on_allocate(task: TaskInfo) -> None:
            attr = attrs.get(ssn.jobs[task.job_id].queue)
            if attr is not None:
                attr.allocated.add(task.resreq)
                attr.share = share_of(attr.allocated, attr.deserved)

        def on_deallocate(task: TaskInfo) -> None:
            attr = attrs.get(ssn.jobs[task.job_id].queue)
            if attr is not None:
                attr.allocated.sub(task.resreq)
                attr.share = share_of(attr.allocated, attr.deserved)

        def victims(_reclaimer: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            chosen = []
            left: dict[str, Resource] = {}
            for task in candidates:
                queue_name = ssn.jobs[task.job_id].queue
                attr = attrs.get(queue_name)
                queue = ssn.queues.get(queue_name)
                if attr is None or queue is None or not queue.reclaimable:
                    continue
                allocated = left.setdefault(queue_name, attr.allocated.clone())
                if not allocated.less_equal(attr.deserved):
                    allocated.sub(task.resreq)
                    chosen.append(task)
            return chosen, PERMIT

        ssn.register(ExtensionPoint.QUEUE_ORDER, self.name, queue_order)
        ssn.register(ExtensionPoint.OVERUSED, self.name, overused)
        ssn.register(ExtensionPoint.ALLOCATABLE, self.name, allocatable)
        ssn.register(ExtensionPoint.PREEMPTIVE, self.name, allocatable)
        ssn.register(ExtensionPoint.JOB_ENQUEUEABLE, self.name, job_enqueueable)
        ssn.register(ExtensionPoint.JOB_ENQUEUED, self.name, job_enqueued)
        ssn.register(ExtensionPoint.RECLAIMABLE, self.name, victims)
        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

    @staticmethod
    def _new_attr(queue: QueueInfo, total: Resource, total_guarantee: Resource) -> QueueAttr:
        guarantee = queue.guarantee.clone() if queue.guarantee is not None else Resource()
        real = total - total_guarantee
        real.add(guarantee)
        if queue.capability is not None:
            real = capped(real, queue.capability)
        return QueueAttr(
            name=queue.name,
            weight=max(queue.weight, 1),
            priority=queue.priority,
            guarantee=guarantee,
            capability=queue.capability,
            real_capability=real,
        )

    def _publish(self, ssn: Session, attr: QueueAttr) -> None:
        ssn.queue_figures[attr.name] = {
            "deserved": attr.deserved,
            "allocated": attr.allocated,
            "request": attr.request,
            "share": attr.share,
        }

    def on_session_close(self, ssn: Session) -> None:
        for attr in self.attrs.values():
            self._publish(ssn, attr)

"""gangreclaim: a starving gang of a queue below its share takes whole bundles back from other
queues, as Volcano's ``gangreclaim`` action does.

Queues holding starving jobs are visited in queue order, skipping a queue that is overused
(``ssn.overused``); its starving jobs go in job order, and the queue is checked again before
each. The candidate victims are the Running, preemptable pods of jobs in *other* queues whose
Queue is reclaimable (``spec.reclaimable``, default true) and whose PodGroup is not marked
``volcano.sh/preemptable: "false"``; job priority does not protect them. They are split into
per-job safe and whole bundles and narrowed by the plugins' ``reclaimable`` votes — the queue
plugins (``proportion``, ``capacity``) let only queues above their deserved share give pods
back, never below their guarantee (see ``util.bundles`` for how votes combine). Bundles go
safe first, then in victim queue order; every pending pod of the gang must pass the queue's
``preemptive`` check as it is pipelined, and the plan is committed only if the job is
pipelined (``jobPipelined``), else undone.

Arguments: ``maxDomains`` (default 8, at least 1) and ``allowWholeBundle`` (default true), as
for gangpreempt.
"""

from __future__ import annotations

from collections.abc import Callable

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.bundles import (
    Bundle,
    Domain,
    GangEviction,
    starving_jobs,
    victim_job_allowed,
)
from stromboli.core.scheduler.util.queues import PriorityQueue


class GangReclaimAction(GangEviction):
    name = "gangreclaim"
    point = ExtensionPoint.RECLAIMABLE

    def execute(self, ssn: Session) -> None:
        self.read_arguments(ssn)
        starving = starving_jobs(ssn)
        order = PriorityQueue(ssn.queue_less, [ssn.queues[name] for name in starving])
        while order:
            queue = order.pop()
            if ssn.overused(queue):
                continue
            jobs = starving[queue.name]
            self.run_job(ssn, queue, jobs.pop())
            if jobs:
                order.push(queue)

    def candidates(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, domain: Domain
    ) -> dict[str, list[TaskInfo]]:
        found: dict[str, list[TaskInfo]] = {}
        for other in ssn.jobs.values():
            if other.queue == job.queue or not victim_job_allowed(other):
                continue
            victim_queue = ssn.queues.get(other.queue)
            if victim_queue is None or not victim_queue.reclaimable:
                continue
            tasks = [
                t
                for t in (other.by_status.get(TaskStatus.RUNNING) or {}).values()
                if t.preemptable and t.node_name in domain.names
            ]
            if tasks:
                found[other.uid] = tasks
        return found

    def victim_compare(self, ssn: Session, queue: QueueInfo) -> Callable[[Bundle, Bundle], int]:
        def compare(left: Bundle, right: Bundle) -> int:
            if left.job.queue != right.job.queue:
                left_queue, right_queue = ssn.queues[left.job.queue], ssn.queues[right.job.queue]
                verdict = ssn.victim_queue_compare(left_queue, right_queue, queue)
                if verdict:
                    return verdict
            return -ssn.job_compare(left.job, right.job)

        return compare

    def admits(self, ssn: Session) -> Callable[[QueueInfo, TaskInfo], bool]:
        return ssn.preemptive

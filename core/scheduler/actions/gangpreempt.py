"""gangpreempt: a starving gang evicts whole bundles of lower-priority jobs of its queue, as
Volcano's ``gangpreempt`` action does.

For every admitted, valid, starving job (jobs with network-topology constraints left out),
queue by queue in queue order and within a queue in job order, the candidate victims are the
Running/Bound, preemptable pods of *other* jobs of the *same* queue whose job priority is
strictly lower than the preemptor's and whose PodGroup is not marked
``volcano.sh/preemptable: "false"``. They are split into per-job safe and whole bundles and
narrowed by the plugins' ``preemptable`` votes (see ``util.bundles``); bundles are added, safe
first, the job that would be scheduled last first, until the gang could fit, and the plan
(evictions, then every pending pod of the gang pipelined) is committed only if the job is
pipelined (``jobPipelined``), else undone. Equal priority is never preempted; nothing crosses
queues.

Arguments: ``maxDomains`` (default 8, at least 1) bounds the domains tried per job — the whole
cluster is the only one until HyperNode placement exists; ``allowWholeBundle`` (default true)
lets whole bundles (entire victim jobs) be evicted when surpluses are not enough.
"""

from __future__ import annotations

from collections.abc import Callable

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import PREEMPTABLE_STATUS
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


class GangPreemptAction(GangEviction):
    name = "gangpreempt"
    point = ExtensionPoint.PREEMPTABLE

    def execute(self, ssn: Session) -> None:
        self.read_arguments(ssn)
        starving = starving_jobs(ssn)
        queues = PriorityQueue(ssn.queue_less, [ssn.queues[name] for name in starving])
        while queues:
            queue = queues.pop()
            jobs = starving[queue.name]
            while jobs:
                self.run_job(ssn, queue, jobs.pop())

    def candidates(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, domain: Domain
    ) -> dict[str, list[TaskInfo]]:
        found: dict[str, list[TaskInfo]] = {}
        for other in ssn.jobs.values():
            if other.uid == job.uid or other.queue != job.queue:
                continue
            if other.priority >= job.priority or not victim_job_allowed(other):
                continue
            tasks = [
                t
                for t in other.tasks_with(PREEMPTABLE_STATUS)
                if t.preemptable and t.node_name in domain.names
            ]
            if tasks:
                found[other.uid] = tasks
        return found

    def victim_compare(self, ssn: Session, queue: QueueInfo) -> Callable[[Bundle, Bundle], int]:
        # The job that would be scheduled last gives up its pods first.
        return lambda left, right: -ssn.job_compare(left.job, right.job)

    def admits(self, ssn: Session) -> Callable[[QueueInfo, TaskInfo], bool]:
        return ssn.allocatable

"""reclaim: a queue below its share takes resources back from other queues, as Volcano's does.

Queues holding admitted, valid jobs are visited in queue order, one starving job per visit
(jobs in job order), skipping a queue as soon as it is overused. Each pending, ungated task of
the job (task order; pods with ``preemptionPolicy: Never`` excepted) that its queue may still
take (``ssn.preemptive``) tries the nodes whose predicates fail for nothing eviction cannot fix,
in node order. On a node the candidates are the Running, preemptable pods of jobs in *other*
queues whose Queue is reclaimable (``spec.reclaimable``, default true); the plugins narrow them
(``ssn.reclaimable``). Victims go in victim order until the task fits the node's future idle
(and its predicates), and the task is pipelined there. The job's evictions are committed only
if the job is pipelined (``jobPipelined``), else undone.

Unlike Volcano, which handles every starving job of a queue once the queue is picked, the
queue is re-checked for overuse before each of its jobs: a queue that got its share back stops
reclaiming.
"""

from __future__ import annotations

from typing import ClassVar

from stromboli.core.scheduler.actions.preempt import pending_tasks
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.plugin import Action
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.statement import Statement
from stromboli.core.scheduler.util.queues import PriorityQueue
from stromboli.core.scheduler.util.victims import (
    RECLAIM,
    FailureMemo,
    by_node,
    candidate_nodes,
    commit,
    evict_until_fits,
    fits_future,
    fits_now,
    mask_of,
    never_preempts,
    passes_predicates,
    room_with,
    victim_order,
)


class ReclaimAction(Action):
    name = "reclaim"
    known_arguments: ClassVar[dict[str, object]] = {"predicateErrorCacheEnable": True}

    def execute(self, ssn: Session) -> None:
        ssn.config.action_args(self.name).get_bool("predicateErrorCacheEnable", True)
        queues: dict[str, QueueInfo] = {}
        reclaimers: dict[str, PriorityQueue[JobInfo]] = {}
        for job in ssn.jobs.values():
            if job.is_pending() or job.invalid is not None:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None or ssn.job_valid(job) is not None:
                continue
            queues[queue.name] = queue
            if ssn.job_starving(job):
                reclaimers.setdefault(queue.name, PriorityQueue(ssn.job_less)).push(job)
        if not reclaimers:
            return
        self.memo = FailureMemo(ssn)
        # Pods that may ever be reclaimed; statuses are checked again at each use.
        self.pool = [
            t
            for job in ssn.jobs.values()
            if job.queue in ssn.queues and ssn.queues[job.queue].reclaimable
            for t in (job.by_status.get(TaskStatus.RUNNING) or {}).values()
            if t.preemptable
        ]
        order = PriorityQueue(ssn.queue_less, list(queues.values()))
        while order:
            queue = order.pop()
            if ssn.overused(queue):
                continue
            jobs = reclaimers.get(queue.name)
            if not jobs:
                continue
            self.reclaim_for_job(ssn, queue, jobs.pop())
            if jobs:
                order.push(queue)

    def reclaim_for_job(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        stmt = ssn.statement()
        pending = pending_tasks(ssn, job)
        while pending and ssn.job_starving(job):
            task = pending.pop()
            if never_preempts(task) or not ssn.preemptive(queue, task):
                continue
            if ssn.pre_predicate(task) or self.memo.known_to_fail(task):
                continue
            if not self.reclaim_for_task(ssn, stmt, queue, task):
                self.memo.failed(task)
        if ssn.job_pipelined(job):
            commit(ssn, stmt, self.name)
        else:
            stmt.discard()

    def reclaim_for_task(
        self, ssn: Session, stmt: Statement, queue: QueueInfo, task: TaskInfo
    ) -> bool:
        reclaimees = [t for t in self.pool if reclaimable_pod(ssn, t, queue)]
        if not reclaimees:
            return False
        grouped = by_node(ssn, reclaimees)
        wanted = mask_of(ssn, grouped)
        if not ssn.victims_possible(ExtensionPoint.RECLAIMABLE, task, reclaimees):
            wanted &= fits_now(ssn, task)  # only a node with room already is left
        for position in candidate_nodes(ssn, task, wanted):
            position = int(position)
            on_node = grouped[position]
            if not room_with(ssn, task, position, on_node):
                continue
            victims = ssn.reclaimable(task, on_node)
            if not room_with(ssn, task, position, victims):
                continue

            def fits(position: int = position) -> bool:
                return fits_future(ssn, task, position) and passes_predicates(ssn, task, position)

            trial = evict_until_fits(
                ssn, task, position, victim_order(ssn, victims, task), RECLAIM, fits
            )
            if trial is not None:
                stmt.merge(trial)
                return True
        return False


def reclaimable_pod(ssn: Session, task: TaskInfo, reclaimer_queue: QueueInfo) -> bool:
    """A running, preemptable pod of a job in another queue that gives resources back."""
    if task.status != TaskStatus.RUNNING or not task.preemptable:
        return False
    job = ssn.jobs.get(task.job_id)
    if job is None or job.queue == reclaimer_queue.name:
        return False
    queue = ssn.queues.get(job.queue)
    return queue is not None and queue.reclaimable

"""allocate: place pending tasks, job by job, committing a gang only when it is whole.

Queues are visited in queue order (skipping overused ones), one job per visit, jobs in job
order, tasks in task order. A task goes to the best node whose idle resources hold it, or is
pipelined onto resources being released. The job's statement is committed once the job is
ready (``jobReady``), kept in the session when it is only pipelined, and discarded otherwise,
so a partial gang is never bound.
"""

from __future__ import annotations

from stromboli.core.scheduler.actions.enqueue import mark_inqueue
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.plugin import Action, register_action
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.placement import place
from stromboli.core.scheduler.util.queues import PriorityQueue, QueueJobs


def schedulable_jobs(ssn: Session, promote_pending: bool) -> QueueJobs:
    """Jobs allocate may work on: admitted (or promoted when there is no enqueue), valid,
    and in a known queue."""
    plan = QueueJobs(ssn)
    for job in ssn.jobs.values():
        if job.is_pending():
            if not promote_pending:
                continue
            mark_inqueue(ssn, job.uid)
        if job.queue not in ssn.queues:
            continue
        objection = ssn.job_valid(job)
        if objection is not None:
            job.invalid = objection
            continue
        plan.add(job)
    return plan


@register_action
class AllocateAction(Action):
    name = "allocate"
    known_arguments = {"predicateErrorCacheEnable": True}

    def execute(self, ssn: Session) -> None:
        plan = schedulable_jobs(ssn, promote_pending="enqueue" not in ssn.config.actions)
        pending: dict[str, PriorityQueue[TaskInfo]] = {}
        while True:
            queue = plan.pop_queue()
            if queue is None:
                break
            if ssn.overused(queue):
                continue
            jobs = plan.jobs.get(queue.name)
            if not jobs:
                continue
            job = jobs.pop()
            tasks = pending.get(job.uid)
            if tasks is None:
                tasks = pending[job.uid] = PriorityQueue(
                    ssn.task_less,
                    [
                        t
                        for t in (job.by_status.get(TaskStatus.PENDING) or {}).values()
                        if not t.best_effort and not t.gated
                    ],
                )
            self.allocate_job(ssn, queue, job, tasks, jobs)
            plan.requeue(queue)

    @staticmethod
    def allocate_job(
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: PriorityQueue[TaskInfo],
        jobs: PriorityQueue[JobInfo],
    ) -> None:
        stmt = ssn.statement()
        while tasks:
            task = tasks.pop()
            if not ssn.allocatable(queue, task):
                ssn.record_fit_error(
                    job, task, f"queue {queue.name} has not enough resources left for the task"
                )
                continue
            result = place(ssn, task)
            if isinstance(result, FitErrors):
                ssn.record_fit_error(job, task, result)
                break
            if result.fits_idle:
                stmt.allocate(task, result.node)
            else:
                stmt.pipeline(task, result.node)
            if ssn.job_ready(job) and tasks:
                jobs.push(job)
                break
        if ssn.job_ready(job):
            stmt.commit("allocate")
        elif not ssn.job_pipelined(job):
            stmt.discard()

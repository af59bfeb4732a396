"""backfill: place best-effort tasks (no resource requests) of admitted jobs.

Only jobs that have best-effort tasks are sorted and checked (``backfill_jobs``): backfill
does nothing to the others, and they are nearly every job of a busy cluster.
"""

from __future__ import annotations

import functools
from typing import ClassVar

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.plugin import Action
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.placement import place


def backfill_jobs(ssn: Session) -> list[JobInfo]:
    """Admitted, not invalid jobs in a known queue that have best-effort tasks, in job order."""
    jobs = [
        job
        for job in ssn.jobs.values()
        if job.best_effort_tasks
        and not job.is_pending()
        and job.queue in ssn.queues
        and job.invalid is None
    ]
    jobs.sort(key=functools.cmp_to_key(ssn.job_compare))
    return jobs


class BackfillAction(Action):
    name = "backfill"
    known_arguments: ClassVar[dict[str, object]] = {"predicateErrorCacheEnable": True}

    def execute(self, ssn: Session) -> None:
        for job in backfill_jobs(ssn):
            self.backfill_job(ssn, job)

    @staticmethod
    def backfill_job(ssn: Session, job: JobInfo) -> None:
        """Place the job's pending best-effort tasks (its pipelined ones first given back)."""
        if ssn.job_valid(job) is not None:
            return
        pipelined = [t for t in job.tasks_with(TaskStatus.PIPELINED) if t.best_effort]
        for task in pipelined:
            # Best-effort tasks need no reservation: give the pipelined ones a real node.
            ssn.nodes.remove_task(task.node_name, task)
            ssn.fire_deallocate(task)
            job.update_status(task, TaskStatus.PENDING)
            task.node_name = ""
        candidates = [
            t
            for t in (job.by_status.get(TaskStatus.PENDING) or {}).values()
            if t.best_effort and not t.gated
        ]
        for task in ssn.sorted_tasks(candidates):
            result = place(ssn, task, use_future_idle=False)
            if isinstance(result, FitErrors):
                ssn.record_fit_error(job, task, result)
                continue
            ssn.allocate(task, result.node)

"""enqueue: admit Pending PodGroups (phase → Inqueue) while the queues' policies allow.

Queues are visited in queue order, one job per visit (round robin), each queue's jobs in job
order. A PodGroup without ``minResources`` is always admitted; otherwise the
``jobEnqueueable`` votes decide.
"""

from __future__ import annotations

from stromboli.core.scheduler.framework.plugin import Action
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.queues import QueueJobs


class EnqueueAction(Action):
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        pending = QueueJobs(ssn)
        for job in ssn.jobs.values():
            if job.is_pending() and job.queue in ssn.queues:
                pending.add(job)
        while True:
            popped = pending.pop_next()
            if popped is None:
                break
            queue, job = popped
            if job.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                mark_inqueue(ssn, job.uid)
            pending.requeue(queue)


def mark_inqueue(ssn: Session, job_uid: str) -> None:
    """Promote a job's PodGroup to Inqueue within the session (written back at close)."""
    job = ssn.jobs[job_uid]
    status = dict(job.podgroup.get("status") or {})
    status["phase"] = "Inqueue"
    job.podgroup = {**job.podgroup, "status": status}
    ssn.enqueued.add(job_uid)

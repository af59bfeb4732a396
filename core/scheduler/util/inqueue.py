"""What an admitted (Inqueue) job holds of its queue's or the cluster's room, as the
admission plugins (overcommit, proportion) count it."""

from __future__ import annotations

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.resource import Resource


def without_gated(job: JobInfo, reserved: Resource) -> Resource:
    """``reserved`` less what the job's scheduling-gated pods request (never below zero):
    gated pods cannot run yet, so an admitted job does not hold room for them and other
    jobs may be admitted meanwhile (Volcano e2e "Scheduling gated task will not consume
    inqueue resources")."""
    gated = Resource()
    for task in job.tasks.values():
        if task.gated:
            gated.add(task.resreq)
    if gated.is_empty():
        return reserved
    return Resource({name: max(v - gated.get(name), 0.0) for name, v in reserved.amounts.items()})

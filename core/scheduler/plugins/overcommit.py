"""overcommit: admit PodGroups while the cluster, inflated by a factor, has room.

``idle = total × overcommit-factor − used``; a PodGroup is admitted (enqueued) when its
``minResources`` plus what already-admitted groups still need fit in that idle amount.
"""

from __future__ import annotations

from typing import ClassVar

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.resource import EPSILON, PODS, Resource
from stromboli.core.scheduler.framework.plugin import Plugin, register_plugin
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session

DEFAULT_FACTOR = 1.2
OVERUSED_MESSAGE = "resource in cluster is overused"


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


@register_plugin
class OvercommitPlugin(Plugin):
    name = "overcommit"
    known_arguments: ClassVar[dict[str, object]] = {"overcommit-factor": DEFAULT_FACTOR}

    def on_session_open(self, ssn: Session) -> None:
        factor = self.arguments.get_float("overcommit-factor", DEFAULT_FACTOR)
        if factor < 1.0:
            factor = DEFAULT_FACTOR
        used = ssn.nodes.index.resource(ssn.nodes.used.sum(axis=0))
        idle = ssn.total_resource.clone().multi(factor).sub(used)
        inqueue = Resource()
        for job in ssn.jobs.values():
            if job.min_resources is None:
                continue
            if job.phase == "Inqueue":
                inqueue.add(without_gated(job, job.min_resources))
            elif job.phase == "Running":
                inqueue.add(without_gated(job, job.min_resources - job.allocated))

        def job_enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return PERMIT
            wanted = inqueue + job.min_resources
            fits = all(
                wanted.get(name) <= idle.get(name) + EPSILON
                for name, v in job.min_resources.amounts.items()
                if v > EPSILON and name != PODS
            )
            if fits:
                return PERMIT
            ssn.job_events.append((job.uid, "Warning", "Unschedulable", OVERUSED_MESSAGE))
            return REJECT

        def job_enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                inqueue.add(job.min_resources)

        ssn.register("job_enqueueable", self.name, job_enqueueable)
        ssn.register("job_enqueued", self.name, job_enqueued)

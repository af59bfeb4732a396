"""overcommit: admit PodGroups while the cluster, inflated by a factor, has room.

``idle = total × overcommit-factor − used``; a PodGroup is admitted (enqueued) when its
``minResources`` plus what already-admitted groups still need fit in that idle amount; a refusal
is a Normal ``Unschedulable`` event on the group naming the resources (Volcano's words).
"""

from __future__ import annotations

from typing import ClassVar

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.util.inqueue import (
    format_resource_names,
    short_resources,
    without_gated,
)

DEFAULT_FACTOR = 1.2
OVERUSED_MESSAGE = "resource in cluster is overused"


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
            short = short_resources(inqueue + job.min_resources, idle, job.min_resources)
            if not short:
                return PERMIT
            message = format_resource_names(OVERUSED_MESSAGE, "overused", short)
            ssn.job_events.append((job.uid, "Normal", "Unschedulable", message))
            return REJECT

        def job_enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                inqueue.add(job.min_resources)

        ssn.register(ExtensionPoint.JOB_ENQUEUEABLE, self.name, job_enqueueable)
        ssn.register(ExtensionPoint.JOB_ENQUEUED, self.name, job_enqueued)

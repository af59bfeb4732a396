"""drf: dominant resource fairness between jobs.

A job's share is its largest fraction of any cluster resource; jobs with the smaller dominant
share go first. Shares are kept current through the session's allocate/deallocate events.
"""

from __future__ import annotations

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.resource import PODS, Resource
from stromboli.core.scheduler.framework.plugin import Plugin, register_plugin
from stromboli.core.scheduler.framework.session import PERMIT, EventHandler, Session

SHARE_DELTA = 1e-6


def dominant_share(allocated: Resource, total: Resource) -> float:
    share = 0.0
    for name, capacity in total.amounts.items():
        if name == PODS or capacity <= 0:
            continue
        share = max(share, allocated.get(name) / capacity)
    return share


@register_plugin
class DrfPlugin(Plugin):
    name = "drf"

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource
        shares: dict[str, float] = {
            uid: dominant_share(job.allocated, total) for uid, job in ssn.jobs.items()
        }
        self.shares = shares

        def job_order(left: JobInfo, right: JobInfo) -> int:
            ls, rs = shares.get(left.uid, 0.0), shares.get(right.uid, 0.0)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def refresh(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job_id)
            if job is not None:
                shares[job.uid] = dominant_share(job.allocated, total)

        def victims(preemptor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            preemptor_job = ssn.jobs[preemptor.job_id]
            after_add = dominant_share(preemptor_job.allocated + preemptor.resreq, total)
            chosen = []
            for task in candidates:
                job = ssn.jobs.get(task.job_id)
                if job is None:
                    continue
                after_remove = dominant_share(job.allocated - task.resreq, total)
                if after_remove >= after_add - SHARE_DELTA:
                    chosen.append(task)
            return chosen, PERMIT

        ssn.register("job_order", self.name, job_order)
        ssn.register("preemptable", self.name, victims)
        ssn.add_event_handler(EventHandler(allocate=refresh, deallocate=refresh))

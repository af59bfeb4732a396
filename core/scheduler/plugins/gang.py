"""gang: all-or-nothing placement of a PodGroup's ``minMember`` pods.

Validity, readiness and pipelining follow the job counters of reference §3.3; on session close
each job's PodGroup gets a ``Scheduled`` or ``Unschedulable`` condition with Volcano's reasons
and messages.
"""

from __future__ import annotations

from stromboli.core.api.constants import PodGroupConditionReason, PodGroupConditionType
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.status import PREEMPTABLE_STATUS
from stromboli.core.scheduler.framework.conditions import (
    PodGroupConditionUpdate,
    job_fit_error,
    schedulable_task_num,
    terminating_members_only,
)
from stromboli.core.scheduler.framework.plugin import Plugin, register_plugin
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session

READY_REASON = "tasks in gang are ready to be scheduled"


@register_plugin
class GangPlugin(Plugin):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        ssn.register("job_valid", self.name, self.job_valid)
        ssn.register("job_order", self.name, self.job_order)
        ssn.register("job_ready", self.name, self.job_ready)
        ssn.register("job_pipelined", self.name, self.job_pipelined)
        ssn.register("job_starving", self.name, self.job_starving)
        ssn.register("preemptable", self.name, self.victims(ssn, spare_single=False))
        ssn.register("reclaimable", self.name, self.victims(ssn, spare_single=True))

    @staticmethod
    def job_valid(job: JobInfo) -> tuple[str, str] | None:
        if not job.check_task_valid():
            return (
                PodGroupConditionReason.NOT_ENOUGH_PODS_OF_TASK,
                "Not enough valid pods of each task for gang-scheduling",
            )
        valid = job.valid_task_num()
        if valid < job.min_available:
            return (
                PodGroupConditionReason.NOT_ENOUGH_TASKS,
                f"Not enough valid tasks for gang-scheduling, valid: {valid}, "
                f"min: {job.min_available}",
            )
        return None

    @staticmethod
    def job_order(left: JobInfo, right: JobInfo) -> int:
        """Jobs that are not ready yet go first."""
        left_ready, right_ready = left.is_ready(), right.is_ready()
        if left_ready == right_ready:
            return 0
        return 1 if left_ready else -1

    @staticmethod
    def job_ready(job: JobInfo) -> bool:
        return job.check_task_ready() and job.is_ready()

    @staticmethod
    def job_pipelined(job: JobInfo) -> int:
        return PERMIT if job.check_task_pipelined() and job.is_pipelined() else REJECT

    @staticmethod
    def job_starving(job: JobInfo) -> bool:
        # Only the job minimum matters for preemption, not the per-role ones (reference §3.5).
        return job.is_starving()

    @staticmethod
    def victims(ssn: Session, *, spare_single: bool):  # type: ignore[no-untyped-def]
        """Only pods beyond a job's ``minAvailable`` may be taken from it.

        For reclaim this is Volcano's rule exactly: a job with ``minAvailable: 1`` and one
        pod running gives nothing here, and a later tier (``proportion``: only queues above
        their deserved share) decides (Volcano e2e "Reclaim Case 6": a queue at its share is
        not reclaimed from). For preemption every pod of a ``minAvailable: 1`` job is offered
        (``spare_single`` false), so that priority decides between single-pod jobs under the
        default configuration, where Volcano's gang would offer none and drf's tier would
        rarely allow any.
        """

        def select(_preemptor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            occupied: dict[str, int] = {}
            chosen: list[TaskInfo] = []
            for task in candidates:
                job = ssn.jobs.get(task.job_id)
                if job is None or not task.status & PREEMPTABLE_STATUS:
                    continue
                if task.job_id not in occupied:
                    occupied[task.job_id] = job.ready_task_num()
                single = job.min_available == 1 and not spare_single
                if occupied[task.job_id] > job.min_available or single:
                    chosen.append(task)
                    occupied[task.job_id] -= 1
            return chosen, PERMIT

        return select

    def on_session_close(self, ssn: Session) -> None:
        for job in ssn.jobs.values():
            if job.invalid is not None:
                continue
            if not self.job_ready(job) and terminating_members_only(job):
                continue
            if self.job_ready(job):
                condition = PodGroupConditionUpdate(
                    type=PodGroupConditionType.SCHEDULED,
                    reason=READY_REASON,
                    message="",
                )
            else:
                missing = job.min_available - schedulable_task_num(job)
                message = (
                    f"{missing}/{len(job.tasks)} tasks in gang unschedulable: {job_fit_error(job)}"
                )
                condition = PodGroupConditionUpdate(
                    type=PodGroupConditionType.UNSCHEDULABLE,
                    reason=PodGroupConditionReason.NOT_ENOUGH_RESOURCES,
                    message=message,
                )
                ssn.unschedulable_events[job.uid] = message
            ssn.podgroup_conditions[job.uid] = condition

"""gang: all-or-nothing placement of a PodGroup's ``minMember`` pods.

Validity, readiness and pipelining follow Volcano's job counters (``JobInfo.valid_task_num``,
``is_ready``, ``is_pipelined``: pods placeable, placed, or placed plus pipelined, each against
``minAvailable``); on session close each job's PodGroup gets a ``Scheduled`` or
``Unschedulable`` condition with Volcano's reasons and messages.
"""

from __future__ import annotations

from stromboli.core.api.constants import PodGroupConditionReason, PodGroupConditionType
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.framework.closing import close_set
from stromboli.core.scheduler.framework.conditions import (
    GANG_OBJECTIONS,
    PodGroupConditionUpdate,
    job_fit_error,
    schedulable_task_num,
    terminating_members_only,
)
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint, VictimsFn
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session

READY_REASON = "tasks in gang are ready to be scheduled"


class GangPlugin(Plugin):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        ssn.register(ExtensionPoint.JOB_VALID, self.name, self.job_valid)
        ssn.register(ExtensionPoint.JOB_ORDER, self.name, self.job_order)
        ssn.register(ExtensionPoint.JOB_READY, self.name, self.job_ready)
        ssn.register(ExtensionPoint.JOB_PIPELINED, self.name, self.job_pipelined)
        ssn.register(ExtensionPoint.JOB_STARVING, self.name, self.job_starving)
        victims = self.victims(ssn)
        ssn.register(ExtensionPoint.PREEMPTABLE, self.name, victims)
        ssn.register(ExtensionPoint.RECLAIMABLE, self.name, victims)

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
        """Jobs that are not ready yet go first (Volcano's order). Among those, a gang already
        partly placed goes before one with nothing placed: a scheduler that died mid-bind (or
        a member that restarted) left it holding nodes, and its successor must finish it in its
        first cycle, before another job takes the room its members were placed for."""
        # JobInfo.is_ready, with each job's ready count taken once: asked on every comparison
        # of the job queue's heap.
        left_count, right_count = left.ready_task_num(), right.ready_task_num()
        left_ready = left_count + left.pending_best_effort_num() >= left.min_available
        right_ready = right_count + right.pending_best_effort_num() >= right.min_available
        if left_ready != right_ready:
            return 1 if left_ready else -1
        if left_ready:
            return 0
        left_partial, right_partial = left_count > 0, right_count > 0
        if left_partial == right_partial:
            return 0
        return -1 if left_partial else 1

    @staticmethod
    def job_ready(job: JobInfo) -> bool:
        return job.check_task_ready() and job.is_ready()

    @staticmethod
    def job_pipelined(job: JobInfo) -> int:
        return PERMIT if job.check_task_pipelined() and job.is_pipelined() else REJECT

    @staticmethod
    def job_starving(job: JobInfo) -> bool:
        # Only the job minimum matters for preemption, not the per-role ones: Volcano's gang
        # plugin calls a job starving on its minAvailable alone.
        return job.is_starving()

    @staticmethod
    def victims(ssn: Session) -> VictimsFn:
        """Only pods beyond a job's ``minAvailable`` may be taken from it, for preemption and
        reclaim alike (Volcano's single rule, with no exception for ``minAvailable: 1``).

        Each victim job keeps a running count of its ready pods; a candidate is offered only
        while that count is above the job's minimum, and each offer lowers it. So a job with
        ``minAvailable: 1`` and one pod running gives nothing: under the default
        configuration a single-pod job cannot preempt another. Configurations where priority
        should decide turn this vote off (``enablePreemptable: false`` on gang, as Volcano's
        Helm chart and CI do). When gang leaves its tier with no victims, a later tier decides
        (for reclaim, ``proportion``: only queues above their deserved share).
        """

        def select(_evictor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            occupied: dict[str, int] = {}
            chosen: list[TaskInfo] = []
            for task in candidates:
                job = ssn.jobs.get(task.job_id)
                if job is None:
                    continue  # an orphan whose PodGroup left the session
                left = occupied.setdefault(task.job_id, job.ready_task_num())
                if left > job.min_available:
                    chosen.append(task)
                    occupied[task.job_id] = left - 1
            return chosen, PERMIT

        return select

    def on_session_close(self, ssn: Session) -> None:
        """Each job with pods gets ``Scheduled`` or ``Unschedulable``; a job whose pods do not
        exist yet (a vcjob's group before the controller creates them) gets nothing and stays
        as it is, as in Volcano. Gang's own ``jobValid`` objections are judged here like any
        other shortfall; another plugin's objection is written by the status writer. Only
        the jobs the session closes are looked at: a settled job would get the condition it
        has (see ``framework/closing.py``)."""
        for job in close_set(ssn.jobs, ssn.closing).jobs:
            if not job.tasks:
                continue
            if job.invalid is not None and job.invalid[0] not in GANG_OBJECTIONS:
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

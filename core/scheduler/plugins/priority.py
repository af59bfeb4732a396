"""priority: order jobs and tasks by priority; lower-priority work is the victim."""

from __future__ import annotations

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.status import READY_STATUS, TaskStatus
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, Session


def _desc(left: int, right: int) -> int:
    if left == right:
        return 0
    return -1 if left > right else 1


class PriorityPlugin(Plugin):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        ssn.register(
            ExtensionPoint.TASK_ORDER,
            self.name,
            lambda left, right: _desc(left.priority, right.priority),
        )
        ssn.register(
            ExtensionPoint.JOB_ORDER,
            self.name,
            lambda left, right: _desc(left.priority, right.priority),
        )
        ssn.register(ExtensionPoint.JOB_STARVING, self.name, self.job_starving)

        def victims(preemptor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            preemptor_job = ssn.jobs[preemptor.job_id]
            chosen = []
            for task in candidates:
                job = ssn.jobs.get(task.job_id)
                if job is None:
                    continue
                if job.uid != preemptor_job.uid:
                    if job.priority < preemptor_job.priority:
                        chosen.append(task)
                elif task.priority < preemptor.priority:
                    chosen.append(task)
            return chosen, PERMIT

        ssn.register(ExtensionPoint.PREEMPTABLE, self.name, victims)

    @staticmethod
    def job_starving(job: JobInfo) -> bool:
        return job.count(READY_STATUS | TaskStatus.PIPELINED) < len(job.tasks)

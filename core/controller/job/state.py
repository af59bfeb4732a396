"""Volcano's job state machine (phase × action) as a table of pure functions.

For a job in some phase, an action maps to a :class:`Plan`: what to do with the pods
(:attr:`Op.SYNC` creates missing pods and counts them, :attr:`Op.KILL_JOB` deletes the job's
pods except those in the ``retain`` phases, :attr:`Op.KILL_TARGET` deletes one task's, pod's or
partition's pods), and an ``update`` applied to the status computed after that, which may
change the phase and the retry count. The controller does the I/O; everything decided here is
testable without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from stromboli.core.api.constants import Action, JobPhase, PodPhase
from stromboli.core.controller.job.status import JobStatus

RETAIN_NONE: frozenset[str] = frozenset()
"""Kill every pod (RestartJob on a live job)."""
RETAIN_SOFT: frozenset[str] = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
"""Keep the pods that have finished (every other kill)."""

RESTART_TARGET_ACTIONS = frozenset(
    {Action.RESTART_TASK, Action.RESTART_POD, Action.RESTART_PARTITION}
)
FINISHED_PHASES = frozenset({JobPhase.COMPLETED, JobPhase.TERMINATED, JobPhase.FAILED})


class Op(Enum):
    SYNC = "sync"
    KILL_JOB = "kill-job"
    KILL_TARGET = "kill-target"


@dataclass(frozen=True, slots=True)
class TaskFacts:
    name: str
    replicas: int
    #: ``None`` when the spec leaves it unset (the webhook normally fills it).
    min_available: int | None


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the update rules read from the job's spec."""

    min_available: int
    max_retry: int
    min_success: int | None = None
    tasks: tuple[TaskFacts, ...] = field(default_factory=tuple)

    @property
    def replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def task_min_available(self) -> int:
        """Σ task minAvailable, a task without one counting its replicas."""
        return sum(t.replicas if t.min_available is None else t.min_available for t in self.tasks)


Update = Callable[[JobStatus, JobFacts], bool]
"""Changes ``status`` (phase, retry count) given the fresh counts; True when the phase was
(re)set, which stamps the transition time and the condition list."""


@dataclass(frozen=True, slots=True)
class Plan:
    op: Op
    retain: frozenset[str] = RETAIN_SOFT
    update: Update | None = None


# --- status updates ------------------------------------------------------------------------


def _to(phase: JobPhase, *, retry: bool = False) -> Update:
    def update(status: JobStatus, _facts: JobFacts) -> bool:
        if retry:
            status.retry_count += 1
        status.phase = phase
        return True

    update.__name__ = f"to_{phase.lower()}{'_retry' if retry else ''}"
    return update


def _when_drained(phase: JobPhase) -> Update:
    """Move to ``phase`` once no pod is pending, running or terminating."""

    def update(status: JobStatus, _facts: JobFacts) -> bool:
        if status.alive:
            return False
        status.phase = phase
        return True

    update.__name__ = f"{phase.lower()}_when_drained"
    return update


def pending_sync(status: JobStatus, facts: JobFacts) -> bool:
    """Pending → Running once minAvailable pods have started (running or finished)."""
    if facts.min_available <= status.running + status.succeeded + status.failed:
        status.phase = JobPhase.RUNNING
        return True
    return False


def running_sync(status: JobStatus, facts: JobFacts) -> bool:
    """Running → Completed / Failed when the pods are done, or back to Pending when too many
    pods wait to be scheduled again."""
    replicas = facts.replicas
    if replicas == 0:
        return False  # scaled down to zero: keep the phase
    if facts.min_success is not None and status.succeeded >= facts.min_success:
        status.phase = JobPhase.COMPLETED
        return True
    if status.succeeded + status.failed == replicas:
        if facts.min_available >= facts.task_min_available:
            for task in facts.tasks:
                if task.min_available is None:
                    continue
                phases = status.task_status_count.get(task.name)
                if phases is not None and phases.get(PodPhase.SUCCEEDED, 0) < task.min_available:
                    status.phase = JobPhase.FAILED
                    return True
        if facts.min_success is not None and status.succeeded < facts.min_success:
            status.phase = JobPhase.FAILED
        elif status.succeeded >= facts.min_available:
            status.phase = JobPhase.COMPLETED
        else:
            status.phase = JobPhase.FAILED
        return True
    if status.pending > replicas - facts.min_available:
        status.phase = JobPhase.PENDING
        return True
    return False


def restarting_sync(status: JobStatus, facts: JobFacts) -> bool:
    """Restarting → Failed once the retries are used up, else → Pending when enough pods can
    come back (all but those still terminating)."""
    if status.retry_count >= facts.max_retry:
        status.phase = JobPhase.FAILED
        return True
    if facts.replicas - status.terminating >= status.min_available:
        status.phase = JobPhase.PENDING
        return True
    return False


# --- the table -----------------------------------------------------------------------------


def _live_job(action: str, sync: Update) -> Plan:
    """Pending and Running share every row but the sync rule."""
    if action == Action.RESTART_JOB:
        return Plan(Op.KILL_JOB, RETAIN_NONE, _to(JobPhase.RESTARTING, retry=True))
    if action in RESTART_TARGET_ACTIONS:
        return Plan(Op.KILL_TARGET, RETAIN_SOFT, _to(JobPhase.RESTARTING, retry=True))
    if action == Action.ABORT_JOB:
        return Plan(Op.KILL_JOB, RETAIN_SOFT, _to(JobPhase.ABORTING))
    if action == Action.COMPLETE_JOB:
        return Plan(Op.KILL_JOB, RETAIN_SOFT, _to(JobPhase.COMPLETING))
    if action == Action.TERMINATE_JOB:
        return Plan(Op.KILL_JOB, RETAIN_SOFT, _to(JobPhase.TERMINATING))
    return Plan(Op.SYNC, RETAIN_SOFT, sync)


def plan(phase: str, action: str) -> Plan:
    """What ``action`` does to a job in ``phase`` (``""``, an unknown phase: Pending)."""
    if phase == JobPhase.RUNNING:
        return _live_job(action, running_sync)
    if phase == JobPhase.RESTARTING:
        if action == Action.SYNC_JOB:
            return Plan(Op.SYNC, RETAIN_SOFT, restarting_sync)
        if action in RESTART_TARGET_ACTIONS:
            return Plan(Op.KILL_TARGET, RETAIN_SOFT, restarting_sync)
        return Plan(Op.KILL_JOB, RETAIN_NONE, restarting_sync)
    if phase in (JobPhase.ABORTING, JobPhase.ABORTED):
        if action == Action.RESUME_JOB:
            return Plan(Op.KILL_JOB, RETAIN_SOFT, _to(JobPhase.RESTARTING, retry=True))
        if phase == JobPhase.ABORTING:
            return Plan(Op.KILL_JOB, RETAIN_SOFT, _when_drained(JobPhase.ABORTED))
        return Plan(Op.KILL_JOB, RETAIN_SOFT, None)
    if phase == JobPhase.COMPLETING:
        return Plan(Op.KILL_JOB, RETAIN_SOFT, _when_drained(JobPhase.COMPLETED))
    if phase == JobPhase.TERMINATING:
        return Plan(Op.KILL_JOB, RETAIN_SOFT, _when_drained(JobPhase.TERMINATED))
    if phase in FINISHED_PHASES:
        return Plan(Op.KILL_JOB, RETAIN_SOFT, None)
    return _live_job(action, pending_sync)


def retained_phases(
    plan_retain: frozenset[str], retry_count: int, max_retry: int
) -> frozenset[str]:
    """The phases a full kill keeps: on the last retry finished pods always stay, so that
    their logs and exit codes survive the job's failure."""
    if retry_count >= max_retry - 1:
        return RETAIN_SOFT
    return plan_retain


def is_finished(phase: str) -> bool:
    return phase in FINISHED_PHASES

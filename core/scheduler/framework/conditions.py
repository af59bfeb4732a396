"""PodGroup status as Volcano's scheduler computes it at session close.

A group with at least ``minMember`` pods that hold a node (running, bound, finished, or
terminating where they run) is Running, or Completed once all of those have finished; short of
that it keeps Inqueue if admitted, else goes Pending. Running pods in a group this session found
unschedulable make it Unknown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from stromboli.core.api.constants import (
    PODGROUP_NOT_READY_DETAIL,
    PODGROUP_READY_DETAIL,
    PodGroupConditionReason,
    PodGroupConditionType,
)
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.status import (
    COMPLETED_STATUS,
    READY_STATUS,
    SCHEDULED_STATUS,
    TaskStatus,
)

#: Objections of gang's ``jobValid``. Volcano skips such a job in its actions but never writes
#: these reasons on the PodGroup: at session close the group is judged like any other (a
#: group with pods that is not ready gets ``NotEnoughResources``; one without pods, nothing).
GANG_OBJECTIONS = frozenset(
    {PodGroupConditionReason.NOT_ENOUGH_TASKS, PodGroupConditionReason.NOT_ENOUGH_PODS_OF_TASK}
)

_QUEUE_REFUSAL = " has not enough resources left for the task"


def queue_refusal(queue: str) -> str:
    """Stromboli's detail for a task that allocate passed by because its queue is full; Volcano
    records no fit error then, so pods lead with its gang sentence and this follows."""
    return f"queue {queue}{_QUEUE_REFUSAL}"


def is_queue_refusal(message: str) -> bool:
    return message.startswith("queue ") and message.endswith(_QUEUE_REFUSAL)


@dataclass(slots=True)
class PodGroupConditionUpdate:
    type: str
    reason: str
    message: str
    status: str = "True"


def schedulable_task_num(job: JobInfo) -> int:
    """Tasks that found room, as Volcano's gang counts them: ready ones, and pending ones whose
    allocation this session was undone only because the gang was incomplete (pipelined tasks,
    which still wait for room, do not count)."""
    undone = sum(
        1
        for t in (job.by_status.get(TaskStatus.PENDING) or {}).values()
        if t.last_status == TaskStatus.ALLOCATED
    )
    return job.count(READY_STATUS) + undone


def _histogram(counts: Counter[str]) -> str:
    """``<count> <name>`` entries in Go's string order (``12 Running`` before ``4 Pending``);
    every entry given is kept, a ``0 minAvailable`` too, as Volcano prints it."""
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def task_scheduling_reason(job: JobInfo, task_uid: str) -> str:
    """Why one pending task is pending: ``Schedulable`` when it found a node this session but
    its gang did not, ``Unschedulable`` otherwise (tried or not, as Volcano reports it)."""
    task = job.tasks.get(task_uid)
    if task is not None and task.last_status == TaskStatus.ALLOCATED:
        return "Schedulable"
    return "Unschedulable"


def job_fit_error(job: JobInfo) -> str:
    """Volcano's summary of a job's state (its ``JobInfo.FitError``), e.g.
    ``pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable``
    followed by ``. Origin reason is <pod>: <fit error>`` for the first pod that fitted no node.

    Only node fit errors name an origin, as in Volcano; a queue refusal (Stromboli's detail,
    see :func:`queue_refusal`) does not.
    """
    counts: Counter[str] = Counter()
    for status, bucket in job.by_status.items():
        if bucket:
            counts[status.label] += len(bucket)
    counts["minAvailable"] = job.min_available
    detail = PODGROUP_READY_DETAIL if job.is_ready() else PODGROUP_NOT_READY_DETAIL
    message = f"{detail}, {_histogram(counts)}"
    pending = job.by_status.get(TaskStatus.PENDING) or {}
    if pending:
        reasons = Counter(task_scheduling_reason(job, uid) for uid in pending)
        message += f"; Pending: {_histogram(reasons)}"
    if job.job_fit_error:
        return f"{message}. Origin reason is: {job.job_fit_error}"
    for task in job.tasks.values():
        error = job.fit_errors.get(task.uid)
        if error and not is_queue_refusal(error):
            return f"{message}. Origin reason is {task.name}: {error}"
    return message


def podgroup_phase(job: JobInfo, unschedulable_this_session: bool) -> str:
    """The phase a PodGroup should have after this session."""
    if job.count(TaskStatus.RUNNING) and unschedulable_this_session:
        return "Unknown"
    scheduled = job.count(SCHEDULED_STATUS) + sum(
        1 for t in (job.by_status.get(TaskStatus.RELEASING) or {}).values() if t.node_name
    )
    if scheduled >= job.min_available:
        finished = job.count(COMPLETED_STATUS)
        return "Completed" if finished == scheduled else "Running"
    current = job.phase
    return current if current == "Inqueue" else "Pending"


def merge_condition(
    conditions: list[dict], update: PodGroupConditionUpdate, transition_id: str, now: str
) -> list[dict]:
    """Replace the condition of the same type (others stay, as in Volcano); a new status,
    reason or message moves its transition time."""
    fresh = {
        "type": update.type,
        "status": update.status,
        "transitionID": transition_id,
        "lastTransitionTime": now,
        "reason": update.reason,
    }
    if update.message:  # Volcano's field is omitempty: no message, no key
        fresh["message"] = update.message
    merged: list[dict] = []
    replaced = False
    for existing in conditions:
        if existing.get("type") != update.type:
            merged.append(existing)
            continue
        replaced = True
        same = (
            existing.get("status") == update.status
            and existing.get("reason") == update.reason
            and existing.get("message", "") == update.message
        )
        merged.append(existing if same else fresh)
    if not replaced:
        merged.append(fresh)
    return merged


def is_unschedulable(update: PodGroupConditionUpdate | None) -> bool:
    return update is not None and update.type == PodGroupConditionType.UNSCHEDULABLE


def terminating_members_only(job: JobInfo) -> bool:
    """Whether the job is short of ready pods only because scheduled members are terminating
    (deleted, still on their nodes): nothing is left to schedule and those pods still count,
    so no ``Unschedulable`` condition is written (Volcano e2e "PodGroup should stay Running
    while scheduled members are terminating")."""
    releasing = sum(
        1 for t in (job.by_status.get(TaskStatus.RELEASING) or {}).values() if t.node_name
    )
    if not releasing:
        return False
    if job.by_status.get(TaskStatus.PENDING) or job.by_status.get(TaskStatus.PIPELINED):
        return False
    return job.count(SCHEDULED_STATUS) + releasing >= job.min_available

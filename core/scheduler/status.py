"""What a finished session means for stored objects: PodGroup status, pod conditions, queue
``status.allocated`` and events, as Volcano's scheduler writes them when it closes a session
(a PodGroup only when its status changed; a ``PodScheduled=False`` condition on each pod left
unbound)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.api.constants import PodGroupConditionType
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS, TaskStatus
from stromboli.core.scheduler.framework.conditions import (
    PodGroupConditionUpdate,
    job_fit_error,
    merge_condition,
    podgroup_phase,
)
from stromboli.core.scheduler.framework.session import Session

#: Pod condition message when nothing more precise is known (Volcano's AllNodeUnavailableMsg).
ALL_NODES_UNAVAILABLE = "all nodes are unavailable"


@dataclass(slots=True)
class EventRecord:
    """An event to record about an object (aggregated by the writer)."""

    involved: dict
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class PodCondition:
    namespace: str
    name: str
    reason: str
    message: str
    nominated_node: str = ""
    #: The pod as the cache last saw it, written against first to save a read.
    pod: dict | None = None


@dataclass(slots=True)
class StatusChanges:
    #: (namespace, name) → the PodGroup's new status, only where it changed.
    podgroups: dict[tuple[str, str], dict] = field(default_factory=dict)
    #: The PodGroups and Queues as the cache last saw them (see ``PodCondition.pod``).
    podgroup_objects: dict[tuple[str, str], dict] = field(default_factory=dict)
    queue_objects: dict[str, dict] = field(default_factory=dict)
    pod_conditions: list[PodCondition] = field(default_factory=list)
    #: Queue name → new ``status.allocated`` ResourceList, only where it changed.
    queues: dict[str, dict[str, str]] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)


def object_ref(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def _comparable(conditions: list[dict]) -> list[tuple]:
    return [
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message", "")) for c in conditions
    ]


def podgroup_status(ssn: Session, job: JobInfo, now: str) -> dict | None:
    """The PodGroup's new status, or None when nothing but times would change."""
    old = job.podgroup.get("status") or {}
    update = ssn.podgroup_conditions.get(job.uid)
    if job.invalid is not None:
        reason, message = job.invalid
        update = PodGroupConditionUpdate(PodGroupConditionType.UNSCHEDULABLE, reason, message)
    conditions = list(old.get("conditions") or [])
    if update is not None:
        conditions = merge_condition(conditions, update, ssn.uid, now)
    unschedulable = update is not None and update.type == PodGroupConditionType.UNSCHEDULABLE
    new = {
        **old,
        "phase": podgroup_phase(job, unschedulable),
        "running": job.count(TaskStatus.RUNNING),
        "succeeded": job.count(TaskStatus.SUCCEEDED),
        "failed": job.count(TaskStatus.FAILED),
        "conditions": conditions,
    }
    for counter in ("running", "succeeded", "failed"):
        if not new[counter]:
            new.pop(counter)
    if not conditions:
        new.pop("conditions")
    # enqueue promotes the phase within the session only: the stored group is still Pending.
    stored_phase = None if job.uid in ssn.enqueued else old.get("phase")
    same = (
        stored_phase == new["phase"]
        and all(old.get(c, 0) == new.get(c, 0) for c in ("running", "succeeded", "failed"))
        and _comparable(old.get("conditions") or []) == _comparable(conditions)
    )
    return None if same else new


def _task_reason(job: JobInfo, task: TaskInfo, base: str) -> tuple[str, str]:
    """PodScheduled reason and message of a task left unbound (Volcano's TaskSchedulingReason):
    a pending task whose placement this session was undone reports where it could have gone."""
    status, node = task.status, task.node_name
    if status == TaskStatus.PENDING and task.last_status is not None:
        status, node = task.last_status, task.last_node
    where = f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}"
    if status == TaskStatus.ALLOCATED:
        return "Schedulable", f"{where}, once minAvailable is satisfied"
    if status == TaskStatus.PIPELINED:
        return "Unschedulable", f"{where}, once resource is released and minAvailable is satisfied"
    error = job.fit_errors.get(task.uid)
    if error:
        return "Unschedulable", error
    return "Unschedulable", base


def _pod_condition_unchanged(pod: dict, reason: str, message: str, nominated: str) -> bool:
    status = pod.get("status") or {}
    if (status.get("nominatedNodeName") or "") != nominated:
        return False
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return (
                condition.get("status") == "False"
                and condition.get("reason") == reason
                and condition.get("message") == message
            )
    return False


def collect(ssn: Session, now: str) -> StatusChanges:
    changes = StatusChanges()
    allocated: dict[str, Resource] = {}
    for job in ssn.jobs.values():
        queue_total = allocated.setdefault(job.queue, Resource())
        for task in job.tasks_with(ALLOCATED_STATUS):
            queue_total.add(task.resreq)
        for uid, kind, reason, message in ssn.job_events:
            if uid == job.uid:
                changes.events.append(EventRecord(object_ref(job.podgroup), kind, reason, message))
        status = podgroup_status(ssn, job, now)
        if status is not None:
            key = (job.namespace, job.name)
            changes.podgroups[key] = status
            changes.podgroup_objects[key] = job.podgroup
        phase = status["phase"] if status is not None else job.phase
        gang_message = ssn.unschedulable_events.get(job.uid)
        if phase in ("Pending", "Inqueue", "Unknown") and gang_message is not None:
            # The event counts the pending pods; the condition, the ones still missing.
            pending = job.count(TaskStatus.PENDING)
            message = (
                f"{pending}/{len(job.tasks)} tasks in gang unschedulable: {job_fit_error(job)}"
            )
            changes.events.append(
                EventRecord(object_ref(job.podgroup), "Warning", "Unschedulable", message)
            )
        base = job.invalid[1] if job.invalid is not None else gang_message or ALL_NODES_UNAVAILABLE
        # Every pod left unbound says why, whatever its group's phase, as Volcano's scheduler
        # marks each pending pod it could not place.
        for task in job.tasks_with(
            TaskStatus.ALLOCATED | TaskStatus.PENDING | TaskStatus.PIPELINED
        ):
            reason, message = _task_reason(job, task, base)
            if _pod_condition_unchanged(task.pod, reason, message, task.nominated_node):
                continue
            changes.pod_conditions.append(
                PodCondition(
                    task.namespace, task.name, reason, message, task.nominated_node, task.pod
                )
            )
    _queue_allocated(ssn, allocated, changes)
    return changes


def _queue_allocated(ssn: Session, allocated: dict[str, Resource], changes: StatusChanges) -> None:
    """Each queue's allocated total, rolled up through its ancestors to ``root``."""
    totals: dict[str, Resource] = {name: Resource() for name in ssn.queues}
    for name, amount in allocated.items():
        seen: set[str] = set()
        current = name
        while current in ssn.queues and current not in seen:
            seen.add(current)
            totals[current].add(amount)
            current = ssn.queues[current].parent
    for name, total in totals.items():
        listed = total.to_list()
        listed.pop("pods", None)
        old = (ssn.queues[name].queue.get("status") or {}).get("allocated") or {}
        if Resource.from_list(old) != Resource.from_list(listed):
            changes.queues[name] = listed
            changes.queue_objects[name] = ssn.queues[name].queue

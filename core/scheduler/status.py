"""What a finished session means for stored objects: PodGroup status, pod conditions, queue
``status.allocated`` and events, as Volcano's scheduler writes them when it closes a session
(a PodGroup only when its status changed; a ``PodScheduled=False`` condition on each pod left
unbound)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from stromboli.core.api.constants import PODGROUP_READY_DETAIL, PodGroupConditionType
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.resource import CPU, MEMORY, PODS, Resource
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS, TaskStatus
from stromboli.core.scheduler.framework.closing import close_set
from stromboli.core.scheduler.framework.conditions import (
    GANG_OBJECTIONS,
    PodGroupConditionUpdate,
    is_queue_refusal,
    job_fit_error,
    merge_condition,
    podgroup_phase,
)
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.queueheld import HeldByQueue

#: Phases in which Volcano posts the gang's ``Unschedulable`` event on the PodGroup each session.
_UNREADY_PHASES = ("Pending", "Inqueue", "Unknown")


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
    #: (namespace, name) → annotations to add to the PodGroup (written with its status, or
    #: alone when the status is unchanged).
    podgroup_annotations: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    #: Queue name → new ``status.allocated`` ResourceList, only where it changed.
    queues: dict[str, dict[str, str]] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)
    #: Ids of the jobs closed that are not settled (``settled.py`` looks at them again).
    unsettled: set[str] = field(default_factory=set)


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
    objection = _own_objection(job)
    if objection is not None:
        reason, message = objection
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


def _own_objection(job: JobInfo) -> tuple[str, str] | None:
    """A ``jobValid`` objection Volcano has no counterpart of (capacity's queue hierarchy): it
    is written as the group's condition. Gang's own objections are not (see GANG_OBJECTIONS)."""
    if job.invalid is None or job.invalid[0] in GANG_OBJECTIONS:
        return None
    return job.invalid


def _task_reason(job: JobInfo, task: TaskInfo, base: str) -> tuple[str, str]:
    """PodScheduled reason and message of a task left unbound (Volcano's TaskSchedulingReason):
    a pending task whose placement this session was undone reports where it could have gone;
    one that fitted no node, its fit error; any other, the gang sentence ``base``, followed by
    Stromboli's queue refusal where allocate recorded one."""
    status, node = task.status, task.node_name
    if status == TaskStatus.PENDING and task.last_status is not None:
        status, node = task.last_status, task.last_node
    where = f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}"
    if status == TaskStatus.ALLOCATED:
        return "Schedulable", f"{where}, once minAvailable is satisfied"
    if status == TaskStatus.PIPELINED:
        return "Unschedulable", f"{where}, once resource is released and minAvailable is satisfied"
    error = job.fit_errors.get(task.uid)
    if error and is_queue_refusal(error):
        return "Unschedulable", f"{base}; {error}"
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


def collect(ssn: Session, now: str, held: HeldByQueue | None = None) -> StatusChanges:
    """What the closed session ``ssn`` changes. Only the jobs it closes are looked at (all of
    them without a ``CloseSet``, see ``framework/closing.py``); ``held`` keeps what each
    queue's jobs hold from cycle to cycle, so queue totals need no walk over settled jobs."""
    close = close_set(ssn.jobs, ssn.closing)
    changes = StatusChanges()
    allocated: dict[str, Resource] = {}
    plugin_events: dict[str, list[tuple[str, str, str]]] = {}
    for uid, kind, reason, message in ssn.job_events:
        plugin_events.setdefault(uid, []).append((kind, reason, message))
    incremental = held is not None and not close.full
    if held is not None and close.full:
        held.rebuild(close.jobs)
    for job in close.jobs:
        if held is not None and incremental:
            held.update(job)
        else:
            _add_held(allocated, job)
        if _close_job(ssn, job, now, plugin_events.get(job.uid, ()), changes):
            changes.unsettled.add(job.uid)
    if held is not None and incremental:
        for uid in close.gone:
            held.remove(uid)
        totals = held.totals()
        if totals is None:
            for job in ssn.jobs.values():  # a fraction somewhere: sum every job, as before
                _add_held(allocated, job)
        else:
            allocated = totals
    _queue_allocated(ssn, allocated, changes)
    return changes


def _add_held(allocated: dict[str, Resource], job: JobInfo) -> None:
    queue_total = allocated.setdefault(job.queue, Resource())
    held = job.tasks_with(ALLOCATED_STATUS)
    for task in held:
        queue_total.add(task.resreq)
    if held:  # Volcano's task request counts the pod itself (``pods: 1``)
        queue_total.amounts[PODS] = queue_total.get(PODS) + len(held)


def _close_job(
    ssn: Session,
    job: JobInfo,
    now: str,
    plugin_events: Iterable[tuple[str, str, str]],
    changes: StatusChanges,
) -> bool:
    """Add what ``job`` changes to ``changes``; False when the job is settled: nothing to
    write or report, no pod waiting, nothing a later cycle would say differently while the
    job stays as it is (see ``settled.py``)."""
    unsettled = False
    for kind, reason, message in plugin_events:
        changes.events.append(EventRecord(object_ref(job.podgroup), kind, reason, message))
        unsettled = True
    status = podgroup_status(ssn, job, now)
    key = (job.namespace, job.name)
    if status is not None:
        changes.podgroups[key] = status
        changes.podgroup_objects[key] = job.podgroup
        unsettled = True
    notes = ssn.outcome.podgroup_annotations.get(job.uid)
    if notes:
        changes.podgroup_annotations[key] = notes
        changes.podgroup_objects[key] = job.podgroup
        unsettled = True
    phase = status["phase"] if status is not None else job.phase
    waiting = job.tasks_with(TaskStatus.ALLOCATED | TaskStatus.PENDING | TaskStatus.PIPELINED)
    unready = phase in _UNREADY_PHASES
    fit_error = job_fit_error(job) if waiting or unready else ""
    if unready:
        # Volcano's RecordJobStatusEvent: every session, for every group short of running
        # (one whose pods do not exist yet included), counting its pending pods.
        pending = job.count(TaskStatus.PENDING)
        message = f"{pending}/{len(job.tasks)} tasks in gang unschedulable: {fit_error}"
        changes.events.append(
            EventRecord(object_ref(job.podgroup), "Warning", "Unschedulable", message)
        )
        unsettled = True
    elif status is not None:
        changes.events.append(
            EventRecord(object_ref(job.podgroup), "Normal", "Scheduled", PODGROUP_READY_DETAIL)
        )
    if waiting or job.fit_errors or job.job_fit_error or job.uid in ssn.unschedulable_events:
        unsettled = True  # tried (or to be tried) again next cycle, counted by the metrics
    objection = _own_objection(job)
    base = f"{fit_error}; {objection[1]}" if objection is not None else fit_error
    # Every pod left unbound says why, whatever its group's phase, as Volcano's scheduler
    # marks each pending pod it could not place.
    for task in waiting:
        if task.gated:
            # The API server gives a gated pod its own condition (SchedulingGated): leave it.
            continue
        reason, message = _task_reason(job, task, base)
        if _pod_condition_unchanged(task.pod, reason, message, task.nominated_node):
            continue
        changes.pod_conditions.append(
            PodCondition(task.namespace, task.name, reason, message, task.nominated_node, task.pod)
        )
    return unsettled


def _queue_allocated(ssn: Session, allocated: dict[str, Resource], changes: StatusChanges) -> None:
    """Each queue's allocated total, rolled up through its ancestors to ``root``, as Volcano
    writes it: ``cpu`` and ``memory`` always (``0`` when idle), ``pods`` and other resources
    when some pod holds them."""
    totals: dict[str, Resource] = {name: Resource() for name in ssn.queues}
    for name, amount in allocated.items():
        seen: set[str] = set()
        current = name
        while current in ssn.queues and current not in seen:
            seen.add(current)
            totals[current].add(amount)
            current = ssn.queues[current].parent
    for name, total in totals.items():
        listed = {CPU: "0", MEMORY: "0", **total.to_list()}
        stored = ssn.queues[name].queue.get("status") or {}
        old = stored.get("allocated") or {}
        if (
            set(old) != set(listed)
            or Resource.from_list(old) != Resource.from_list(listed)
            or "reservation" not in stored
        ):
            changes.queues[name] = listed
            changes.queue_objects[name] = ssn.queues[name].queue

"""Task (pod) statuses as a bit mask, and the groups Volcano's rules test against."""

from __future__ import annotations

from enum import IntFlag


class TaskStatus(IntFlag):
    """Where a pod stands from the scheduler's point of view."""

    PENDING = 1 << 0
    ALLOCATED = 1 << 1
    PIPELINED = 1 << 2
    BINDING = 1 << 3
    BOUND = 1 << 4
    RUNNING = 1 << 5
    RELEASING = 1 << 6
    SUCCEEDED = 1 << 7
    FAILED = 1 << 8
    UNKNOWN = 1 << 9

    @property
    def label(self) -> str:
        return (self.name or "").capitalize()


#: Tasks holding resources on a node (counted as allocated to their job and queue).
ALLOCATED_STATUS = TaskStatus.BOUND | TaskStatus.BINDING | TaskStatus.RUNNING | TaskStatus.ALLOCATED
#: Tasks that may be chosen as eviction victims.
PREEMPTABLE_STATUS = TaskStatus.BOUND | TaskStatus.RUNNING
#: Tasks the PodGroup phase counts as scheduled.
SCHEDULED_STATUS = TaskStatus.RUNNING | TaskStatus.BOUND | TaskStatus.FAILED | TaskStatus.SUCCEEDED
#: Finished tasks.
COMPLETED_STATUS = TaskStatus.FAILED | TaskStatus.SUCCEEDED
#: Tasks counted as ready for gang purposes.
READY_STATUS = ALLOCATED_STATUS | TaskStatus.SUCCEEDED
#: Tasks whose resources count on their node.
ON_NODE_STATUS = ALLOCATED_STATUS | TaskStatus.RELEASING | TaskStatus.PIPELINED


def status_from_pod(pod: dict) -> TaskStatus:
    """Map a pod's phase, node and deletion mark to a task status, as Volcano does."""
    phase = pod.get("status", {}).get("phase", "Pending")
    deleting = bool(pod.get("metadata", {}).get("deletionTimestamp"))
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if pod.get("spec", {}).get("nodeName") else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


_MEMBERS: dict[int, frozenset[TaskStatus]] = {}


def members(mask: TaskStatus) -> frozenset[TaskStatus]:
    """The single statuses in ``mask`` (cached: flag arithmetic is slow on hot paths)."""
    found = _MEMBERS.get(mask)
    if found is None:
        found = _MEMBERS[mask] = frozenset(s for s in TaskStatus if s & mask)
    return found

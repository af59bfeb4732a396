"""Why pods wait: each pod a session left unplaced, put in one reason class.

The classes summarise what the session already recorded (fit errors, vetoes, the PodGroup
phase, the queue's state) into a handful of labels an operator can graph and alert on;
the full messages stay on the pods' ``PodScheduled`` conditions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.conditions import is_queue_refusal
from stromboli.core.scheduler.framework.session import Session

#: A plugin vetoed the job (jobValid): fewer pods than the gang's minimum, for example.
INVALID = "invalid"
#: The job's queue is closed, closing or missing.
QUEUE_CLOSED = "queue-closed"
#: The pod has scheduling gates.
GATED = "gated"
#: The PodGroup is still Pending: enqueue has not admitted it (queue capability, cluster room).
NOT_ENQUEUED = "not-enqueued"
#: The queue is over its share or capability, so allocate passed it by.
OVERUSED = "overused"
#: No node has the free resources the pod requests.
RESOURCES = "resources"
#: Nodes were ruled out by predicates (taints, affinity, ports, ...), not only by resources.
PREDICATES = "predicates"
#: The pod could go somewhere, but its gang as a whole could not.
GANG = "gang"
#: The pod holds a node whose resources are still being released (pipelined).
PIPELINED = "pipelined"
#: None of the above was recorded (the cycle did not reach the job).
OTHER = "other"

REASONS = (
    INVALID,
    QUEUE_CLOSED,
    GATED,
    NOT_ENQUEUED,
    OVERUSED,
    RESOURCES,
    PREDICATES,
    GANG,
    PIPELINED,
    OTHER,
)

#: Task statuses of pods that wait for a node.
_WAITING = TaskStatus.PENDING | TaskStatus.ALLOCATED | TaskStatus.PIPELINED
_INSUFFICIENT = "Insufficient "
_NODES_PREFIX = " nodes are unavailable: "


def fit_error_reason(message: str) -> str:
    """The class of one fit error message (``0/5 nodes are unavailable: 3 Insufficient cpu,
    2 node(s) had untolerated taint ...``, or allocate's queue refusal)."""
    if is_queue_refusal(message):
        return OVERUSED
    _, found, details = message.partition(_NODES_PREFIX)
    if not found:
        return PREDICATES
    for part in details.rstrip(".").split(", "):
        _count, _, reason = part.partition(" ")
        if not reason.startswith(_INSUFFICIENT):
            return PREDICATES
    return RESOURCES


class PendingCounter:
    """Counts waiting pods by (queue, reason) over one finished session.

    Classifying is a walk over the jobs that have waiting pods; fit error messages repeat
    across pods of a shape, so each distinct message is parsed once.
    """

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._messages: dict[str, str] = {}
        self._overused: dict[str, bool] = {}

    def count(self, jobs: Iterable[JobInfo] | None = None) -> Counter[tuple[str, str]]:
        """Waiting pods by (queue, reason) among ``jobs`` (default: the session's)."""
        counts: Counter[tuple[str, str]] = Counter()
        for job in self.ssn.jobs.values() if jobs is None else jobs:
            for task in job.tasks_with(_WAITING):
                counts[(job.queue, self.reason(job, task))] += 1
        return counts

    def reason(self, job: JobInfo, task: TaskInfo) -> str:
        """Why ``task`` of ``job`` is still waiting, the most specific record first."""
        if job.invalid is not None:
            return INVALID
        queue = self.ssn.queues.get(job.queue)
        if queue is None or not queue.is_open():
            return QUEUE_CLOSED
        if task.gated:
            return GATED
        if task.status == TaskStatus.PIPELINED:
            return PIPELINED
        if job.is_pending() and job.uid not in self.ssn.enqueued:
            return NOT_ENQUEUED
        own = job.fit_errors.get(task.uid)
        if own is not None:
            return self._classify(own)
        if task.status == TaskStatus.ALLOCATED or task.last_status is not None:
            return GANG  # placed, then undone or held back because the gang fell short
        if job.fit_errors:
            return self._classify(next(iter(job.fit_errors.values())))
        if self._is_overused(queue):
            return OVERUSED
        if job.uid in self.ssn.unschedulable_events:
            return GANG
        return OTHER

    def _classify(self, message: str) -> str:
        reason = self._messages.get(message)
        if reason is None:
            reason = self._messages[message] = fit_error_reason(message)
        return reason

    def _is_overused(self, queue: QueueInfo) -> bool:
        verdict = self._overused.get(queue.name)
        if verdict is None:
            verdict = self._overused[queue.name] = self.ssn.overused(queue)
        return verdict

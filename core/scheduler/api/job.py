"""Tasks and jobs of one scheduling session (Volcano's TaskInfo and JobInfo)."""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field, fields

import numpy as np

from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.api.status import (
    ALLOCATED_STATUS,
    READY_STATUS,
    TaskStatus,
    members,
)

_ALLOCATED = members(ALLOCATED_STATUS)
#: Revisions of jobs, unique across all of them: a job and its clone hold the same one until
#: either changes, so the cache can tell that a clone it lent out is still what a fresh
#: clone would be (``SchedulerCache.snapshot``).
_REVISIONS = itertools.count(1)


@dataclass(slots=True, eq=False)
class TaskInfo:
    """One pod as the scheduler sees it. ``pod`` is the stored dict and is never mutated."""

    uid: str
    name: str
    namespace: str
    job_id: str
    role: str
    pod: dict
    resreq: Resource
    init_resreq: Resource
    status: TaskStatus
    priority: int
    preemptable: bool
    best_effort: bool
    gated: bool
    shape: str
    creation: str
    index: int
    node_name: str = ""
    #: Digest of what per-node scores depend on (requests, preferred node affinity, images);
    #: coarser than ``shape``, so score caches are shared by more pods.
    score_shape: str = ""
    #: Host ports the pod asks for, as (protocol, hostIP, port).
    host_ports: tuple[tuple[str, str, int], ...] = ()
    #: Row of the scheduling request in the snapshot's resource columns (pods column = 1).
    vector: np.ndarray | None = None
    #: Node chosen while pipelined (reported as ``nominatedNodeName``).
    nominated_node: str = ""
    #: Status and node of this session's last undone placement (Volcano's LastTransaction):
    #: a discarded allocation still tells the job's status where the task could have gone.
    last_status: TaskStatus | None = None
    last_node: str = ""

    def clone(self) -> TaskInfo:
        # One constructor call from a C attrgetter: several times faster than copy.copy on a
        # slotted dataclass, and snapshots clone every task every cycle.
        return TaskInfo(*_task_values(self))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


_task_values = operator.attrgetter(*(f.name for f in fields(TaskInfo)))
_READY = members(READY_STATUS)
#: Masks of the gang counters, combined once: IntFlag arithmetic is slow, and validity is
#: asked of every job every cycle.
_VALID = ALLOCATED_STATUS | TaskStatus.SUCCEEDED | TaskStatus.PIPELINED | TaskStatus.PENDING
_VALID_MEMBERS = members(_VALID)
_READY_OR_PIPELINED = READY_STATUS | TaskStatus.PIPELINED


@dataclass(slots=True, eq=False)
class JobInfo:
    """A PodGroup and its tasks."""

    uid: str
    name: str
    namespace: str
    queue: str
    priority: int
    min_available: int
    podgroup: dict
    creation: str
    #: ``podgroup`` is the scheduler's own (a plain pod's, ``--plain-pod-groups=memory``):
    #: nothing about it is written to the cluster.
    in_memory: bool = False
    min_task_member: dict[str, int] = field(default_factory=dict)
    min_resources: Resource | None = None
    preemptable: bool = False
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    by_status: dict[TaskStatus, dict[str, TaskInfo]] = field(default_factory=dict)
    allocated: Resource = field(default_factory=Resource)
    total_request: Resource = field(default_factory=Resource)
    #: Per-task fit errors of this session, keyed by task uid.
    fit_errors: dict[str, str] = field(default_factory=dict)
    #: Job-level reason this session could not place the gang.
    job_fit_error: str = ""
    #: Set when a plugin vetoes the job (jobValid); carries (reason, message).
    invalid: tuple[str, str] | None = None
    #: How many of ``tasks`` are best-effort (request nothing): gang counts ask on every
    #: comparison of two jobs, and nearly every job has none, which this tells at once.
    best_effort_tasks: int = 0
    #: A fresh number from ``_REVISIONS`` whenever a task is added, removed or moves status
    #: (every change of a task's status, node or nomination goes with one); a clone starts
    #: with its original's, so equal revisions mean neither changed since the clone was made.
    revision: int = field(default_factory=lambda: next(_REVISIONS))

    @property
    def phase(self) -> str:
        return (self.podgroup.get("status") or {}).get("phase") or "Pending"

    def is_pending(self) -> bool:
        return self.phase == "Pending"

    # -- task bookkeeping -------------------------------------------------------------------

    def add_task(self, task: TaskInfo) -> None:
        self.revision = next(_REVISIONS)
        self.tasks[task.uid] = task
        self.by_status.setdefault(task.status, {})[task.uid] = task
        self.total_request.add(task.resreq)
        if task.status in _ALLOCATED:
            self.allocated.add(task.resreq)
        if task.best_effort:
            self.best_effort_tasks += 1

    def remove_task(self, uid: str) -> None:
        task = self.tasks.pop(uid, None)
        if task is None:
            return
        self.revision = next(_REVISIONS)
        bucket = self.by_status.get(task.status)
        if bucket is not None:
            bucket.pop(uid, None)
        self.total_request.sub(task.resreq)
        if task.status in _ALLOCATED:
            self.allocated.sub(task.resreq)
        if task.best_effort:
            self.best_effort_tasks -= 1

    def update_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move a task to ``status``, keeping the index and allocated total right."""
        # Before the early return: callers change the task's node or nomination beside it.
        self.revision = next(_REVISIONS)
        old = task.status
        if old == status:
            return
        bucket = self.by_status.get(old)
        if bucket is not None:
            bucket.pop(task.uid, None)
        if old in _ALLOCATED:
            self.allocated.sub(task.resreq)
        task.status = status
        self.by_status.setdefault(status, {})[task.uid] = task
        if status in _ALLOCATED:
            self.allocated.add(task.resreq)

    def tasks_with(self, mask: TaskStatus) -> list[TaskInfo]:
        wanted = members(mask)
        out: list[TaskInfo] = []
        for status, bucket in self.by_status.items():
            if status in wanted:
                out.extend(bucket.values())
        return out

    def count(self, mask: TaskStatus) -> int:
        wanted = members(mask)
        total = 0
        for status, bucket in self.by_status.items():  # a plain loop: a hot path of ordering
            if status in wanted:
                total += len(bucket)
        return total

    # -- gang counters, as Volcano's job info counts them against minAvailable ------------------

    def ready_task_num(self) -> int:
        total = 0
        for status, bucket in self.by_status.items():  # count(READY_STATUS), inlined: hot
            if status in _READY:
                total += len(bucket)
        return total

    def waiting_task_num(self) -> int:
        return self.count(TaskStatus.PIPELINED)

    def pending_best_effort_num(self) -> int:
        if not self.best_effort_tasks:
            return 0
        return sum(1 for t in self.by_status.get(TaskStatus.PENDING, {}).values() if t.best_effort)

    def valid_task_num(self) -> int:
        total = 0
        for status, bucket in self.by_status.items():  # count(_VALID), inlined: hot
            if status in _VALID_MEMBERS:
                total += len(bucket)
        return total

    def is_ready(self) -> bool:
        return self.ready_task_num() + self.pending_best_effort_num() >= self.min_available

    def is_pipelined(self) -> bool:
        return (
            self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort_num()
            >= self.min_available
        )

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def _per_role(self, mask: TaskStatus) -> dict[str, int]:
        counts: dict[str, int] = {}
        wanted = members(mask)
        for status, bucket in self.by_status.items():
            if status in wanted:
                for task in bucket.values():
                    counts[task.role] = counts.get(task.role, 0) + 1
        return counts

    def _roles_checked(self) -> bool:
        """Per-role minima apply only when they fit inside the job minimum."""
        return bool(self.min_task_member) and self.min_available >= sum(
            self.min_task_member.values()
        )

    def _roles_meet(self, mask: TaskStatus, pending_best_effort: bool = False) -> bool:
        if not self._roles_checked():
            return True
        counts = self._per_role(mask)
        if pending_best_effort:
            # Best-effort pods count toward gang readiness while still Pending, as in Volcano:
            # allocate skips them and backfill places them later, so they never hold a gang back.
            for t in (self.by_status.get(TaskStatus.PENDING) or {}).values():
                if t.best_effort:
                    counts[t.role] = counts.get(t.role, 0) + 1
        return all(counts.get(role, 0) >= need for role, need in self.min_task_member.items())

    def check_task_valid(self) -> bool:
        if not self.min_task_member:
            return True  # _roles_checked() is False: nothing to count
        return self._roles_meet(_VALID)

    def check_task_ready(self) -> bool:
        return self._roles_meet(READY_STATUS, pending_best_effort=True)

    def check_task_pipelined(self) -> bool:
        return self._roles_meet(_READY_OR_PIPELINED, pending_best_effort=True)

    def check_task_starving(self) -> bool:
        if not self._roles_checked():
            return True
        counts = self._per_role(_READY_OR_PIPELINED)
        return any(counts.get(role, 0) < need for role, need in self.min_task_member.items())

    def clone(self) -> JobInfo:
        """A copy whose tasks and counters can change without touching the original."""
        job = JobInfo(*_job_values(self))  # as TaskInfo.clone: faster than copy.copy
        tasks = {uid: task.clone() for uid, task in self.tasks.items()}
        job.tasks = tasks
        job.by_status = {
            status: {uid: tasks[uid] for uid in bucket} for status, bucket in self.by_status.items()
        }
        job.allocated = self.allocated.clone()
        job.total_request = self.total_request.clone()
        job.fit_errors = {}
        job.min_task_member = dict(self.min_task_member)
        return job


_job_values = operator.attrgetter(*(f.name for f in fields(JobInfo)))

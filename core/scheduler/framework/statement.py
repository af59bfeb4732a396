"""A transaction over session state: allocate, pipeline and evict, then commit or discard.

Operations change the session at once, so later decisions in the same cycle see them; commit
hands allocations to the binder and evictions to the evictor, discard undoes everything in
reverse order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.outcome import Eviction

if TYPE_CHECKING:
    from stromboli.core.scheduler.framework.session import Session


@dataclass(slots=True)
class Operation:
    kind: str  # "allocate", "pipeline" or "evict"
    task: TaskInfo
    node: str
    previous: TaskStatus
    reason: str = ""


class Statement:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.operations: list[Operation] = []

    def _move(self, task: TaskInfo, node: str, status: TaskStatus) -> None:
        """Change a task's status, re-accounting it on ``node``."""
        ssn = self.ssn
        if task.node_name:
            ssn.nodes.remove_task(task.node_name, task)
        ssn.jobs[task.job_id].update_status(task, status)
        task.node_name = node
        if node:
            ssn.nodes.add_task(node, task)

    def allocate(self, task: TaskInfo, node: str) -> None:
        self.operations.append(Operation("allocate", task, node, task.status))
        self._move(task, node, TaskStatus.ALLOCATED)
        self.ssn.fire_allocate(task)

    def pipeline(self, task: TaskInfo, node: str) -> None:
        self.operations.append(Operation("pipeline", task, node, task.status))
        self._move(task, node, TaskStatus.PIPELINED)
        task.nominated_node = node
        self.ssn.fire_allocate(task)

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.operations.append(Operation("evict", task, task.node_name, task.status, reason))
        self._move(task, task.node_name, TaskStatus.RELEASING)
        self.ssn.fire_deallocate(task)

    def discard(self) -> None:
        for op in reversed(self.operations):
            if op.kind == "evict":
                self._move(op.task, op.node, op.previous)
                self.ssn.fire_allocate(op.task)
            else:
                # As Volcano's unallocate/unpipeline: the task leaves its node and job status
                # first, then handlers hear of it (still naming the node it left).
                task = op.task
                task.last_status, task.last_node = task.status, task.node_name
                if task.node_name:
                    self.ssn.nodes.remove_task(task.node_name, task)
                self.ssn.jobs[task.job_id].update_status(task, op.previous)
                self.ssn.fire_deallocate(task)
                task.node_name = ""
                task.nominated_node = ""
        self.operations.clear()

    def commit(self, action: str = "") -> None:
        # Actions evict a node's victims and then place the task they make room for, so an
        # eviction's preemptor is the next task placed in the statement.
        placed_next: TaskInfo | None = None
        preemptors: list[TaskInfo | None] = []
        for op in reversed(self.operations):
            if op.kind in ("allocate", "pipeline"):
                placed_next = op.task
            preemptors.append(placed_next)
        preemptors.reverse()
        for op, preemptor in zip(self.operations, preemptors, strict=True):
            if op.kind == "allocate":
                self.ssn.dispatch(op.task)
            elif op.kind == "evict":
                self.ssn.outcome.evictions.append(Eviction(op.task, op.reason, action, preemptor))
        self.operations.clear()

    def merge(self, other: Statement) -> None:
        self.operations.extend(other.operations)
        other.operations.clear()

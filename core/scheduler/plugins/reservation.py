"""reservation: a gang job that has waited too long gets nodes held for it.

Volcano lets a large gang starve: while a stream of small jobs keeps every node partly busy,
the gang never finds all of its room free at once. This plugin (not in Volcano) guards
against that. At each session it looks for *starving* jobs: gangs (``minMember`` above one)
that are not ready and have waited, since their PodGroup was created, longer than their
waiting time. The waiting time is the PodGroup annotation ``volcano.sh/sla-waiting-time`` (or
the bare ``sla-waiting-time``), else the plugin argument ``reservation.waiting-time`` (a Go
duration, default ``5m``).

For the most overdue starving job (earliest creation plus waiting time) it chooses nodes that
can hold the tasks the gang still needs once their running pods leave, nodes with the most
free room first, and for this session:

* ``predicate``: other jobs' tasks are kept off those nodes, unless the task fits in what the
  node has left after the starving job's share (so backfilling never delays the gang);
* ``job_order``: the starving job goes first.

Nothing is kept between sessions: the reserved nodes are chosen afresh each time, so they
follow the cluster, and once the gang fits, allocate places it as usual.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import ClassVar

import numpy as np

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import EventHandler, Session
from stromboli.core.scheduler.util.durations import creation_time, positive_duration
from stromboli.core.scheduler.util.placement import requested_columns

log = logging.getLogger(__name__)

WAITING_TIME_ARGUMENT = "reservation.waiting-time"
DEFAULT_WAITING_TIME = "5m"
EPSILON = 0.1


class ReservationPlugin(Plugin):
    name = "reservation"
    known_arguments: ClassVar[dict[str, object]] = {WAITING_TIME_ARGUMENT: DEFAULT_WAITING_TIME}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        where = f"reservation: argument {WAITING_TIME_ARGUMENT}"
        text = self.arguments.get(WAITING_TIME_ARGUMENT, DEFAULT_WAITING_TIME)
        self.default_wait: timedelta | None = positive_duration(text, where)
        #: The starving job chosen for this session, or None.
        self.target: JobInfo | None = self.choose_target()
        #: Per node, what the target still needs there (rows of ``ssn.nodes``); None until
        #: the first predicate call (other plugins' predicates must be registered first).
        self.share: np.ndarray | None = None
        #: Per node, what the target was given there during this session.
        self.placed: np.ndarray | None = None
        self.reserved: np.ndarray | None = None
        self._computing = False
        if self.target is None:
            return
        log.info("reservation: job %s is starving; reserving nodes for it", self.target.uid)
        ssn.register(ExtensionPoint.JOB_ORDER, self.name, self.job_order)
        ssn.register(ExtensionPoint.PREDICATE, self.name, self.predicate)
        ssn.add_event_handler(EventHandler(allocate=self._allocated, deallocate=self._released))

    # -- which job starves ------------------------------------------------------------------

    def waiting_time(self, job: JobInfo) -> timedelta | None:
        annotations = (job.podgroup.get("metadata") or {}).get("annotations") or {}
        for key in (k.SLA_WAITING_TIME_KEY, k.SLA_WAITING_TIME_BARE_KEY):
            if key in annotations:
                wait = positive_duration(annotations[key], f"reservation: PodGroup {job.uid} {key}")
                if wait is not None:
                    return wait
        return self.default_wait

    def overdue_since(self, job: JobInfo) -> datetime | None:
        """When the job began to starve (creation plus waiting time), or None."""
        if job.min_available <= 1 or job.ready_task_num() >= job.min_available:
            return None
        if not job.by_status.get(TaskStatus.PENDING):
            return None
        wait = self.waiting_time(job)
        created = creation_time(job)
        if wait is None or created is None:
            return None
        deadline = created + wait
        return deadline if self.ssn.now >= deadline else None

    def choose_target(self) -> JobInfo | None:
        found: list[tuple[datetime, str, JobInfo]] = []
        for job in self.ssn.jobs.values():
            if job.queue not in self.ssn.queues:
                continue
            deadline = self.overdue_since(job)
            if deadline is not None:
                found.append((deadline, job.uid, job))
        if not found:
            return None
        found.sort(key=lambda item: (item[0], item[1]))
        return found[0][2]

    # -- which nodes are held ---------------------------------------------------------------

    def needed_tasks(self, job: JobInfo) -> list[TaskInfo]:
        """The pending tasks the gang still needs to become ready, in task order."""
        pending = [
            t
            for t in (job.by_status.get(TaskStatus.PENDING) or {}).values()
            if not t.best_effort and not t.gated
        ]
        pending = self.ssn.sorted_tasks(pending)
        missing = max(job.min_available - job.ready_task_num(), 0)
        return pending[:missing]

    def compute(self) -> None:
        """Choose the reserved nodes and the target's share on each (greedy first fit)."""
        nodes = self.ssn.nodes
        count, width = len(nodes), nodes.allocatable.shape[1]
        self.share = np.zeros((count, width))
        self.placed = np.zeros((count, width))
        self.reserved = np.zeros(count, dtype=bool)
        assert self.target is not None
        tasks = self.needed_tasks(self.target)
        if not tasks or not count:
            return
        # What each node holds once its running pods are gone (pipelined work stays).
        eventual = nodes.allocatable - nodes.pipelined
        # Most free room first: by free share of the scarcest requested resource now.
        first = nodes.task_vector(tasks[0])
        columns = requested_columns(first)
        if columns.shape[0]:
            with np.errstate(divide="ignore", invalid="ignore"):
                free = np.where(
                    nodes.allocatable[:, columns] > 0,
                    nodes.future[:, columns] / nodes.allocatable[:, columns],
                    0.0,
                ).min(axis=1)
        else:
            free = np.zeros(count)
        order = sorted(range(count), key=lambda p: (-free[p], p))
        room = eventual.copy()
        unusable: dict[str, np.ndarray] = {}
        self._computing = True
        try:
            for task in tasks:
                vector = nodes.task_vector(task)
                wanted = requested_columns(vector)
                key = task.shape or task.uid
                if key not in unusable:
                    verdict = self.ssn.predicate(task)
                    blocked = np.zeros(count, dtype=bool)
                    for mask, _reason, unresolvable in verdict.reasons:
                        if unresolvable:
                            blocked |= mask
                    unusable[key] = blocked
                blocked = unusable[key]
                for position in order:
                    if blocked[position]:
                        continue
                    if np.all(room[position, wanted] >= vector[wanted] - EPSILON):
                        room[position] -= vector
                        self.share[position] += vector
                        self.reserved[position] = True
                        break
        finally:
            self._computing = False

    # -- callbacks --------------------------------------------------------------------------

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        assert self.target is not None
        if left.uid == right.uid:
            return 0
        if left.uid == self.target.uid:
            return -1
        if right.uid == self.target.uid:
            return 1
        return 0

    def predicate(self, task: TaskInfo) -> Filter:
        nodes = self.ssn.nodes
        result = Filter.all_pass(len(nodes))
        if self._computing or self.target is None:
            return result
        if self.share is None:
            self.compute()
        if task.job_id == self.target.uid:
            return result
        assert self.share is not None and self.placed is not None and self.reserved is not None
        if not self.reserved.any():
            return result
        vector = nodes.task_vector(task)
        columns = requested_columns(vector)
        left = nodes.future - np.clip(self.share - self.placed, 0.0, None)
        fits = np.ones(len(nodes), dtype=bool)
        for column in columns:
            fits &= left[:, column] >= vector[column] - EPSILON
        reason = f"node(s) reserved for starving job {self.target.namespace}/{self.target.name}"
        result.fail(self.reserved & ~fits, reason)
        return result

    def _allocated(self, task: TaskInfo) -> None:
        if self.placed is None or self.target is None or task.job_id != self.target.uid:
            return
        position = self.ssn.nodes.position.get(task.node_name or "")
        if position is not None:
            self.placed[position] += self.ssn.nodes.task_vector(task)

    def _released(self, task: TaskInfo) -> None:
        if self.placed is None or self.target is None or task.job_id != self.target.uid:
            return
        position = self.ssn.nodes.position.get(task.node_name or "")
        if position is not None:
            placed = self.placed[position] - self.ssn.nodes.task_vector(task)
            self.placed[position] = np.clip(placed, 0.0, None)

"""allocate: place pending tasks, job by job, committing a gang only when it is whole.

Queues are visited in queue order (skipping overused ones), one job per visit, jobs in job
order, tasks in task order. A task goes to the best node whose idle resources hold it, or is
pipelined onto resources being released. The job's statement is committed once the job is
ready (``jobReady``), kept in the session when it is only pipelined, and discarded otherwise,
so a partial gang is never bound.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import numpy as np

from stromboli.core.scheduler.actions.enqueue import mark_inqueue
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import READY_STATUS, TaskStatus
from stromboli.core.scheduler.framework.conditions import queue_refusal, terminating_members_only
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.plugin import Action
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.statement import Statement
from stromboli.core.scheduler.util.hypernode_search import (
    NEITHER,
    PIPELINED,
    READY,
    best_of,
    everywhere,
    level_rows,
    prospects,
)
from stromboli.core.scheduler.util.hypernodes import (
    gradients,
    job_anchor,
    job_topology,
    network_topology,
    record_allocated_hypernode,
    session_tree,
)
from stromboli.core.scheduler.util.placement import place
from stromboli.core.scheduler.util.queues import PriorityQueue, QueueJobs
from stromboli.core.scheduler.util.subgroup_placement import fill_subgroups, ready
from stromboli.core.scheduler.util.subgroups import has_subgroups


def need_continue(job: JobInfo, failed_roles: set[str]) -> bool:
    """Whether the job's other tasks may still make its gang after tasks of ``failed_roles``
    fitted nowhere (Volcano's NeedContinueAllocating)."""
    if job.min_available == len(job.tasks):
        return False  # every member is needed, and one cannot be placed
    pending = (job.by_status.get(TaskStatus.PENDING) or {}).values()
    if job.min_available < sum(job.min_task_member.values()):
        left = sum(1 for t in pending if t.role not in failed_roles)
        return job.ready_task_num() + left >= job.min_available
    placed: dict[str, int] = {}
    for t in job.tasks_with(READY_STATUS):
        placed[t.role] = placed.get(t.role, 0) + 1
    for t in pending:
        if t.best_effort:
            placed[t.role] = placed.get(t.role, 0) + 1
    return all(placed.get(r, 0) >= job.min_task_member.get(r, 0) for r in failed_roles)


def pending_tasks(job: JobInfo) -> list[TaskInfo]:
    """The job's tasks allocate places: pending, not best-effort (backfill's), not gated."""
    return [
        t
        for t in (job.by_status.get(TaskStatus.PENDING) or {}).values()
        if not t.best_effort and not t.gated
    ]


def has_work(job: JobInfo) -> bool:
    """Whether allocating ``job`` can change anything: it has a task to place, or a HyperNode
    or sub-group choice to make. A job without is left out of allocate's job queues: visiting
    it would place nothing and commit an empty statement, and most jobs of a busy cluster
    (settled one-pod groups) are such, so leaving them out keeps a cycle's ordering work to
    the jobs that are waiting."""
    for t in (job.by_status.get(TaskStatus.PENDING) or {}).values():
        if not t.best_effort and not t.gated:
            return True
    return network_topology(job) is not None or has_subgroups(job)


def schedulable_jobs(ssn: Session, promote_pending: bool) -> QueueJobs:
    """Jobs allocate may work on: admitted (or promoted when there is no enqueue), valid,
    in a known queue, and with work to do (``has_work``); every admitted job in a known queue
    is still checked for validity, which its PodGroup's status reports."""
    plan = QueueJobs(ssn)
    for job in ssn.jobs.values():
        if job.is_pending():
            if not promote_pending:
                continue
            mark_inqueue(ssn, job.uid)
        if job.queue not in ssn.queues:
            continue
        objection = ssn.job_valid(job)
        if objection is not None:
            # A gang short only because scheduled members are terminating is left alone,
            # not reported invalid: its PodGroup stays Running (Volcano e2e "PodGroup should
            # stay Running while scheduled members are terminating").
            if not terminating_members_only(job):
                job.invalid = objection
            continue
        if has_work(job):
            plan.add(job)
    return plan


class AllocateAction(Action):
    name = "allocate"
    known_arguments: ClassVar[dict[str, object]] = {"predicateErrorCacheEnable": True}

    def execute(self, ssn: Session) -> None:
        plan = schedulable_jobs(ssn, promote_pending="enqueue" not in ssn.config.actions)
        pending: dict[str, PriorityQueue[TaskInfo]] = {}
        #: Per job, the roles (``volcano.sh/task-spec``) of tasks that fitted no node.
        failed: dict[str, set[str]] = {}
        while True:
            queue = plan.pop_queue()
            if queue is None:
                break
            if ssn.overused(queue):
                continue
            jobs = plan.jobs.get(queue.name)
            if not jobs:
                continue
            job = jobs.pop()
            tasks = pending.get(job.uid)
            if tasks is None:
                tasks = pending[job.uid] = PriorityQueue(ssn.task_less, pending_tasks(job))
            try:
                self.allocate_job(ssn, queue, job, tasks, jobs, failed.setdefault(job.uid, set()))
            except Exception as err:  # crash-only: a job that breaks a plugin waits alone
                ssn.outcome.set_aside.append((job, err))
            plan.requeue(queue)

    #: Try every HyperNode of a tier instead of the bounded search (tests compare the two).
    exhaustive_search: ClassVar[bool] = False

    @staticmethod
    def allocate_job(
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: PriorityQueue[TaskInfo],
        jobs: PriorityQueue[JobInfo],
        failed_roles: set[str] | None = None,
    ) -> None:
        failed_roles = set() if failed_roles is None else failed_roles
        domain: tuple[str, np.ndarray] | None = None
        stmt: Statement | None = None
        if network_topology(job) is not None:
            choice = AllocateAction._choose_hypernode(ssn, queue, job, tasks, jobs, failed_roles)
            if choice is None:
                return
            domain, stmt = choice
        if stmt is None:
            stmt = ssn.statement()
            try:
                AllocateAction._fill(ssn, queue, job, tasks, jobs, failed_roles, stmt, domain)
            except Exception:
                stmt.discard()
                raise
        if ready(ssn, job):
            stmt.commit("allocate")
            if domain is not None:
                record_allocated_hypernode(ssn, job)
        elif not ssn.job_pipelined(job):
            stmt.discard()

    @staticmethod
    def _choose_hypernode(
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: PriorityQueue[TaskInfo],
        jobs: PriorityQueue[JobInfo],
        failed_roles: set[str],
    ) -> tuple[tuple[str, np.ndarray], Statement | None] | None:
        """The HyperNode a job with ``networkTopology`` goes into (with the job's placement
        there when the last trial already made it), or None to leave it pending.

        Tiers are tried from the lowest the job may use; in a tier the best-scoring HyperNode
        where a trial placement (undone) makes the gang ready wins, one where it is only
        pipelined when none is ready. So a hard job is never placed across a tier it may not
        span, and a soft one lands in the lowest tier that holds it. Which HyperNodes need a
        trial is decided by ``util/hypernode_search``.
        """
        tree = session_tree(ssn)
        topology = job_topology(job, tree)
        assert topology is not None
        anchor = job_anchor(job, tree)
        waiting = pending_tasks(job)
        table = ssn.nodes
        trials = _Trials(ssn, queue, job, waiting)
        fast = not AllocateAction.exhaustive_search
        try:
            for level in gradients(topology, tree, anchor):
                rows = level_rows(ssn, tree, level) if fast and len(level) > 1 else None
                known = None if rows is None else prospects(ssn, job, rows, waiting)
                if known is None:
                    known = everywhere(len(level))
                chosen = best_of(
                    known.bounds,
                    known.can_ready,
                    known.can_place,
                    functools.partial(trials.run_at, level),
                )
                if chosen is None:
                    continue
                name = level[chosen]
                kept = trials.keep(name, tasks, jobs, failed_roles)
                for uid in [t.uid for t in waiting]:
                    job.fit_errors.pop(uid, None)
                return (name, tree.mask(name, table.position, len(table))), kept
        finally:
            trials.close()
        where = f"hyperNode {anchor}" if anchor else "any hyperNode"
        job.job_fit_error = (
            f"the gang does not fit in {where} of tier <= {topology.highest_tier} "
            f"(networkTopology mode {topology.mode})"
        )
        for task in waiting:
            ssn.record_fit_error(job, task, job.job_fit_error)
        return None

    @staticmethod
    def _fill(
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: PriorityQueue[TaskInfo],
        jobs: PriorityQueue[JobInfo],
        failed_roles: set[str],
        stmt: Statement,
        domain: tuple[str, np.ndarray] | None = None,
    ) -> None:
        """Place the job's pending tasks one by one on ``stmt`` until it is ready, inside
        ``domain`` (a HyperNode's name and node mask) when one is given."""
        if has_subgroups(job):  # partitions: each placed whole, in its own HyperNode
            waiting = []
            while tasks:
                waiting.append(tasks.pop())
            exhaustive = AllocateAction.exhaustive_search
            fill_subgroups(ssn, queue, job, waiting, stmt, domain, exhaustive)
            return
        while tasks:
            task = tasks.pop()
            if task.role and task.role in failed_roles:
                continue  # a task of this role already fitted nowhere
            if not ssn.allocatable(queue, task):
                ssn.record_fit_error(job, task, queue_refusal(queue.name))
                continue
            result = place(ssn, task) if domain is None else place(ssn, task, domain=domain)
            if isinstance(result, FitErrors):
                ssn.record_fit_error(job, task, result)
                failed_roles.add(task.role)
                if need_continue(job, failed_roles):
                    continue
                break
            if result.fits_idle:
                stmt.allocate(task, result.node)
            else:
                stmt.pipeline(task, result.node)
            if ssn.job_ready(job) and tasks:
                jobs.push(job)
                break


class _Trials:
    """Trial placements of one job, one HyperNode at a time; the latest stays in place until
    the next trial (or :meth:`close`), so that the chosen one, when it was the latest, is
    kept instead of undone and placed again the same way."""

    def __init__(self, ssn: Session, queue: QueueInfo, job: JobInfo, waiting: list[TaskInfo]):
        self.ssn, self.queue, self.job, self.waiting = ssn, queue, job, waiting
        self.open: Statement | None = None
        self.name = ""
        #: Of the open trial: tasks taken from its queue, and whether it re-queued the job.
        self.taken = 0
        self.requeued = False
        self.ready = False

    def run_at(self, level: list[str], i: int) -> tuple[int, float]:
        return self.run(level[i])

    def run(self, name: str) -> tuple[int, float]:
        self.close()
        ssn, job = self.ssn, self.job
        table = ssn.nodes
        mask = session_tree(ssn).mask(name, table.position, len(table))
        trial = ssn.statement()
        queue = PriorityQueue(ssn.task_less, self.waiting)
        requeue: PriorityQueue[JobInfo] = PriorityQueue(ssn.job_less, [])
        try:
            AllocateAction._fill(ssn, self.queue, job, queue, requeue, set(), trial, (name, mask))
            rank = READY if ready(ssn, job) else NEITHER
            if not rank and trial.operations and ssn.job_pipelined(job):
                rank = PIPELINED
            score = ssn.hyper_node_score(job, name, np.flatnonzero(mask)) if rank else 0.0
        except Exception:
            self._undo(trial)
            raise
        self.open, self.name = trial, name
        self.taken, self.requeued = len(self.waiting) - len(queue), bool(requeue)
        self.ready = rank == READY
        return rank, score

    def keep(
        self,
        name: str,
        tasks: PriorityQueue[TaskInfo],
        jobs: PriorityQueue[JobInfo],
        failed_roles: set[str],
    ) -> Statement | None:
        """The open trial as the job's placement in ``name`` when it is exactly what placing
        the job there would do (the same tasks to place, each placed); else None."""
        trial = self.open
        if (
            trial is None
            or self.name != name
            or not self.ready
            or failed_roles
            or len(tasks) != len(self.waiting)
            or len(trial.operations) != self.taken
        ):
            return None
        taken = [tasks.pop() for _ in range(self.taken)]
        if [t.uid for t in taken] != [op.task.uid for op in trial.operations]:
            for task in taken:  # a task order that is not total: place the job afresh
                tasks.push(task)
            return None
        if self.requeued:
            jobs.push(self.job)
        self.open = None
        for task in self.waiting:  # as after an undone trial
            task.last_status, task.last_node = None, ""
        return trial

    def close(self) -> None:
        if self.open is not None:
            trial, self.open = self.open, None
            self._undo(trial)

    def _undo(self, trial: Statement) -> None:
        trial.discard()
        for task in self.waiting:  # a trial placement is no hint where the task could go
            task.last_status, task.last_node = None, ""

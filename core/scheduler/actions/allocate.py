"""allocate: place pending tasks, job by job, committing a gang only when it is whole.

Queues are visited in queue order (skipping overused ones), one job per visit, jobs in job
order, tasks in task order. A task goes to the best node whose idle resources hold it, or is
pipelined onto resources being released. The job's statement is committed once the job is
ready (``jobReady``), kept in the session when it is only pipelined, and discarded otherwise,
so a partial gang is never bound.
"""

from __future__ import annotations

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


def schedulable_jobs(ssn: Session, promote_pending: bool) -> QueueJobs:
    """Jobs allocate may work on: admitted (or promoted when there is no enqueue), valid,
    and in a known queue."""
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
        if network_topology(job) is not None:
            domain = AllocateAction._choose_hypernode(ssn, queue, job)
            if domain is None:
                return
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
        ssn: Session, queue: QueueInfo, job: JobInfo
    ) -> tuple[str, np.ndarray] | None:
        """The HyperNode a job with ``networkTopology`` goes into, or None to leave it pending.

        Tiers are tried from the lowest the job may use; in a tier each HyperNode gets a trial
        placement (undone at once) and the best-scoring one where the gang is ready wins (one
        where it is only pipelined when none is ready). So a hard job is never placed across
        a tier it may not span, and a soft one lands in the lowest tier that holds it.
        """
        tree = session_tree(ssn)
        topology = job_topology(job, tree)
        assert topology is not None
        anchor = job_anchor(job, tree)
        waiting = pending_tasks(job)
        table = ssn.nodes
        for level in gradients(topology, tree, anchor):
            best: tuple[int, float, str] | None = None
            for name in level:
                mask = tree.mask(name, table.position, len(table))
                trial = ssn.statement()
                try:
                    AllocateAction._fill(
                        ssn,
                        queue,
                        job,
                        PriorityQueue(ssn.task_less, waiting),
                        PriorityQueue(ssn.job_less, []),
                        set(),
                        trial,
                        (name, mask),
                    )
                    rank = 2 if ready(ssn, job) else 0
                    if not rank and trial.operations and ssn.job_pipelined(job):
                        rank = 1
                    score = ssn.hyper_node_score(job, name, np.flatnonzero(mask)) if rank else 0.0
                finally:
                    trial.discard()
                for task in waiting:  # a trial placement is no hint where the task could go
                    task.last_status, task.last_node = None, ""
                if rank and (best is None or (rank, score) > best[:2]):
                    best = (rank, score, name)
            if best is not None:
                for uid in [t.uid for t in waiting]:
                    job.fit_errors.pop(uid, None)
                name = best[2]
                return name, tree.mask(name, table.position, len(table))
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
            fill_subgroups(ssn, queue, job, waiting, stmt, domain)
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

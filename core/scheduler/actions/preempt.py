"""preempt: a starving job evicts lower-priority work of its own queue, as Volcano's does.

For every admitted, valid, starving job (``jobStarving``; jobs with network-topology
constraints are left out), queue by queue in queue order:

1. Between jobs of the queue, jobs in job order. Each pending, ungated task in task order
   (pods with ``preemptionPolicy: Never`` excepted) tries the nodes whose predicates fail for
   nothing that eviction cannot fix, best-scored first. On a node the candidates are the
   Running/Bound pods of *other* jobs of the *same* queue that are preemptable (pod
   ``volcano.sh/preemptable``, default true); a best-effort pod may only evict best-effort
   pods; the plugins narrow them (``ssn.preemptable``). Victims go lowest-priority first until
   the task fits the node (queue allocatable, future idle, predicates); the task is then
   pipelined there. The job's evictions are committed only if the job is pipelined
   (``jobPipelined``) once its tasks are through, else all of them are undone.
2. Within each starving job: a pending task may evict lower-priority pods of its own job
   (as the plugins allow), committed task by task; the first failure ends the job's turn.

Evicted pods are written as ``Evict`` events and deleted; their resources count as releasing,
so the preemptor, pipelined now, is bound in a later cycle once its victims are gone.

``enableTopologyAwarePreemption: true`` looks at several candidate nodes before choosing
(between ``minCandidateNodesAbsolute`` or ``minCandidateNodesPercentage`` percent of the nodes,
and ``maxCandidateNodesAbsolute``) and evicts on the one whose victims matter least, as
kube-scheduler does: the lowest highest victim priority, then the lowest sum of victim
priorities, then the fewest victims. On each node the victims are chosen as kube-scheduler
does too: after evicting in victim order until the task fits, each victim is put back,
highest priority first, if the task still fits without evicting it (Volcano e2e "should
preempt low priority pod with anti-affinity constraint": the low-priority pod not in the
way is spared, the middle-priority one the task's anti-affinity objects to goes).
``topologyAwarePreemptWorkerNum`` and ``predicateErrorCacheEnable`` are accepted; a session
is single-threaded and computes predicates for all nodes at once, so neither changes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import PREEMPTABLE_STATUS, TaskStatus, members
from stromboli.core.scheduler.framework.plugin import Action
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.statement import Statement
from stromboli.core.scheduler.util.queues import PriorityQueue
from stromboli.core.scheduler.util.victims import (
    PREEMPT,
    FailureMemo,
    Trial,
    by_node,
    by_score,
    candidate_nodes,
    commit,
    count_attempt,
    eligible_to_evict,
    evict_then_reprieve,
    evict_until_fits,
    fits_future,
    fits_now,
    has_network_topology,
    mask_of,
    never_preempts,
    passes_predicates,
    room_with,
    victim_order,
)


def pending_tasks(ssn: Session, job: JobInfo) -> PriorityQueue[TaskInfo]:
    """The job's pending, ungated tasks in task order."""
    return PriorityQueue(
        ssn.task_less,
        [t for t in (job.by_status.get(TaskStatus.PENDING) or {}).values() if not t.gated],
    )


def preemptors(ssn: Session) -> dict[str, list[JobInfo]]:
    """Starving jobs that may preempt, by queue name."""
    found: dict[str, list[JobInfo]] = {}
    for job in ssn.jobs.values():
        if job.is_pending() or job.queue not in ssn.queues or job.invalid is not None:
            continue
        if ssn.job_valid(job) is not None or not ssn.job_starving(job):
            continue
        if has_network_topology(job):
            continue
        found.setdefault(job.queue, []).append(job)
    return found


class PreemptAction(Action):
    name = "preempt"
    known_arguments: ClassVar[dict[str, object]] = {
        "predicateErrorCacheEnable": True,
        "enableTopologyAwarePreemption": False,
        "topologyAwarePreemptWorkerNum": 16,
        "minCandidateNodesPercentage": 10,
        "minCandidateNodesAbsolute": 1,
        "maxCandidateNodesAbsolute": 100,
    }

    def execute(self, ssn: Session) -> None:
        args = ssn.config.action_args(self.name)
        args.get_bool("predicateErrorCacheEnable", True)
        args.get_int("topologyAwarePreemptWorkerNum", 16)
        self.topology_aware = args.get_bool("enableTopologyAwarePreemption", False)
        self.min_percentage = args.get_int("minCandidateNodesPercentage", 10)
        self.min_absolute = args.get_int("minCandidateNodesAbsolute", 1)
        self.max_absolute = args.get_int("maxCandidateNodesAbsolute", 100)

        starving = preemptors(ssn)
        if not starving:
            return
        self.memo = {"between": FailureMemo(ssn), "within": FailureMemo(ssn)}
        tasks = {job.uid: pending_tasks(ssn, job) for jobs in starving.values() for job in jobs}
        queues = PriorityQueue(ssn.queue_less, [ssn.queues[name] for name in starving])
        while queues:
            queue = queues.pop()
            # Pods that may ever be victims in this queue; statuses are checked at each use
            # (evictions of this action take them out, discards put them back).
            pool = [
                t
                for job in ssn.jobs.values()
                if job.queue == queue.name
                for t in job.tasks_with(PREEMPTABLE_STATUS)
                if t.preemptable
            ]
            jobs = PriorityQueue(ssn.job_less, list(starving[queue.name]))
            while jobs:
                self.between_jobs(ssn, queue, jobs.pop(), tasks, pool)
            for job in starving[queue.name]:
                self.within_job(ssn, queue, job)

    def between_jobs(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks: dict[str, PriorityQueue[TaskInfo]],
        pool: list[TaskInfo],
    ) -> None:
        stmt = ssn.statement()
        pending = tasks[job.uid]
        while pending and ssn.job_starving(job):
            preemptor = pending.pop()
            if self.skip(preemptor, self.memo["between"]):
                continue
            candidates = [t for t in pool if t.job_id != preemptor.job_id and allowed(preemptor, t)]
            if not self.preempt(ssn, stmt, queue, preemptor, candidates):
                self.memo["between"].failed(preemptor)
        if ssn.job_pipelined(job):
            commit(ssn, stmt, self.name)
        else:
            stmt.discard()

    def within_job(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        pending = pending_tasks(ssn, job)
        while pending:
            preemptor = pending.pop()
            if self.skip(preemptor, self.memo["within"]):
                break
            candidates = [t for t in job.tasks_with(PREEMPTABLE_STATUS) if allowed(preemptor, t)]
            stmt = ssn.statement()
            if not self.preempt(ssn, stmt, queue, preemptor, candidates):
                stmt.discard()
                self.memo["within"].failed(preemptor)
                break
            commit(ssn, stmt, self.name)

    @staticmethod
    def skip(preemptor: TaskInfo, memo: FailureMemo) -> bool:
        return never_preempts(preemptor) or memo.known_to_fail(preemptor)

    def preempt(
        self,
        ssn: Session,
        stmt: Statement,
        queue: QueueInfo,
        preemptor: TaskInfo,
        candidates: list[TaskInfo],
    ) -> bool:
        """Try to place ``preemptor`` by evicting some of ``candidates``; on success the
        evictions and the pipelining are merged into ``stmt``."""
        if not eligible_to_evict(ssn, preemptor) or ssn.pre_predicate(preemptor):
            return False
        grouped: dict[int, list[TaskInfo]] = {}
        if candidates and ssn.victims_possible(ExtensionPoint.PREEMPTABLE, preemptor, candidates):
            grouped = by_node(ssn, candidates)
        # (When the plugins refuse them all, only a node with room already is left.)
        wanted = mask_of(ssn, grouped) | fits_now(ssn, preemptor)
        positions = by_score(ssn, preemptor, candidate_nodes(ssn, preemptor, wanted))

        def fits_on(position: int) -> Callable[[], bool]:
            return lambda: (
                ssn.allocatable(queue, preemptor)
                and fits_future(ssn, preemptor, position)
                and passes_predicates(ssn, preemptor, position)
            )

        def victims_on(position: int) -> list[TaskInfo] | None:
            on_node = grouped.get(position, [])
            if not room_with(ssn, preemptor, position, on_node):
                return None  # not even all of them would do: spare the plugins
            victims = ssn.preemptable(preemptor, on_node) if on_node else []
            if not room_with(ssn, preemptor, position, victims):
                return None
            return victim_order(ssn, victims, preemptor)

        if self.topology_aware:
            chosen = self.best_candidate(ssn, preemptor, positions, victims_on, fits_on)
            if chosen is None:
                return False
            stmt.merge(chosen)
            return True
        for position in positions:
            victims = victims_on(position)
            if victims is None:
                continue
            count_attempt(ssn, victims)
            trial = evict_until_fits(ssn, preemptor, position, victims, PREEMPT, fits_on(position))
            if trial is not None:
                stmt.merge(trial)
                return True
        return False

    def best_candidate(
        self,
        ssn: Session,
        preemptor: TaskInfo,
        positions: list[int],
        victims_on: Callable[[int], list[TaskInfo] | None],
        fits_on: Callable[[int], Callable[[], bool]],
    ) -> Statement | None:
        """Dry-run the candidate nodes (victims chosen with reprieve, as kube-scheduler does)
        and return the trial of the one whose eviction costs least."""
        wanted = len(ssn.nodes) * self.min_percentage // 100
        wanted = min(max(wanted, self.min_absolute), self.max_absolute)
        trials: list[Trial] = []
        for position in positions:
            victims = victims_on(position)
            if victims is None:
                continue
            trial = evict_then_reprieve(
                ssn, preemptor, position, victims, PREEMPT, fits_on(position)
            )
            if trial is None:
                continue
            evicted = [op.task for op in trial.operations if op.kind == "evict"]
            trial.discard()
            trials.append(Trial(position, evicted))
            if len(trials) >= max(wanted, 1):
                break
        if not trials:
            return None
        best = min(trials, key=Trial.rank)
        count_attempt(ssn, victims_on(best.position) or [])
        chosen = ssn.statement()
        for victim in best.victims:
            chosen.evict(victim, PREEMPT)
        chosen.pipeline(preemptor, ssn.nodes.nodes[best.position].name)
        return chosen


_VICTIM_STATUSES = members(PREEMPTABLE_STATUS)


def allowed(preemptor: TaskInfo, victim: TaskInfo) -> bool:
    """The pod-level conditions on a victim: bound or running, preemptable, and not a
    resource-requesting pod when the preemptor is best-effort."""
    if victim.status not in _VICTIM_STATUSES or not victim.preemptable:
        return False
    return victim.best_effort or not preemptor.best_effort

"""What the gang-aware evicting actions (``gangpreempt``, ``gangreclaim``) share, as Volcano's do.

The task-level actions (``preempt``, ``reclaim``) pick victims pod by pod and node by node, and
can only protect a victim gang by refusing pods at its minimum. These actions reason about whole
jobs instead: the candidate victims of each job are split into *bundles*,

- a **safe** bundle: the pods the job can lose and stay gang-ready — the surplus above its
  ``minAvailable`` and, where ``minTaskMember`` applies, above each role's minimum;
- a **whole** bundle: the rest of the job's pods, which may only go together with the safe
  bundle, so that the job is evicted entirely (offered only when every pod the job holds a node
  with is a candidate, and only when ``allowWholeBundle``).

Bundles are tried safe first, then whole; among each kind the victim that would be scheduled
last goes first (job order, or for reclaim the victim queue order), then the best return on
investment: how much of what the preemptor still needs the bundle frees, per unit of work it
destroys (a whole bundle destroys its whole job). Victims are added in that order (a safe
bundle pod by pod, a whole bundle at once), only on nodes some pod of the gang could use, until
the freed room and the room already free could hold the preemptor gang; then a plan is dry-run:
evict them and pipeline every pending pod of the preemptor. The plan is kept only if the
preemptor job is then pipelined, else undone and the next victim added. Before it is kept, the
steps the gang turned out not to need are given back (re-planning without them). So no victim
gang is ever left running below its minimum, unless a whole bundle evicted all of it.

Which pods may be victims at all is asked of the plugins through the same hooks the task-level
actions use (``preemptable`` for gangpreempt, ``reclaimable`` for gangreclaim), combined with
Volcano's tier rule, over all candidates at once in bundle order (so plugins that count as they
go, such as a queue's deserved share, see the victims in the order they would leave). The
``gang`` plugin's vote is set aside: it only lets pods beyond a job's minimum go, which is
exactly what the bundle split already decides (Volcano's gang plugin permits every candidate of
these actions for the same reason).

A *domain* is where one attempt looks for victims and room. Volcano's domains are HyperNodes
from the network-topology plugins; Stromboli's scheduler has no HyperNode placement yet, so the
only domain is the whole cluster and ``maxDomains`` (validated, at least 1) bounds a list of
one. Jobs with network-topology constraints are left out, as the task-level preempt does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from stromboli.core.api.constants import PREEMPTABLE_KEY
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.resource import EPSILON
from stromboli.core.scheduler.api.status import (
    ALLOCATED_STATUS,
    READY_STATUS,
    TaskStatus,
    members,
)
from stromboli.core.scheduler.framework.arguments import ArgumentError
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.plugin import Action
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.statement import Statement
from stromboli.core.scheduler.util.placement import place, requested_columns
from stromboli.core.scheduler.util.queues import PriorityQueue
from stromboli.core.scheduler.util.victims import (
    commit,
    eligible_to_evict,
    has_network_topology,
    never_preempts,
)

SAFE = "safe"
WHOLE = "whole"

#: Plugins whose victim vote the bundle split replaces (see the module docstring).
BUNDLE_AWARE_PLUGINS = frozenset({"gang"})

#: The one domain there is without HyperNode placement.
CLUSTER_DOMAIN = "<cluster>"

_ON_NODE = members(ALLOCATED_STATUS)


@dataclass(slots=True, eq=False)
class Bundle:
    """Pods of one victim job that are evicted together."""

    kind: str  # SAFE or WHOLE
    job: JobInfo
    tasks: list[TaskInfo]
    #: What evicting the bundle frees (task vectors summed).
    freed: np.ndarray
    #: What evicting it destroys: the bundle itself, or for a whole bundle the whole job.
    destroyed: np.ndarray

    def roi(self, need: np.ndarray) -> float:
        """Share of ``need`` the bundle frees, per share of ``need`` it destroys."""
        columns = requested_columns(need)
        if not columns.shape[0]:
            return 0.0
        wanted = need[columns]
        useful = float((np.minimum(self.freed[columns], wanted) / wanted).sum())
        cost = float((self.destroyed[columns] / wanted).sum())
        if useful <= 0.0:
            return 0.0
        return useful / cost if cost > 0.0 else float("inf")


@dataclass(slots=True)
class Domain:
    """Nodes one attempt looks at (by position in the session's node table)."""

    name: str
    positions: np.ndarray
    names: set[str] = field(default_factory=set)


# -- arguments -----------------------------------------------------------------------------------


def max_domains(ssn: Session, action: str) -> int:
    args = ssn.config.action_args(action)
    value = args.get_int("maxDomains", 8)
    if value < 1:
        raise ArgumentError(f"{action}: argument 'maxDomains' must be at least 1, got {value!r}")
    return value


def candidate_domains(ssn: Session, limit: int) -> list[Domain]:
    """Up to ``limit`` domains, best first: without HyperNode placement, the whole cluster."""
    positions = np.arange(len(ssn.nodes), dtype=np.intp)
    domains = [Domain(CLUSTER_DOMAIN, positions, set(ssn.nodes.position))]
    return domains[:limit]


def usable_part(ssn: Session, domain: Domain, pending: list[TaskInfo]) -> Domain:
    """The nodes of ``domain`` some pod of the gang could use if pods left them: no predicate
    fails there for a reason eviction cannot fix (taints, node affinity, cordoned). Victims
    elsewhere would be evicted for nothing."""
    usable = np.zeros(len(ssn.nodes), dtype=bool)
    seen: set[str] = set()
    for task in pending:
        if task.shape in seen:
            continue
        seen.add(task.shape)
        fixable = np.ones(len(ssn.nodes), dtype=bool)
        for mask, _reason, unresolvable in ssn.predicate(task).reasons:
            if unresolvable:
                fixable &= ~mask
        usable |= fixable
    positions = domain.positions[usable[domain.positions]]
    nodes = ssn.nodes.nodes
    return Domain(domain.name, positions, {nodes[int(p)].name for p in positions})


# -- jobs ----------------------------------------------------------------------------------------


def victim_job_allowed(job: JobInfo) -> bool:
    """A PodGroup that says ``volcano.sh/preemptable: "false"`` is never a victim; one that
    says nothing may be (Volcano's default for the gang actions)."""
    meta = job.podgroup.get("metadata") or {}
    marked = PREEMPTABLE_KEY in (meta.get("annotations") or {}) or PREEMPTABLE_KEY in (
        meta.get("labels") or {}
    )
    return job.preemptable if marked else True


def pending_gang(ssn: Session, job: JobInfo) -> list[TaskInfo] | None:
    """The job's pending, ungated pods in task order, or None when the job may not evict:
    nothing pending, a pod with ``preemptionPolicy: Never``, or a pod whose earlier victims are
    still leaving its nominated node (see ``eligible_to_evict``)."""
    pending = [t for t in (job.by_status.get(TaskStatus.PENDING) or {}).values() if not t.gated]
    if not pending:
        return None
    for task in pending:
        if never_preempts(task) or not eligible_to_evict(ssn, task):
            return None
    return ssn.sorted_tasks(pending)


def starving_jobs(ssn: Session) -> dict[str, PriorityQueue[JobInfo]]:
    """Admitted, valid, starving jobs without network-topology constraints, by queue, each
    queue's in job order."""
    found: dict[str, PriorityQueue[JobInfo]] = {}
    for job in ssn.jobs.values():
        if job.is_pending() or job.invalid is not None or job.queue not in ssn.queues:
            continue
        if ssn.job_valid(job) is not None or not ssn.job_starving(job):
            continue
        if has_network_topology(job):
            continue
        found.setdefault(job.queue, PriorityQueue(ssn.job_less)).push(job)
    return found


# -- bundles -------------------------------------------------------------------------------------


def _sum(ssn: Session, tasks: Iterable[TaskInfo]) -> np.ndarray:
    total = np.zeros(len(ssn.nodes.index))
    for task in tasks:
        total = total + ssn.nodes.task_vector(task)
    return total


def _role_counts(job: JobInfo) -> dict[str, int]:
    """Pods per role that count toward the job's per-role readiness."""
    counts: dict[str, int] = {}
    for task in job.tasks_with(READY_STATUS):
        counts[task.role] = counts.get(task.role, 0) + 1
    for task in (job.by_status.get(TaskStatus.PENDING) or {}).values():
        if task.best_effort:
            counts[task.role] = counts.get(task.role, 0) + 1
    return counts


def job_bundles(ssn: Session, job: JobInfo, candidates: list[TaskInfo]) -> list[Bundle]:
    """Split one job's candidate victims into its safe and whole bundles.

    Candidates go in victim order (the pod that would be scheduled last first). A pod is safe
    while the job keeps more than ``minAvailable`` ready pods without it and, when the per-role
    minimums apply (they fit inside ``minAvailable``), its role keeps more than its minimum. A
    job that is not gang-ready already cannot be broken further: all its candidates are safe.
    """
    if not candidates:
        return []

    def victim_first(left: TaskInfo, right: TaskInfo) -> int:
        return -ssn.task_compare(left, right)

    ordered = sorted(candidates, key=functools.cmp_to_key(victim_first))
    surplus = job.ready_task_num() + job.pending_best_effort_num() - job.min_available
    if surplus < 0:
        freed = _sum(ssn, ordered)
        return [Bundle(SAFE, job, ordered, freed, freed)]
    roles = job.min_task_member
    roles_apply = bool(roles) and job.min_available >= sum(roles.values())
    role_surplus: dict[str, int] = {}
    if roles_apply:
        counts = _role_counts(job)
        role_surplus = {role: counts.get(role, 0) - need for role, need in roles.items()}
    safe: list[TaskInfo] = []
    rest: list[TaskInfo] = []
    for task in ordered:
        role_ok = not roles_apply or task.role not in role_surplus or role_surplus[task.role] > 0
        if surplus > 0 and role_ok:
            safe.append(task)
            surplus -= 1
            if roles_apply and task.role in role_surplus:
                role_surplus[task.role] -= 1
        else:
            rest.append(task)
    bundles: list[Bundle] = []
    if safe:
        freed = _sum(ssn, safe)
        bundles.append(Bundle(SAFE, job, safe, freed, freed))
    holding = {t.uid for t in job.tasks.values() if t.status in _ON_NODE}
    offered = {t.uid for t in candidates}
    # A whole bundle must take every pod the job holds a node with, or the job would be left
    # running below its minimum.
    if rest and holding <= offered:
        bundles.append(
            Bundle(WHOLE, job, rest, _sum(ssn, rest), _sum(ssn, job.tasks_with(ALLOCATED_STATUS)))
        )
    return bundles


def evictable(
    ssn: Session, point: ExtensionPoint, evictor: TaskInfo, candidates: list[TaskInfo]
) -> list[TaskInfo]:
    """The plugins' verdict on ``candidates`` at ``point`` (``preemptable``/``reclaimable``),
    combined as ``Session`` combines it (first tier with victims decides; within a tier the
    voters intersect and one empty answer leaves the tier with none), the bundle-aware plugins
    left out."""
    return ssn.victims_without(point, evictor, candidates, BUNDLE_AWARE_PLUGINS)


def approve(ssn: Session, bundles: list[Bundle], allowed: set[str]) -> list[Bundle]:
    """Bundles cut down to the pods the plugins allow: a safe bundle keeps what is allowed; a
    whole bundle stays only if all of it and all of its job's safe bundle are allowed."""
    out: list[Bundle] = []
    refused_jobs: set[str] = set()
    for bundle in bundles:
        kept = [t for t in bundle.tasks if t.uid in allowed]
        if len(kept) != len(bundle.tasks):
            refused_jobs.add(bundle.job.uid)
        if bundle.kind == SAFE and kept:
            freed = _sum(ssn, kept)
            out.append(Bundle(SAFE, bundle.job, kept, freed, freed))
    for bundle in bundles:
        if bundle.kind == WHOLE and bundle.job.uid not in refused_jobs:
            out.append(bundle)
    return out


def order(
    bundles: list[Bundle], need: np.ndarray, victim_compare: Callable[[Bundle, Bundle], int]
) -> list[Bundle]:
    """Safe bundles before whole ones; then ``victim_compare``; then the best return on
    investment; then the fewest pods; then the job's uid (stable across cycles)."""
    rois = {id(b): b.roi(need) for b in bundles}

    def compare(left: Bundle, right: Bundle) -> int:
        if left.kind != right.kind:
            return -1 if left.kind == SAFE else 1
        if left.job.uid != right.job.uid:
            verdict = victim_compare(left, right)
            if verdict:
                return verdict
        if rois[id(left)] != rois[id(right)]:
            return -1 if rois[id(left)] > rois[id(right)] else 1
        if len(left.tasks) != len(right.tasks):
            return -1 if len(left.tasks) < len(right.tasks) else 1
        return (left.job.uid > right.job.uid) - (left.job.uid < right.job.uid)

    return sorted(bundles, key=functools.cmp_to_key(compare))


def keeps_gangs_whole(trial: list[Bundle], kept: list[Bundle]) -> bool:
    """Whether ``trial`` (part of ``kept``) still takes every safe pod of each job it evicts
    whole: a whole bundle without its job's safe pods would leave the job partly running."""
    whole = {s.job.uid for s in trial if s.kind == WHOLE}
    return all(s in trial for s in kept if s.kind == SAFE and s.job.uid in whole)


def steps(ssn: Session, bundles: list[Bundle]) -> list[Bundle]:
    """``bundles`` as the steps victims are added in: a safe bundle pod by pod (any part of it
    is safe), a whole bundle at once."""
    out: list[Bundle] = []
    for bundle in bundles:
        if bundle.kind == WHOLE:
            out.append(bundle)
            continue
        for task in bundle.tasks:
            vector = ssn.nodes.task_vector(task).copy()
            out.append(Bundle(SAFE, bundle.job, [task], vector, vector))
    return out


# -- the plan ------------------------------------------------------------------------------------


def domain_room(ssn: Session, domain: Domain) -> np.ndarray:
    """What the domain's nodes hold free once the pods leaving them are gone."""
    return ssn.nodes.future[domain.positions].clip(min=0).sum(axis=0)


def covers(room: np.ndarray, need: np.ndarray, freed: np.ndarray) -> bool:
    """Whether ``room`` plus ``freed`` could hold ``need`` (fragmentation aside)."""
    total = room + freed
    return all(total[c] >= need[c] - EPSILON for c in requested_columns(need))


def build_plan(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    pending: list[TaskInfo],
    victims: list[TaskInfo],
    reason: str,
    admits: Callable[[QueueInfo, TaskInfo], bool],
) -> Statement | None:
    """Evict ``victims`` and pipeline every pod of ``pending`` where it fits best; return the
    statement when the job is then pipelined, else undo everything and return None."""
    trial = ssn.statement()
    for victim in victims:
        trial.evict(victim, reason)
    for task in pending:
        if not admits(queue, task):
            trial.discard()
            return None
        placement = place(ssn, task, use_future_idle=True)
        if isinstance(placement, FitErrors):
            trial.discard()
            return None
        trial.pipeline(task, placement.node)
    if not ssn.job_pipelined(job):
        trial.discard()
        return None
    return trial


# -- the action --------------------------------------------------------------------------------


class GangEviction(Action):
    """The loop both gang-aware actions share; subclasses say who may be a victim."""

    #: Extension point the plugins vote on victims through.
    point: ClassVar[ExtensionPoint] = ExtensionPoint.PREEMPTABLE
    known_arguments: ClassVar[dict[str, object]] = {"maxDomains": 8, "allowWholeBundle": True}

    def read_arguments(self, ssn: Session) -> None:
        self.max_domains = max_domains(ssn, self.name)
        self.allow_whole = ssn.config.action_args(self.name).get_bool("allowWholeBundle", True)

    def candidates(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, domain: Domain
    ) -> dict[str, list[TaskInfo]]:
        """Candidate victims in ``domain`` for ``job``, by victim job uid."""
        raise NotImplementedError

    def victim_compare(self, ssn: Session, queue: QueueInfo) -> Callable[[Bundle, Bundle], int]:
        """Which of two victim jobs' bundles goes first (negative: the left)."""
        raise NotImplementedError

    def admits(self, ssn: Session) -> Callable[[QueueInfo, TaskInfo], bool]:
        """Whether the preemptor's queue may take one more of its pods."""
        raise NotImplementedError

    def run_job(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        """Evict for ``job``; commit only if it ends up pipelined."""
        stmt = ssn.statement()
        self.evict_for(ssn, stmt, queue, job)
        if ssn.job_pipelined(job):
            commit(ssn, stmt, self.name)
        else:
            stmt.discard()

    def evict_for(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo) -> bool:
        pending = pending_gang(ssn, job)
        if pending is None or ssn.pre_predicate(pending[0]):
            return False
        need = _sum(ssn, pending)
        for domain in candidate_domains(ssn, self.max_domains):
            domain = usable_part(ssn, domain, pending)
            room = domain_room(ssn, domain)
            chosen: list[Bundle] = []
            freed = np.zeros_like(need)
            for step in steps(ssn, self.domain_bundles(ssn, queue, job, pending, need, domain)):
                chosen.append(step)
                freed = freed + step.freed
                if not covers(room, need, freed):
                    continue
                plan = self.plan(ssn, queue, job, pending, room, chosen)
                if plan is not None:
                    stmt.merge(plan)
                    return True
        return False

    def plan(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        pending: list[TaskInfo],
        room: np.ndarray,
        chosen: list[Bundle],
    ) -> Statement | None:
        """The plan for evicting ``chosen``, less the steps the gang turns out not to need.

        Bundles are added in preference order until the gang fits, so the last one may free
        enough on its own: steps that made room on no node the gang was placed on are dropped
        first, then each earlier step whose room is not needed (safe pods taken before a whole
        bundle that alone makes room, say), so no pod is evicted for nothing.
        """
        need = _sum(ssn, pending)

        def attempt(steps: list[Bundle]) -> Statement | None:
            victims = [t for step in steps for t in step.tasks]
            return build_plan(ssn, queue, job, pending, victims, self.name, self.admits(ssn))

        plan = attempt(chosen)
        if plan is None:
            return None
        kept = list(chosen)
        used = {op.node for op in plan.operations if op.kind == "pipeline"}
        useful = [s for s in kept if any(t.node_name in used for t in s.tasks)]
        whole = {s.job.uid for s in useful if s.kind == WHOLE}
        trials = [[s for s in kept if s in useful or (s.kind == SAFE and s.job.uid in whole)]]
        trials += [[s for s in kept if s is not step] for step in kept[:-1]]
        for trial in trials:
            trial = [s for s in trial if s in kept]
            if len(trial) == len(kept) or not keeps_gangs_whole(trial, kept):
                continue
            freed = sum((s.freed for s in trial), np.zeros_like(need))
            if not covers(room, need, freed):
                continue
            plan.discard()
            smaller = attempt(trial)
            if smaller is not None:
                plan, kept = smaller, trial
                continue
            plan = attempt(kept)
            if plan is None:  # the same plan again; only a plugin keeping state could fail it
                return None
        return plan

    def domain_bundles(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        pending: list[TaskInfo],
        need: np.ndarray,
        domain: Domain,
    ) -> list[Bundle]:
        """The bundles worth trying in ``domain``, in the order they are added."""
        bundles = [
            bundle
            for uid, tasks in self.candidates(ssn, queue, job, domain).items()
            for bundle in job_bundles(ssn, ssn.jobs[uid], tasks)
        ]
        if not bundles:
            return []
        compare = self.victim_compare(ssn, queue)
        bundles = order(bundles, need, compare)
        flat = [t for bundle in bundles for t in bundle.tasks]
        allowed = {t.uid for t in evictable(ssn, self.point, pending[0], flat)}
        bundles = order(approve(ssn, bundles, allowed), need, compare)
        return [b for b in bundles if b.kind == SAFE or self.allow_whole]

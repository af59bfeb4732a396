"""What the evicting actions (``preempt``, ``reclaim``) share: which nodes a task could use if
some pods left, in which order victims leave, and the per-node trial that evicts victims one by
one until the task fits and then pipelines it there.

A trial runs in its own statement: when the task fits after some evictions, the evictions and
the pipelining are merged into the caller's statement (which the action commits or discards
for the whole job); when it does not fit, the trial is discarded and the node left as it was,
so no pod is ever evicted for nothing.

Besides the plugins' verdicts (``ssn.preemptable``/``ssn.reclaimable``), while the ``gang``
plugin votes on the action's extension point, a victim is never taken from another job if that
would leave the job with fewer ready pods than its ``minAvailable`` (unless its minimum is one).
The ``gang`` plugin votes the same way, but Volcano's tier rule lets a later tier (``drf``)
decide when the first tier finds no victim at all, and that path must not break gangs either.
With gang's vote switched off (``enablePreemptable: false``, as in Volcano's Helm and CI
configurations) the other plugins alone decide, as in Volcano: a lower-priority gang may then
be evicted below its minimum (Volcano e2e "preemption only works in the same queue").

Two shortcuts keep a cycle with a long backlog affordable without changing any outcome: the
actions ask the plugins once about all candidates of a preemptor and skip the node-by-node
questions when the plugins refuse them all (``ssn.victims_possible``), and a task shape that
found no room is not tried again until the session changes (:class:`FailureMemo`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.resource import EPSILON
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.statement import Statement
from stromboli.core.scheduler.util.placement import requested_columns, resource_fit

#: Eviction reasons, as Volcano writes them into the ``Evict`` events.
PREEMPT = "preempt"
RECLAIM = "reclaim"
SHUFFLE = "shuffle"


def never_preempts(task: TaskInfo) -> bool:
    """A pod with ``preemptionPolicy: Never`` waits instead of evicting others."""
    return (task.pod.get("spec") or {}).get("preemptionPolicy") == "Never"


def has_network_topology(job: JobInfo) -> bool:
    """Jobs with network-topology constraints are not preempted for (as in Volcano)."""
    spec = job.podgroup.get("spec") or {}
    if spec.get("networkTopology"):
        return True
    return any(policy.get("networkTopology") for policy in spec.get("subGroupPolicy") or ())


def pod_priority(pod: dict) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def terminating_by_preemption(pod: dict) -> bool:
    """A pod being deleted because a scheduler preempted it."""
    if not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "DisruptionTarget"
        and c.get("status") == "True"
        and c.get("reason") == "PreemptionByScheduler"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def eligible_to_evict(ssn: Session, task: TaskInfo) -> bool:
    """Whether ``task`` may evict pods this cycle (Volcano's taskEligibleToPreempt).

    A pod nominated to a node in an earlier cycle does not evict again while that node holds
    it once the pods leaving it are gone (placing it is then allocate's work), nor while
    lower-priority pods evicted by a scheduler are still terminating there. Unlike Volcano,
    which also holds back a pod whose nominated node merely passes the predicates, a
    nomination whose room was taken meanwhile does not keep the pod from preempting again.
    """
    if never_preempts(task):
        return False
    nominated = task.nominated_node
    if not nominated:
        return True
    position = ssn.nodes.position.get(nominated)
    if position is None:
        return False
    verdict = ssn.predicate(task)
    if verdict.passed[position] and fits_future(ssn, task, position):
        return False
    for mask, _reason, unresolvable in verdict.reasons:
        if unresolvable and mask[position]:
            return True
    priority = pod_priority(task.pod)
    for other in ssn.nodes.nodes[position].tasks.values():
        if pod_priority(other.pod) < priority and terminating_by_preemption(other.pod):
            return False
    return True


# -- nodes -------------------------------------------------------------------------------------


def candidate_nodes(ssn: Session, task: TaskInfo, wanted: np.ndarray) -> np.ndarray:
    """Positions of the ``wanted`` nodes (a bool mask) where evicting pods could make room
    for ``task``: no predicate fails for a reason eviction cannot fix (taints, node affinity,
    an unschedulable node), and the node's allocatable less what is already promised to
    pipelined pods holds the request."""
    nodes = ssn.nodes
    if not len(nodes):
        return np.zeros(0, dtype=np.intp)
    usable = wanted.copy()
    for mask, _reason, unresolvable in ssn.predicate(task).reasons:
        if unresolvable:
            usable &= ~mask
    vector = nodes.task_vector(task)
    ceiling = nodes.allocatable - nodes.pipelined
    for column in requested_columns(vector):
        usable &= ceiling[:, column] >= vector[column] - EPSILON
    return np.flatnonzero(usable)


def fits_now(ssn: Session, task: TaskInfo) -> np.ndarray:
    """Nodes that take ``task`` without evicting anything more: it fits their future idle
    and passes the predicates."""
    resource_ok, _ = resource_fit(ssn, ssn.nodes.task_vector(task), True)
    return resource_ok & ssn.predicate(task).passed


def by_node(ssn: Session, tasks: Iterable[TaskInfo]) -> dict[int, list[TaskInfo]]:
    """``tasks`` grouped by the position of their node."""
    grouped: dict[int, list[TaskInfo]] = {}
    position = ssn.nodes.position
    for task in tasks:
        at = position.get(task.node_name)
        if at is not None:
            grouped.setdefault(at, []).append(task)
    return grouped


def mask_of(ssn: Session, positions: Iterable[int]) -> np.ndarray:
    mask = np.zeros(len(ssn.nodes), dtype=bool)
    mask[list(positions)] = True
    return mask


def by_score(ssn: Session, task: TaskInfo, positions: np.ndarray) -> list[int]:
    """``positions`` best-scored first (node order breaks ties)."""
    if positions.shape[0] > 1 and ssn.has_scorers():
        scores = ssn.node_scores(task, positions)
        order = np.argsort(-scores, kind="stable")
        return [int(p) for p in positions[order]]
    return [int(p) for p in positions]


def fits_future(
    ssn: Session, task: TaskInfo, position: int, extra: np.ndarray | None = None
) -> bool:
    """Whether ``task`` fits the node's future idle (plus ``extra``) on every requested
    resource."""
    nodes = ssn.nodes
    vector = nodes.task_vector(task)
    room = nodes.future[position] if extra is None else nodes.future[position] + extra
    return all(room[c] >= vector[c] - EPSILON for c in requested_columns(vector))


def room_with(ssn: Session, task: TaskInfo, position: int, victims: Iterable[TaskInfo]) -> bool:
    """Whether evicting all of ``victims`` would make room for ``task`` (Volcano's
    ValidateVictims): an early, cheap no."""
    nodes = ssn.nodes
    freed = np.zeros(len(nodes.index))
    for victim in victims:
        freed += nodes.task_vector(victim)
    return fits_future(ssn, task, position, freed)


def passes_predicates(ssn: Session, task: TaskInfo, position: int) -> bool:
    return bool(ssn.predicate(task).passed[position])


class FailureMemo:
    """Remembers task shapes that found no room while the session stayed as it was.

    Pods of one job with one shape (requests, placement constraints, priority) fare alike:
    once one of them could not be placed by evicting, the next is skipped until something
    in the session changes (any node's use, which every placement and eviction touches). A
    failed attempt undoes its trial evictions, so the session is then as it was before it.
    """

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._failed: dict[tuple, int] = {}

    def _stamp(self) -> int:
        return int(self.ssn.nodes.versions.sum())

    @staticmethod
    def key(task: TaskInfo) -> tuple:
        return (task.job_id, task.shape, task.priority, task.nominated_node)

    def known_to_fail(self, task: TaskInfo) -> bool:
        return self._failed.get(self.key(task)) == self._stamp()

    def failed(self, task: TaskInfo) -> None:
        self._failed[self.key(task)] = self._stamp()


# -- victims -----------------------------------------------------------------------------------


#: The extension point that decides victims for each eviction reason.
VICTIM_POINT = {PREEMPT: ExtensionPoint.PREEMPTABLE, RECLAIM: ExtensionPoint.RECLAIMABLE}


def keeps_gang(ssn: Session, victim: TaskInfo, evictor: TaskInfo, reason: str = PREEMPT) -> bool:
    """Whether evicting ``victim`` leaves its job either whole or at least at its minimum
    (always true when the gang plugin does not vote on victims for ``reason``)."""
    if not ssn.enabled(VICTIM_POINT.get(reason, ExtensionPoint.PREEMPTABLE), "gang"):
        return True
    if victim.job_id == evictor.job_id:
        return True  # the evictor takes the victim's place in the same job
    job = ssn.jobs.get(victim.job_id)
    if job is None or job.min_available <= 1:
        return True
    return job.ready_task_num() - 1 >= job.min_available


def victim_order(ssn: Session, victims: list[TaskInfo], evictor: TaskInfo) -> list[TaskInfo]:
    """``victims`` in the order they should go (Volcano's victims priority queue): tasks whose
    job left the session first; across queues the reverse of the queue order (or the
    ``victim_queue_order`` plugins); otherwise the job that would be scheduled last, and
    within a job the task that would be scheduled last."""
    evictor_job = ssn.jobs.get(evictor.job_id)
    evictor_queue = ssn.queues.get(evictor_job.queue) if evictor_job is not None else None

    def compare(left: TaskInfo, right: TaskInfo) -> int:
        if left.job_id == right.job_id:
            return -ssn.task_compare(left, right)
        left_job, right_job = ssn.jobs.get(left.job_id), ssn.jobs.get(right.job_id)
        if left_job is None or right_job is None:
            if left_job is None and right_job is None:
                return -ssn.task_compare(left, right)
            return -1 if left_job is None else 1
        if evictor_job is not None and left_job.queue != right_job.queue:
            left_queue = ssn.queues.get(left_job.queue)
            right_queue = ssn.queues.get(right_job.queue)
            if left_queue is not None and right_queue is not None:
                verdict = ssn.victim_queue_compare(left_queue, right_queue, evictor_queue)
                if verdict:
                    return verdict
        verdict = -ssn.job_compare(left_job, right_job)
        if verdict:
            return verdict
        return -ssn.task_compare(left, right)

    return sorted(victims, key=functools.cmp_to_key(compare))


# -- the per-node trial --------------------------------------------------------------------------


@dataclass(slots=True)
class Trial:
    """What evicting on one node for one task would take (for choosing among nodes)."""

    position: int
    victims: list[TaskInfo]

    def rank(self) -> tuple[int, int, int]:
        """Kube-scheduler's preference among preemption candidates: the lowest highest
        victim priority, then the lowest sum of priorities, then the fewest victims."""
        priorities = [v.priority for v in self.victims]
        return (max(priorities, default=-(2**31)), sum(priorities), len(priorities))


def evict_until_fits(
    ssn: Session,
    task: TaskInfo,
    position: int,
    victims: list[TaskInfo],
    reason: str,
    fits: Callable[[], bool],
) -> Statement | None:
    """Evict ``victims`` in order until ``fits()``, then pipeline ``task`` on the node.

    Returns the trial statement holding the evictions and the pipelining (for the caller to
    merge), or None with everything undone when the task does not fit.
    """
    trial = ssn.statement()
    ok = fits()
    for victim in victims:
        if ok:
            break
        if not victim.status & (TaskStatus.RUNNING | TaskStatus.BOUND):
            continue  # already taken by an earlier trial of this session
        if not keeps_gang(ssn, victim, task, reason):
            continue
        trial.evict(victim, reason)
        ok = fits()
    if not ok:
        trial.discard()
        return None
    trial.pipeline(task, ssn.nodes.nodes[position].name)
    return trial


def evict_then_reprieve(
    ssn: Session,
    task: TaskInfo,
    position: int,
    victims: list[TaskInfo],
    reason: str,
    fits: Callable[[], bool],
) -> Statement | None:
    """Like :func:`evict_until_fits`, then spare what need not go, as kube-scheduler picks
    victims on a node: the victims taken are put back one by one, highest priority first,
    and each stays evicted only if the task no longer fits with it back. A low-priority pod
    evicted early but not in the way (say, not the one the task's anti-affinity objects to)
    is spared."""
    trial = evict_until_fits(ssn, task, position, victims, reason, fits)
    if trial is None:
        return None
    taken = [op.task for op in trial.operations if op.kind == "evict"]
    trial.discard()
    needed = list(taken)
    for candidate in reversed(taken):
        rest = [t for t in needed if t is not candidate]
        probe = ssn.statement()
        for victim in rest:
            probe.evict(victim, reason)
        spared = fits()
        probe.discard()
        if spared:
            needed = rest
    final = ssn.statement()
    for victim in needed:
        final.evict(victim, reason)
    final.pipeline(task, ssn.nodes.nodes[position].name)
    return final


def commit(ssn: Session, stmt: Statement, action: str) -> None:
    """Commit ``stmt`` for ``action``, counting it as an eviction transaction when it evicts."""
    if any(op.kind == "evict" for op in stmt.operations):
        key = f"transactions/{action}"
        ssn.eviction_figures[key] = ssn.eviction_figures.get(key, 0) + 1
    stmt.commit(action)


def count_attempt(ssn: Session, victims: list[TaskInfo]) -> None:
    """Record one node tried by preempt and the victims offered there."""
    figures = ssn.eviction_figures
    figures["preemption_attempts"] = figures.get("preemption_attempts", 0) + 1
    figures["preemption_victims"] = len(victims)

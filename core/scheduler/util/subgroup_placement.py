"""Placement for jobs with ``subGroupPolicy`` (vcjob partitions): each sub-group placed whole
or not at all, inside one HyperNode of the tier its own ``networkTopology`` allows, and within
the job's HyperNode when the job has one.

A sub-group's HyperNode is chosen tier by tier from the lowest by trial placements, each
undone (the node search window it moved put back too); the best-scoring HyperNode
(``hyper_node_order``, ties to the first by name) where the whole sub-group fits gets it. Which
HyperNodes need a trial is decided as for a gang (``util/hypernode_search``): those whose room
cannot hold every pending member are skipped, the others tried best bound first until no bound
left beats the best; the choice is the one trying every HyperNode makes, and the last trial,
when it wins, is kept rather than made again. A sub-group already partly placed grows only
inside the lowest HyperNode holding its placed tasks (or that HyperNode's ancestors the tier
allows). Tasks no policy selects are placed as any task. Whether the job may be committed is
decided by the caller (:func:`ready`): the gang's own rule and ``minSubGroups`` of every
policy.
"""

from __future__ import annotations

import weakref

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.conditions import queue_refusal
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.statement import Statement
from stromboli.core.scheduler.util.hypernode_search import (
    NEITHER,
    READY,
    Prospects,
    best_of,
    everywhere,
    level_rows,
    subgroup_prospects,
)
from stromboli.core.scheduler.util.hypernodes import (
    HyperNodeTree,
    gradients,
    resolve_topology,
    session_tree,
)
from stromboli.core.scheduler.util.placement import place
from stromboli.core.scheduler.util.subgroups import SubGroup, has_subgroups, job_subgroups

Domain = tuple[str, np.ndarray]


def ready(ssn: Session, job: JobInfo) -> bool:
    """The gang is ready, and so are ``minSubGroups`` sub-groups of each of its policies."""
    if not ssn.job_ready(job):
        return False
    return not has_subgroups(job) or job_subgroups(job).satisfied()


def _place_tasks(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    tasks: list[TaskInfo],
    stmt: Statement,
    domain: Domain | None,
    whole: bool,
) -> bool:
    """Place ``tasks`` in order on ``stmt``; with ``whole``, stop at the first that fits
    nowhere and say so (False)."""
    for task in tasks:
        if not ssn.allocatable(queue, task):
            ssn.record_fit_error(job, task, queue_refusal(queue.name))
            if whole:
                return False
            continue
        result = place(ssn, task) if domain is None else place(ssn, task, domain=domain)
        if isinstance(result, FitErrors):
            ssn.record_fit_error(job, task, result)
            if whole:
                return False
            continue
        if result.fits_idle:
            stmt.allocate(task, result.node)
        else:
            stmt.pipeline(task, result.node)
    return True


_candidates_of: weakref.WeakKeyDictionary[HyperNodeTree, dict[tuple[str, ...], list[Domain]]] = (
    weakref.WeakKeyDictionary()
)


def _candidates(
    ssn: Session, tree: HyperNodeTree, level: list[str], domain: Domain | None
) -> list[Domain]:
    """The HyperNodes of ``level`` that hold nodes (inside ``domain`` when given), each with
    the mask of its nodes there; kept with the tree when the domain is a HyperNode's own node
    set (every partition of every job asks for the same tier)."""
    table = ssn.nodes
    count = len(table)
    cache: dict[tuple[str, ...], list[Domain]] = {}
    if domain is None or (
        domain[0] in tree.hypernodes and domain[1] is tree.mask(domain[0], table.position, count)
    ):
        cache = _candidates_of.setdefault(tree, {})
    key = (*level, "", "" if domain is None else domain[0])
    found = cache.get(key)
    if found is None:
        found = []
        for name in level:
            mask = tree.mask(name, table.position, count)
            if domain is not None:
                mask = mask & domain[1]
            if mask.any():
                found.append((name, mask))
        cache[key] = found
    return found


def _place_group(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    group: SubGroup,
    pending: list[TaskInfo],
    domain: Domain | None,
    exhaustive: bool = False,
) -> Statement | None:
    """A statement placing all of ``pending`` (the group's unplaced tasks), or None."""
    if group.topology is None:
        trial = ssn.statement()
        if _place_tasks(ssn, queue, job, pending, trial, domain, whole=True) and group.ready():
            return trial
        trial.discard()
        return None
    tree = session_tree(ssn)
    topology = resolve_topology(group.topology, tree)
    nodes = {t.node_name for t in group.tasks if t.node_name and t.status != TaskStatus.PENDING}
    found = tree.lca(nodes)
    anchor = None if found is None else found.name
    # Whole, the sub-group is ready only if it has members enough: else no trial can be.
    possible = group.placed() + len(pending) >= group.size
    for task in pending:  # what the search leaves must not depend on which trials it made
        task.last_status, task.last_node = None, ""
    for level in gradients(topology, tree, anchor) if possible else ():
        where = _candidates(ssn, tree, level, domain)
        if not where:
            continue
        trials = _GroupTrials(ssn, queue, job, group, pending, where)
        try:
            known = None if exhaustive else _prospects(ssn, tree, job, where, pending, domain)
            if known is None:
                known = everywhere(len(where))
            chosen = best_of(known.bounds, known.can_ready, known.can_place, trials.run)
            if chosen is None:
                continue
            placed = trials.keep(chosen)
            if placed is None:
                trials.close()
                placed = ssn.statement()
                if not _place_tasks(ssn, queue, job, pending, placed, where[chosen], True):
                    placed.discard()
                    continue
        finally:
            trials.close()
        for task in pending:  # placed: the fit errors of trials elsewhere say nothing
            job.fit_errors.pop(task.uid, None)
        return placed
    message = (
        f"sub-group {group.key} does not fit whole in any hyperNode of tier <= "
        f"{topology.highest_tier} (networkTopology mode {topology.mode})"
    )
    for task in pending:
        ssn.record_fit_error(job, task, message)
    return None


def _prospects(
    ssn: Session,
    tree: HyperNodeTree,
    job: JobInfo,
    where: list[Domain],
    pending: list[TaskInfo],
    domain: Domain | None,
) -> Prospects | None:
    """What is known of the sub-group's trial in each of ``where`` without one; None when
    nothing is (one candidate, a scorer without a bound, or a domain that is not a
    HyperNode's own node set)."""
    if len(where) < 2:
        return None
    within = None
    if domain is not None:
        table = ssn.nodes
        within = domain[0]
        if within not in tree.hypernodes or domain[1] is not tree.mask(
            within, table.position, len(table)
        ):
            return None
    rows = level_rows(ssn, tree, [name for name, _ in where], within)
    return None if rows is None else subgroup_prospects(ssn, job, rows, pending)


class _GroupTrials:
    """Trial placements of one sub-group, one HyperNode at a time; the latest stays in place
    until the next trial (or :meth:`close`), so that the chosen one, when it was the latest,
    is kept instead of undone and placed again the same way."""

    def __init__(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        group: SubGroup,
        pending: list[TaskInfo],
        where: list[Domain],
    ) -> None:
        self.ssn, self.queue, self.job, self.group = ssn, queue, job, group
        self.pending, self.where = pending, where
        #: The open trial: its candidate, statement, and the search window before it.
        self.open: tuple[int, Statement, int] | None = None

    def run(self, i: int) -> tuple[int, float]:
        self.close()
        ssn, job = self.ssn, self.job
        start = ssn.next_start_node
        trial = ssn.statement()
        name, mask = self.where[i]
        try:
            fits = _place_tasks(ssn, self.queue, job, self.pending, trial, self.where[i], True)
            fits = fits and self.group.ready()
            score = ssn.hyper_node_score(job, name, np.flatnonzero(mask)) if fits else 0.0
        except Exception:
            self._undo(trial, start)
            raise
        self.open = (i, trial, start)
        return (READY, score) if fits else (NEITHER, 0.0)

    def keep(self, i: int) -> Statement | None:
        """The open trial when it is candidate ``i``'s and it placed the sub-group; else
        None."""
        if self.open is None or self.open[0] != i or not self.group.ready():
            return None
        trial = self.open[1]
        self.open = None
        for task in self.pending:  # as after an undone trial and a fresh placement
            task.last_status, task.last_node = None, ""
        return trial

    def close(self) -> None:
        if self.open is not None:
            _, trial, start = self.open
            self.open = None
            self._undo(trial, start)

    def _undo(self, trial: Statement, start: int) -> None:
        trial.discard()
        # A trial moves neither the search window of later placements nor the hints of why
        # a task waits.
        self.ssn.next_start_node = start
        for task in self.pending:
            task.last_status, task.last_node = None, ""


def fill_subgroups(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    pending: list[TaskInfo],
    stmt: Statement,
    domain: Domain | None,
    exhaustive: bool = False,
) -> None:
    """Place the job's ``pending`` tasks on ``stmt``: sub-group by sub-group, each whole or
    not at all, then the tasks no policy selects. ``exhaustive`` tries every HyperNode for a
    sub-group instead of the bounded search (tests compare the two)."""
    waiting = {t.uid for t in pending}
    grouped: set[str] = set()
    for group in job_subgroups(job).groups:
        grouped.update(t.uid for t in group.tasks)
        todo = ssn.sorted_tasks(t for t in group.tasks if t.uid in waiting)
        if not todo:
            continue
        placed = _place_group(ssn, queue, job, group, todo, domain, exhaustive)
        if placed is not None:
            stmt.merge(placed)
    rest = ssn.sorted_tasks(t for t in pending if t.uid not in grouped)
    _place_tasks(ssn, queue, job, rest, stmt, domain, whole=False)

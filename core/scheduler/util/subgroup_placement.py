"""Placement for jobs with ``subGroupPolicy`` (vcjob partitions): each sub-group placed whole
or not at all, inside one HyperNode of the tier its own ``networkTopology`` allows, and within
the job's HyperNode when the job has one.

A sub-group is tried HyperNode by HyperNode, tiers from the lowest, each a trial placement
undone at once; the best-scoring HyperNode (``hyper_node_order``) where the whole sub-group
fits gets it. A sub-group already partly placed grows only inside the lowest HyperNode holding
its placed tasks (or that HyperNode's ancestors the tier allows). Tasks no policy selects are
placed as any task. Whether the job may be committed is decided by the caller
(:func:`ready`): the gang's own rule and ``minSubGroups`` of every policy.
"""

from __future__ import annotations

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.conditions import queue_refusal
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.statement import Statement
from stromboli.core.scheduler.util.hypernodes import (
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


def _within(ssn: Session, name: str, domain: Domain | None) -> Domain:
    tree = session_tree(ssn)
    mask = tree.mask(name, ssn.nodes.position, len(ssn.nodes))
    if domain is not None:
        mask = mask & domain[1]
    return name, mask


def _place_group(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    group: SubGroup,
    pending: list[TaskInfo],
    domain: Domain | None,
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
    for level in gradients(topology, tree, anchor):
        best: tuple[float, str] | None = None
        for name in level:
            where = _within(ssn, name, domain)
            if not where[1].any():
                continue
            trial = ssn.statement()
            try:
                if _place_tasks(ssn, queue, job, pending, trial, where, whole=True) and (
                    group.ready()
                ):
                    score = ssn.hyper_node_score(job, name, np.flatnonzero(where[1]))
                    if best is None or score > best[0]:
                        best = (score, name)
            finally:
                trial.discard()
            for task in pending:  # a trial placement is no hint where the task could go
                task.last_status, task.last_node = None, ""
        if best is not None:
            chosen = ssn.statement()
            if _place_tasks(ssn, queue, job, pending, chosen, _within(ssn, best[1], domain), True):
                return chosen
            chosen.discard()
    message = (
        f"sub-group {group.key} does not fit whole in any hyperNode of tier <= "
        f"{topology.highest_tier} (networkTopology mode {topology.mode})"
    )
    for task in pending:
        ssn.record_fit_error(job, task, message)
    return None


def fill_subgroups(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    pending: list[TaskInfo],
    stmt: Statement,
    domain: Domain | None,
) -> None:
    """Place the job's ``pending`` tasks on ``stmt``: sub-group by sub-group, each whole or
    not at all, then the tasks no policy selects."""
    waiting = {t.uid for t in pending}
    grouped: set[str] = set()
    for group in job_subgroups(job).groups:
        grouped.update(t.uid for t in group.tasks)
        todo = ssn.sorted_tasks(t for t in group.tasks if t.uid in waiting)
        if not todo:
            continue
        placed = _place_group(ssn, queue, job, group, todo, domain)
        if placed is not None:
            stmt.merge(placed)
    rest = ssn.sorted_tasks(t for t in pending if t.uid not in grouped)
    _place_tasks(ssn, queue, job, rest, stmt, domain, whole=False)

"""Choosing a gang's HyperNode in one tier with few trial placements.

The rule (``actions/allocate``): every HyperNode of the tier gets a trial placement; the best
(rank, score) wins, rank 2 where the gang is ready, 1 where it is only pipelined, ties to the
first by name. Trying all of them costs a whole gang placement per HyperNode. The outcome is
the same when candidates are tried best bound first and the search stops once a ready one
scores above every bound left, with three facts known without a trial:

- an upper bound of each HyperNode's score (``hyper_node_order_bound`` of the plugins that
  score HyperNodes, from the HyperNode's summed use plus the most the gang can add);
- whether the gang can be ready there at all (the idle room summed over its nodes holds the
  least the gang's missing members ask for, when ``gang`` decides readiness);
- whether a trial there can place anything (some node fits some pending task's request).

The same search chooses a sub-group's HyperNode (``util/subgroup_placement``): there a trial
is ready when the whole sub-group is placed, so :func:`subgroup_prospects` asks that the room
allocations and pipelined tasks may take, summed, holds every pending member.

Bounds within :data:`TOLERANCE` of the best score are ties: the first by name keeps them, so
two HyperNodes whose scores differ by less than rounding may be chosen either way.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.api.resource import EPSILON
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.hypernodes import HyperNodeTree
from stromboli.core.scheduler.util.placement import POD_COLUMN, resource_fit

#: Relative width of a tie between a bound and a score (rounding of sums is far below it).
TOLERANCE = 1e-12
READY, PIPELINED, NEITHER = 2, 1, 0

#: A trial of candidate ``i``: (rank, score), the score only meaningful when rank > 0.
TrialFn = Callable[[int], tuple[int, float]]


def best_of(
    bounds: np.ndarray,
    can_ready: np.ndarray,
    can_place: Callable[[], np.ndarray],
    trial: TrialFn,
) -> int | None:
    """The candidate an exhaustive trial would choose, or None when no trial ranks above 0.

    ``bounds[i]`` is at least the score of any ready trial of ``i``; ``can_ready[i]`` False
    means its trial is never ready, ``can_place()[i]`` False that it ranks 0 (asked only when
    no candidate is ready). Ready candidates
    are tried best bound first until no bound left can beat the best; only when none is ready
    is every candidate that can place something tried, in order, for the best pipelined one.
    """
    count = bounds.shape[0]
    tried = np.zeros(count, dtype=bool)
    best: tuple[int, float, int] | None = None

    def attempt(i: int) -> None:
        nonlocal best
        tried[i] = True
        rank, score = trial(i)
        if rank == NEITHER:
            return
        if best is None or (rank, score) > best[:2] or ((rank, score) == best[:2] and i < best[2]):
            best = (rank, score, i)

    indices = np.arange(count)
    order = np.lexsort((indices, -bounds))
    order = order[can_ready[order]]
    while order.shape[0]:
        i = int(order[0])
        order = order[1:]
        attempt(i)
        if best is not None and best[0] == READY:
            # Keep only candidates that could still win: a bound above the best score, or
            # one tied with it that comes first by name.
            score, first = best[1], best[2]
            tol = TOLERANCE * max(1.0, abs(score))
            rest = bounds[order]
            order = order[(rest > score + tol) | ((rest >= score - tol) & (order < first))]
    if best is None or best[0] != READY:
        for j in np.flatnonzero(can_place() & ~tried):
            attempt(int(j))
    return None if best is None else best[2]


# -- what is known of each HyperNode of a tier without a trial ---------------------------


#: Incremental updates of a kept sum before it is summed afresh (bounds rounding drift).
REFRESH_AFTER = 512


@dataclass(slots=True, eq=False)
class LevelRows:
    """The node-table rows of a tier's HyperNodes, grouped for one ``reduceat`` per sum, and
    per-HyperNode sums kept current from the rows whose version changed since the last look."""

    names: tuple[str, ...]
    rows: np.ndarray
    #: Where each HyperNode's rows start in ``rows``.
    starts: np.ndarray
    allocatable: np.ndarray
    #: Per table row, the index of the HyperNode holding it (-1: none); None when a row is
    #: under two of them (then sums are always taken afresh).
    group: np.ndarray | None = None
    #: Per array name: (sums, versions seen, row values summed, updates since summed afresh).
    _kept: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]] = field(
        default_factory=dict
    )

    def sums(self, array: np.ndarray) -> np.ndarray:
        """Per HyperNode, the column sums of ``array`` over its rows."""
        return np.add.reduceat(array[self.rows], self.starts, axis=0)

    def current_sums(
        self, key: str, versions: np.ndarray, values_of: Callable[[np.ndarray | slice], np.ndarray]
    ) -> np.ndarray:
        """:meth:`sums` of the per-row ``values_of(rows)``, updated from the rows whose
        ``versions`` changed since the last call with ``key`` (read-only: the kept array is
        returned)."""
        kept = self._kept.get(key)
        if kept is not None and self.group is not None:
            sums, seen, last, updates = kept
            stale = np.flatnonzero(seen != versions)
            if stale.shape[0] * 4 < self.rows.shape[0] and updates[0] < REFRESH_AFTER:
                if stale.shape[0]:
                    fresh = values_of(stale)
                    groups = self.group[stale]
                    inside = groups >= 0
                    np.add.at(sums, groups[inside], (fresh - last[stale])[inside])
                    last[stale] = fresh
                    seen[stale] = versions[stale]
                    updates[0] += 1
                return sums
        values = values_of(slice(None))
        sums = self.sums(values)
        self._kept[key] = (sums, versions.copy(), values.copy(), [0])
        return sums

    def any(self, mask: np.ndarray) -> np.ndarray:
        """Per HyperNode, whether ``mask`` holds on one of its rows."""
        return np.logical_or.reduceat(mask[self.rows], self.starts)


_levels: weakref.WeakKeyDictionary[HyperNodeTree, dict[tuple[str, ...], LevelRows | None]] = (
    weakref.WeakKeyDictionary()
)


def level_rows(
    ssn: Session, tree: HyperNodeTree, names: Sequence[str], within: str | None = None
) -> LevelRows | None:
    """The rows of ``names`` (cached with the tree), only those under HyperNode ``within``
    when given; None when one of them has no rows."""
    cache = _levels.setdefault(tree, {})
    key = tuple(names)
    cache_key = key if within is None else (*key, "", within)
    if cache_key in cache:
        return cache[cache_key]
    table = ssn.nodes
    masks = [tree.mask(name, table.position, len(table)) for name in key]
    if within is not None:
        inside = tree.mask(within, table.position, len(table))
        masks = [mask & inside for mask in masks]
    parts = [np.flatnonzero(mask) for mask in masks]
    level: LevelRows | None = None
    if parts and all(p.shape[0] for p in parts):
        lengths = np.array([p.shape[0] for p in parts])
        rows = np.concatenate(parts)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        level = LevelRows(key, rows, starts, np.zeros(0))
        level.allocatable = level.sums(table.allocatable)
        if np.unique(rows).shape[0] == rows.shape[0]:
            level.group = np.full(len(table), -1)
            level.group[rows] = np.repeat(np.arange(len(key)), lengths)
    cache[cache_key] = level
    return level


def bound_scorers(ssn: Session) -> list[Callable[..., np.ndarray]] | None:
    """Each HyperNode scorer's bound (``hyper_node_order_bound`` of its plugin), or None when
    one scorer has no bound (then every HyperNode must be tried)."""
    bounds: list[Callable[..., np.ndarray]] = []
    for tier in ssn.chain(ExtensionPoint.HYPER_NODE_ORDER):
        for fn in tier:
            bound = getattr(getattr(fn, "__self__", None), "hyper_node_order_bound", None)
            if bound is None:
                return None
            bounds.append(bound)
    return bounds


@dataclass(slots=True)
class Prospects:
    bounds: np.ndarray
    can_ready: np.ndarray
    #: Whether a trial can place anything, per HyperNode: computed when first asked.
    can_place: Callable[[], np.ndarray]


def everywhere(count: int) -> Prospects:
    """Nothing known: every HyperNode is tried."""
    return Prospects(np.full(count, np.inf), np.ones(count, dtype=bool), lambda: _true(count))


def _true(count: int) -> np.ndarray:
    return np.ones(count, dtype=bool)


def prospects(
    ssn: Session, job: JobInfo, level: LevelRows, waiting: Sequence[TaskInfo]
) -> Prospects | None:
    """Bounds and possibilities of ``job``'s trial in each HyperNode of ``level``; None when
    they cannot be known (a scorer without a bound)."""
    scorers = bound_scorers(ssn)
    if scorers is None or not waiting:
        return None
    table = ssn.nodes
    vectors = np.stack([table.task_vector(t) for t in waiting])
    count = len(level.names)
    bounds = _score_bounds(ssn, job, level, vectors, scorers)
    missing = _missing(ssn, job)
    if missing <= 0:  # a trial that places nothing may be ready: every one is a prospect
        return Prospects(bounds, _true(count), lambda: _true(count))

    def can_place() -> np.ndarray:
        placeable = np.zeros(count, dtype=bool)
        shapes = vectors[:1] if (vectors == vectors[0]).all() else np.unique(vectors, axis=0)
        for vector in shapes:
            fits_later, _ = resource_fit(ssn, vector, True)
            placeable |= level.any(fits_later)
        unpipelined = _unpipelined(ssn, job)
        if unpipelined > 0:  # only pipelining would rank it, and gang says no without room
            placeable &= _room_for(ssn, level, vectors, unpipelined, "reach", _reach)
        return placeable

    return Prospects(bounds, _room_for_gang(ssn, level, vectors, missing), can_place)


def subgroup_prospects(
    ssn: Session, job: JobInfo, level: LevelRows, pending: Sequence[TaskInfo]
) -> Prospects | None:
    """Bounds and possibilities of a trial placing all of a sub-group's ``pending`` members
    in each HyperNode of ``level`` (the trial is ready only when every one is allocated or
    pipelined, and never merely pipelined); None when they cannot be known."""
    scorers = bound_scorers(ssn)
    if scorers is None or not pending:
        return None
    table = ssn.nodes
    vectors = np.stack([table.task_vector(t) for t in pending])
    count = len(level.names)
    bounds = _score_bounds(ssn, job, level, vectors, scorers)
    can_ready = _room_for(ssn, level, vectors, len(pending), "reach", _reach)
    return Prospects(bounds, can_ready, lambda: np.zeros(count, dtype=bool))


def _score_bounds(
    ssn: Session,
    job: JobInfo,
    level: LevelRows,
    vectors: np.ndarray,
    scorers: Sequence[Callable[..., np.ndarray]],
) -> np.ndarray:
    """Per HyperNode, the most the HyperNode scorers can give once a trial has added between
    none and all of the requests ``vectors`` to its nodes' use."""
    bounds = np.zeros(len(level.names))
    if scorers:
        table = ssn.nodes
        used = level.current_sums("used", table.versions, functools.partial(_used, table))
        low = np.minimum(vectors, 0).sum(axis=0)
        high = np.maximum(vectors, 0).sum(axis=0)
        for bound in scorers:
            bounds += bound(job, used, level.allocatable, low, high)
    return bounds


def _missing(ssn: Session, job: JobInfo) -> int:
    """How many more members must be allocated before ``gang`` lets the job be ready (0 when
    ``gang`` does not decide readiness: then nothing is known of a trial without it)."""
    if not ssn.enabled(ExtensionPoint.JOB_READY, "gang"):
        return 0
    return job.min_available - job.ready_task_num() - job.pending_best_effort_num()


def _unpipelined(ssn: Session, job: JobInfo) -> int:
    """How many more members must be placed (allocated or pipelined) before ``gang`` lets the
    job be pipelined; 0 when ``gang``'s refusal does not decide (another plugin in an earlier
    tier may permit it)."""
    gang = ssn.plugins.get("gang")
    first = next((tier for tier in ssn.chain(ExtensionPoint.JOB_PIPELINED) if tier), [])
    if gang is None or getattr(gang, "job_pipelined", None) not in first:
        return 0
    placed = job.waiting_task_num() + job.ready_task_num() + job.pending_best_effort_num()
    return job.min_available - placed


def _room_for_gang(ssn: Session, level: LevelRows, vectors: np.ndarray, missing: int) -> np.ndarray:
    """Per HyperNode, whether its idle room, summed, holds the least that ``missing`` of the
    pending requests ask for."""
    return _room_for(ssn, level, vectors, missing, "room", _idle)


def _room_for(
    ssn: Session,
    level: LevelRows,
    vectors: np.ndarray,
    missing: int,
    key: str,
    room_of: Callable[[NodeTable, np.ndarray | slice], np.ndarray],
) -> np.ndarray:
    """Per HyperNode, whether the room ``room_of`` gives per node, summed, holds the least
    that ``missing`` of the pending requests ask for."""
    if missing > vectors.shape[0]:
        return np.zeros(len(level.names), dtype=bool)
    least = np.sort(vectors, axis=0)[:missing].sum(axis=0)
    least[POD_COLUMN] = 0.0  # pod slots are the predicates' business
    table = ssn.nodes
    room = level.current_sums(key, table.versions, functools.partial(room_of, table))
    # Each placement may overshoot a node's room by EPSILON; sums round.
    slack = missing * EPSILON + TOLERANCE * np.abs(room)
    return np.all(room + slack >= least, axis=1)


def _idle(table: NodeTable, rows: np.ndarray | slice) -> np.ndarray:
    """What allocations may take from each node: its idle room."""
    return np.maximum(table.idle_now[rows], 0.0)


def _reach(table: NodeTable, rows: np.ndarray | slice) -> np.ndarray:
    """What allocations and pipelined tasks together may take from each node: its idle room,
    plus its future room where that differs (a task is pipelined on a node only when it does
    not fit the idle room but fits the future one, so a node whose two are equal, and stay
    equal under allocations, takes no pipelined task)."""
    idle, future = table.idle_now[rows], table.future[rows]
    differs = np.any(idle != future, axis=1, keepdims=True)
    return np.maximum(idle, 0.0) + np.where(differs, np.maximum(future, 0.0), 0.0)


def _used(table: NodeTable, rows: np.ndarray | slice) -> np.ndarray:
    return table.used[rows]

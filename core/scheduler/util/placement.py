"""Choosing a node for one task: resource fit, predicates and scores over all nodes at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.api.resource import EPSILON
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.session import Session

POD_COLUMN = 2
#: Volcano's defaults for how many feasible nodes to score (``--minimum-feasible-nodes``,
#: ``--minimum-percentage-nodes-to-find``, ``--percentage-nodes-to-find`` 0 = adaptive).
MIN_FEASIBLE_NODES = 100
MIN_PERCENTAGE_NODES = 5
PERCENTAGE_NODES_TO_FIND = 0


def feasible_nodes_to_find(total: int) -> int:
    """How many feasible nodes to score: all of a small cluster, an adaptive share of a big
    one (50% minus 1% per 125 nodes, at least 5%, at least 100 nodes), as Volcano and
    kube-scheduler do."""
    if total <= MIN_FEASIBLE_NODES or PERCENTAGE_NODES_TO_FIND >= 100:
        return total
    percentage = PERCENTAGE_NODES_TO_FIND or 50 - total // 125
    percentage = max(percentage, MIN_PERCENTAGE_NODES)
    return max(total * percentage // 100, MIN_FEASIBLE_NODES)


def sample(ssn: Session, candidates: np.ndarray) -> np.ndarray:
    """Positions of up to ``feasible_nodes_to_find`` candidates, starting where the previous
    search stopped so that successive pods spread their search over the cluster."""
    total = candidates.shape[0]
    limit = feasible_nodes_to_find(total)
    if limit < total and candidates.all():
        return sample_all(ssn, total, limit)
    return sample_listed(ssn, np.flatnonzero(candidates), total, limit)


def sample_all(ssn: Session, total: int, limit: int) -> np.ndarray:
    """``sample_listed`` when every one of ``total`` nodes is a candidate (a roomy cluster,
    most searches): the window is a run of positions from the start, wrapping, found without
    listing every node first."""
    start = ssn.next_start_node % total
    chosen = np.arange(start, start + limit)
    if start + limit > total:
        chosen %= total
    ssn.next_start_node = int(chosen[-1]) + 1
    return chosen


def sample_listed(ssn: Session, positions: np.ndarray, total: int, limit: int) -> np.ndarray:
    """Up to ``limit`` of the candidate ``positions`` (sorted, out of ``total`` nodes) from
    the first at or after ``ssn.next_start_node``, wrapping round."""
    if positions.shape[0] <= limit:
        return positions
    start = int(np.searchsorted(positions, ssn.next_start_node % total))
    chosen = positions[start : start + limit]
    if chosen.shape[0] < limit:
        chosen = np.concatenate([chosen, positions[: limit - chosen.shape[0]]])
    ssn.next_start_node = int(chosen[-1]) + 1
    return chosen


@dataclass(slots=True)
class Placement:
    node: str
    #: True when the node's idle resources hold the task now; False when it only fits in
    #: resources being released (the task is then pipelined).
    fits_idle: bool


def requested_columns(vector: np.ndarray) -> np.ndarray:
    """Resource columns a task asks for (the pod-count column is the predicates' business)."""
    needed = vector > EPSILON
    needed[POD_COLUMN] = False
    return np.flatnonzero(needed)


def _fits(room: np.ndarray, need: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Rows of ``room`` that hold ``need`` (the request less ``EPSILON`` on each requested
    column) on every requested column: one comparison for all rows and columns at once."""
    return np.all(room[:, columns] >= need, axis=1)


#: Past this many change-log entries since a fit was last brought up to date, it is computed
#: afresh (one array comparison) instead of row by row.
FEW_CHANGES = 256
#: Up to this many stale rows are checked one by one in plain Python, where numpy's per-call
#: cost dominates; more in one indexing step.
ROW_BY_ROW = 8


@dataclass(slots=True, eq=False)
class _Fit:
    """A request's fit on every node, how many nodes it fits (later, now), and where in the
    node change log it was last current."""

    resource_ok: np.ndarray
    idle_ok: np.ndarray
    resource_count: int
    idle_count: int
    columns: list[int]
    need: list[float]
    epoch: int
    mark: int


def _fit_afresh(nodes: NodeTable, vector: np.ndarray, use_future_idle: bool) -> _Fit:
    columns = requested_columns(vector)
    need = vector[columns] - EPSILON
    room = nodes.future if use_future_idle else nodes.idle_now
    resource_ok = _fits(room, need, columns)
    idle_ok = _fits(nodes.idle_now, need, columns) if use_future_idle else resource_ok
    return _Fit(
        resource_ok,
        idle_ok,
        int(np.count_nonzero(resource_ok)),
        int(np.count_nonzero(idle_ok)),
        columns.tolist(),
        need.tolist(),
        nodes.epoch,
        len(nodes.changes),
    )


def _rows_fit(
    room: np.ndarray, rows: np.ndarray, columns: list[int], need: list[float]
) -> np.ndarray:
    """``_fits`` of ``room``'s ``rows`` alone, picked in one indexing step."""
    return np.all(room[rows[:, None], columns] >= np.array(need), axis=1)


def _row_fits(row: list[float], columns: list[int], need: list[float]) -> bool:
    """``_fits`` of one row as Python floats: the same comparisons, so the same answer."""
    for column, amount in zip(columns, need, strict=True):  # noqa: SIM110 - a plain loop is faster
        if not row[column] >= amount:  # NaN fits nothing, as in the arrays
            return False
    return True


def _current_fit(ssn: Session, vector: np.ndarray, use_future_idle: bool) -> _Fit:
    """The session's fit of ``vector``, brought up to date: only the nodes whose use changed
    since it was last asked for (the node table's change log says which: most searches find
    one or two) are checked again, one row at a time."""
    nodes = ssn.nodes
    key = (vector.tobytes(), use_future_idle)
    fit: _Fit | None = ssn.fit_cache.get(key)
    changes = nodes.changes
    if fit is None or fit.epoch != nodes.epoch or len(changes) - fit.mark > FEW_CHANGES:
        fit = ssn.fit_cache[key] = _fit_afresh(nodes, vector, use_future_idle)
        return fit
    if fit.mark == len(changes):
        return fit
    columns, need = fit.columns, fit.need
    room = nodes.future if use_future_idle else nodes.idle_now
    resource_ok, idle_ok = fit.resource_ok, fit.idle_ok
    stale = set(changes[fit.mark :])
    fit.mark = len(changes)
    if len(stale) > ROW_BY_ROW:
        rows = np.fromiter(stale, dtype=np.intp, count=len(stale))
        resource_ok[rows] = _rows_fit(room, rows, columns, need)
        fit.resource_count = int(np.count_nonzero(resource_ok))
        if use_future_idle:
            idle_ok[rows] = _rows_fit(nodes.idle_now, rows, columns, need)
            fit.idle_count = int(np.count_nonzero(idle_ok))
        else:
            fit.idle_count = fit.resource_count
        return fit
    for position in stale:
        now = _row_fits(room[position].tolist(), columns, need)
        if now != resource_ok[position]:
            resource_ok[position] = now
            fit.resource_count += 1 if now else -1
        if use_future_idle:
            now = _row_fits(nodes.idle_now[position].tolist(), columns, need)
            if now != idle_ok[position]:
                idle_ok[position] = now
                fit.idle_count += 1 if now else -1
    if not use_future_idle:
        fit.idle_count = fit.resource_count
    return fit


def resource_fit(
    ssn: Session, vector: np.ndarray, use_future_idle: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(nodes the request fits once releasing pods leave, nodes it fits now).

    Pods with equal requests share the answer: it is kept per request for the session and
    only the nodes whose use changed since are checked again.
    """
    fit = _current_fit(ssn, vector, use_future_idle)
    return fit.resource_ok, fit.idle_ok


def place(
    ssn: Session,
    task: TaskInfo,
    use_future_idle: bool = True,
    domain: tuple[str, np.ndarray] | None = None,
) -> Placement | FitErrors:
    """The best node for ``task``, or the reasons no node fits.

    Nodes whose idle resources hold the task are preferred; otherwise, when
    ``use_future_idle``, nodes whose resources being released would hold it. A ``domain``
    (a HyperNode's name and the mask of its nodes) keeps the search inside it.
    """
    nodes = ssn.nodes
    if not len(nodes):
        return FitErrors(0)
    objection = ssn.pre_predicate(task)
    if objection:
        errors = FitErrors(len(nodes))
        errors.add_count(objection, len(nodes))
        return errors
    vector = nodes.task_vector(task)
    fit = _current_fit(ssn, vector, use_future_idle)
    resource_ok, idle_ok = fit.resource_ok, fit.idle_ok
    verdict = ssn.predicate(task)
    total = len(nodes)
    if (
        domain is None
        and not verdict.reasons
        and fit.resource_count == total
        and fit.idle_count == total
    ):
        # A roomy cluster (most searches): every node passes and holds the task now, so the
        # masks below would all be full; their counts say so without building them.
        limit = feasible_nodes_to_find(total)
        positions = sample_all(ssn, total, limit) if limit < total else np.arange(total)
        return Placement(nodes.nodes[_best(ssn, task, positions)].name, True)
    feasible = resource_ok & verdict.passed
    if domain is not None:
        feasible = feasible & domain[1]
    if not feasible.any():
        errors = FitErrors(len(nodes))
        if domain is not None:
            errors.add(~domain[1], f"node(s) not in hyperNode {domain[0]}")
        room = nodes.future if use_future_idle else nodes.idle_now
        for column in requested_columns(vector):
            short = room[:, column] < vector[column] - EPSILON
            errors.add(short, f"Insufficient {nodes.index.names[column]}")
        for mask, reason, _ in verdict.reasons:
            errors.add(mask, reason, considered=resource_ok)
        return errors
    idle_ok = feasible & idle_ok
    candidates = idle_ok if idle_ok.any() else feasible
    best = _best(ssn, task, sample(ssn, candidates))
    return Placement(nodes.nodes[best].name, bool(idle_ok[best]))


def _best(ssn: Session, task: TaskInfo, positions: np.ndarray) -> int:
    """The position among the candidate ``positions`` that the scores (or a plugin) choose."""
    if positions.shape[0] > 1:
        scorers = ssn.has_scorers()
        if scorers or ssn.has_best_node():
            scores = ssn.node_scores(task, positions) if scorers else np.zeros(len(positions))
            chosen = ssn.best_node(task, positions, scores)
            return int(positions[int(np.argmax(scores))]) if chosen is None else chosen
    return int(positions[0])

"""Choosing a node for one task: resource fit, predicates and scores over all nodes at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
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
    positions = np.flatnonzero(candidates)
    limit = feasible_nodes_to_find(candidates.shape[0])
    if positions.shape[0] <= limit:
        return positions
    start = int(np.searchsorted(positions, ssn.next_start_node % candidates.shape[0]))
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


def place(ssn: Session, task: TaskInfo, use_future_idle: bool = True) -> Placement | FitErrors:
    """The best node for ``task``, or the reasons no node fits.

    Nodes whose idle resources hold the task are preferred; otherwise, when
    ``use_future_idle``, nodes whose resources being released would hold it.
    """
    nodes = ssn.nodes
    errors = FitErrors(len(nodes))
    if not len(nodes):
        return errors
    objection = ssn.pre_predicate(task)
    if objection:
        errors.add_count(objection, len(nodes))
        return errors
    vector = nodes.task_vector(task)
    columns = requested_columns(vector)
    room = nodes.future if use_future_idle else nodes.idle_now
    resource_ok: np.ndarray | None = None
    idle_ok: np.ndarray | None = None
    shortages = []
    for column in columns:
        wanted = vector[column] - EPSILON
        short = room[:, column] < wanted
        shortages.append((short, column))
        resource_ok = ~short if resource_ok is None else resource_ok & ~short
        if use_future_idle:
            fits_now = nodes.idle_now[:, column] >= wanted
            idle_ok = fits_now if idle_ok is None else idle_ok & fits_now
    if resource_ok is None:
        resource_ok = np.ones(len(nodes), dtype=bool)
    verdict = ssn.predicate(task)
    feasible = resource_ok & verdict.passed
    if not feasible.any():
        for short, column in shortages:
            errors.add(short, f"Insufficient {nodes.index.names[column]}")
        for mask, reason, _ in verdict.reasons:
            errors.add(mask, reason, considered=resource_ok)
        return errors
    idle_ok = feasible if idle_ok is None else feasible & idle_ok
    candidates = idle_ok if idle_ok.any() else feasible
    positions = sample(ssn, candidates)
    if positions.shape[0] > 1 and ssn.has_scorers():
        scores = ssn.node_scores(task, positions)
        best = int(positions[int(np.argmax(scores))])
    else:
        best = int(positions[0])
    return Placement(nodes.nodes[best].name, bool(idle_ok[best]))

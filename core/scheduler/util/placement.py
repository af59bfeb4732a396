"""Choosing a node for one task: resource fit, predicates and scores over all nodes at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.resource import EPSILON
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.session import Session

POD_COLUMN = 2


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
    wanted = vector[columns] - EPSILON
    allocatable = nodes.allocatable[:, columns]
    used = nodes.used[:, columns]
    idle = allocatable - used
    if use_future_idle:
        room = idle + nodes.releasing[:, columns] - nodes.pipelined[:, columns]
    else:
        room = idle
    resource_ok = np.ones(len(nodes), dtype=bool)
    shortages = []
    for j, column in enumerate(columns):
        short = room[:, j] < wanted[j]
        if short.any():
            shortages.append((short, f"Insufficient {nodes.index.names[column]}"))
            resource_ok &= ~short
    verdict = ssn.predicate(task)
    feasible = resource_ok & verdict.passed
    if not feasible.any():
        for short, reason in shortages:
            errors.add(short, reason)
        for mask, reason, _ in verdict.reasons:
            errors.add(mask, reason, considered=resource_ok)
        return errors
    idle_ok = feasible & (idle >= wanted).all(axis=1) if use_future_idle else feasible
    candidates = idle_ok if idle_ok.any() else feasible
    positions = np.flatnonzero(candidates)
    if positions.shape[0] > 1 and ssn.has_scorers():
        scores = ssn.node_scores(task, positions)
        best = int(positions[int(np.argmax(scores))])
    else:
        best = int(positions[0])
    return Placement(nodes.nodes[best].name, bool(idle_ok[best]))

"""The ``binpack`` plugin: prefer nodes that the task fills most, to keep whole nodes free.

Volcano's formula: over the resources the task requests that have a weight (cpu, memory and
those listed in ``binpack.resources``), score = Σ w·(used + request)/allocatable ÷ Σ w × 100 ×
``binpack.weight``; a node where any of them would overflow scores 0, and a resource the node
does not have adds its weight but no score. Computed for all candidate nodes at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.resource import CPU, MEMORY, PODS
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session

WEIGHT = "binpack.weight"
CPU_WEIGHT = "binpack.cpu"
MEMORY_WEIGHT = "binpack.memory"
RESOURCES = "binpack.resources"
RESOURCE_PREFIX = "binpack.resources."
MAX_NODE_SCORE = 100.0


def resource_weights(arguments: Arguments) -> dict[str, int]:
    """Per-resource weights; a negative weight falls back to 1, as in Volcano."""
    weights = {
        CPU: arguments.get_int(CPU_WEIGHT, 1),
        MEMORY: arguments.get_int(MEMORY_WEIGHT, 1),
    }
    for name in arguments.get_str(RESOURCES, "").split(","):
        name = name.strip()
        if name:
            weights[name] = arguments.get_int(RESOURCE_PREFIX + name, 1)
    return {name: (w if w >= 0 else 1) for name, w in weights.items()}


class BinpackPlugin(Plugin):
    name = "binpack"
    known_arguments: ClassVar[dict[str, object]] = {
        WEIGHT: 1,
        CPU_WEIGHT: 1,
        MEMORY_WEIGHT: 1,
        RESOURCES: "",
    }
    argument_prefixes: ClassVar[tuple[str, ...]] = (RESOURCE_PREFIX,)

    def on_session_open(self, ssn: Session) -> None:
        self.weight = self.arguments.get_int(WEIGHT, 1)
        self.weights = resource_weights(self.arguments)
        self.table = ssn.nodes
        self._requests: dict[str, _Request | None] = {}
        self._capacities: dict[tuple[int, ...], _Capacity] = {}
        if self.weight != 0:
            ssn.register(ExtensionPoint.NODE_ORDER, self.name, self.node_order)

    def node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        request = self._requests.get(task.uid, _UNSEEN)
        if request is _UNSEEN:
            request = self._requests[task.uid] = self._request(task)
        if request is None or not positions.size:
            return np.zeros(positions.shape[0])
        capacity = self._capacity(request.columns)
        # Resources as rows and nodes as columns keep the numpy loops long and contiguous.
        final = self.table.used.take(positions, axis=0).T[request.rows] + request.amounts
        overflow = (final > capacity.limit.take(positions, axis=1)).any(axis=0)
        scores = request.weights @ (final * capacity.share.take(positions, axis=1))
        scores *= request.scale
        scores[overflow] = 0.0
        return scores

    def _request(self, task: TaskInfo) -> _Request | None:
        """The task's weighted resources, or None when nothing it asks for is weighted."""
        columns: list[int] = []
        amounts: list[float] = []
        weights: list[float] = []
        weight_sum = 0.0
        index = self.table.index.columns
        for name, amount in task.resreq.amounts.items():
            weight = self.weights.get(name)
            if amount <= 0 or weight is None or name == PODS:
                continue
            weight_sum += weight
            column = index.get(name)
            if column is not None and weight:
                columns.append(column)
                amounts.append(amount)
                weights.append(weight)
        if weight_sum <= 0 or not columns:
            return None
        return _Request(
            tuple(columns),
            np.array(columns),
            np.array(amounts)[:, None],
            np.array(weights),
            MAX_NODE_SCORE * self.weight / weight_sum,
        )

    def _capacity(self, columns: tuple[int, ...]) -> _Capacity:
        capacity = self._capacities.get(columns)
        if capacity is None:
            allocatable = np.ascontiguousarray(self.table.allocatable[:, list(columns)].T)
            has = allocatable > 0
            capacity = self._capacities[columns] = _Capacity(
                limit=np.where(has, allocatable, np.inf),
                share=np.where(has, 1.0 / np.where(has, allocatable, 1.0), 0.0),
            )
        return capacity


@dataclass(slots=True)
class _Request:
    """What a task asks for of the weighted resources: their columns (as a key and as an index
    array), amounts (a column vector), weights, and the factor 100 × ``binpack.weight`` / Σ w."""

    columns: tuple[int, ...]
    rows: np.ndarray
    amounts: np.ndarray
    weights: np.ndarray
    scale: float


@dataclass(slots=True)
class _Capacity:
    """Per resource (rows) and node (columns): the most it holds (∞ where it has none, so
    nothing overflows) and 1/allocatable (0 where it has none, so the resource adds no share)."""

    limit: np.ndarray
    share: np.ndarray


_UNSEEN = _Request((), np.zeros(0, dtype=np.intp), np.zeros((0, 1)), np.zeros(0), 0.0)

"""The ``binpack`` plugin: prefer nodes that the task fills most, to keep whole nodes free.

Volcano's formula: over the resources the task requests that have a weight (cpu, memory and
those listed in ``binpack.resources``), score = Σ w·(used + request)/allocatable ÷ Σ w × 100 ×
``binpack.weight``; a node where any of them would overflow scores 0, and a resource the node
does not have adds its weight but no score. Computed for all candidate nodes at once.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.resource import CPU, MEMORY, PODS
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.plugin import Plugin, register_plugin
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


@register_plugin
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
        if self.weight != 0:
            ssn.register("node_order", self.name, self.node_order)

    def node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        columns: list[int] = []
        requests: list[float] = []
        column_weights: list[float] = []
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
                requests.append(amount)
                column_weights.append(weight)
        scores = np.zeros(positions.shape[0])
        if weight_sum <= 0 or not columns or not positions.size:
            return scores
        capacity = self.table.allocatable[np.ix_(positions, columns)]
        final = self.table.used[np.ix_(positions, columns)] + np.array(requests)
        has = capacity > 0
        overflow = (has & (final > capacity)).any(axis=1)
        ratios = np.where(has, final / np.where(has, capacity, 1.0), 0.0)
        scores = ratios @ np.array(column_weights) / weight_sum
        scores *= MAX_NODE_SCORE * self.weight
        scores[overflow] = 0.0
        return scores

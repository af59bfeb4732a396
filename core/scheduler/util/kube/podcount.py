"""The node's pod capacity (``allocatable.pods``), which Volcano checks in its predicates."""

from __future__ import annotations

import numpy as np

REASON = "node(s) pod number exceeded"


class PodRoom:
    """How many more pods each node takes; kept current by the session's events.

    A node whose allocatable lists no ``pods`` is treated as unlimited (kubelets always report
    it; hand-written simulator nodes often omit it).
    """

    def __init__(self, allowed: np.ndarray, counts: np.ndarray) -> None:
        self.room = np.where(allowed > 0, allowed - counts, np.inf)
        self.full = int(np.count_nonzero(self.room < 1))

    def change(self, position: int, delta: int) -> None:
        before = self.room[position] < 1
        self.room[position] -= delta
        self.full += int(self.room[position] < 1) - int(before)

    def full_mask(self) -> np.ndarray:
        return self.room < 1

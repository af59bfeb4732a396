"""Node filtering results and Volcano-style fit-error messages."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class Filter:
    """Which nodes passed one predicate, and why the others failed.

    ``reasons`` holds (nodes failing, reason text, unresolvable) triples; a node may carry
    several reasons (kube-scheduler counts each). ``unresolvable`` marks failures that evicting
    pods cannot fix (taints, affinity), which preemption uses to skip nodes.
    """

    passed: np.ndarray
    reasons: list[tuple[np.ndarray, str, bool]] = field(default_factory=list)

    @classmethod
    def all_pass(cls, count: int) -> Filter:
        return cls(np.ones(count, dtype=bool))

    def fail(self, nodes: np.ndarray, reason: str, unresolvable: bool = False) -> None:
        """Mark ``nodes`` (a bool mask) failed with ``reason``."""
        if nodes.any():
            self.passed = self.passed & ~nodes
            self.reasons.append((nodes, reason, unresolvable))


class FitErrors:
    """Reasons collected over all nodes for one task, formatted as Volcano does."""

    def __init__(self, total_nodes: int) -> None:
        self.total_nodes = total_nodes
        self.histogram: Counter[str] = Counter()

    def add(self, mask: np.ndarray, reason: str, considered: np.ndarray | None = None) -> None:
        if considered is not None:
            mask = mask & considered
        count = int(np.count_nonzero(mask))
        if count:
            self.histogram[reason] += count

    def add_count(self, reason: str, count: int) -> None:
        if count:
            self.histogram[reason] += count

    def message(self, prefix: str = "") -> str:
        parts = sorted(f"{count} {reason}" for reason, count in self.histogram.items())
        text = f"0/{self.total_nodes} nodes are unavailable: {', '.join(parts)}."
        return f"{prefix}{text}" if prefix else text

"""Pods already placed, grouped by shape and node, for inter-pod affinity and spreading.

Pods of one shape have the same namespace, labels and affinity terms, so "which pods does this
term select" is answered per shape, once per session, and kept up to date as shapes appear.
Counting pods per topology domain is then a gather over the selected shapes' node positions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

import numpy as np

from stromboli.core.scheduler.util.kube.podspec import PodSpecInfo, PodTerm

#: Weight kube-scheduler gives an existing pod's required affinity term when scoring.
HARD_POD_AFFINITY_WEIGHT = 1

Matcher = Callable[[PodSpecInfo], bool]


class PodIndex:
    """Placed pods: shape → {node position: pod count}."""

    def __init__(self) -> None:
        self.placements: dict[str, dict[int, int]] = {}
        self.specs: dict[str, PodSpecInfo] = {}
        #: Shapes with placed pods that carry required anti-affinity terms.
        self.anti_shapes: set[str] = set()
        #: Shapes with placed pods whose terms score other pods (symmetric scoring).
        self.scoring_shapes: set[str] = set()
        self._anti_version = 0
        self._scoring_version = 0
        self._selected: dict[Hashable, tuple[Matcher, list[str]]] = {}
        self._anti_for: dict[str, tuple[int, list[tuple[str, PodTerm]]]] = {}
        self._scoring_for: dict[str, tuple[int, list[tuple[str, int, PodTerm]]]] = {}

    # -- updates ---------------------------------------------------------------------------------

    def add(self, shape: str, spec: PodSpecInfo, position: int) -> None:
        nodes = self.placements.get(shape)
        if nodes is None:
            nodes = self.placements[shape] = {}
            self.specs[shape] = spec
            for matcher, shapes in self._selected.values():
                if matcher(spec):
                    shapes.append(shape)
        if not nodes:
            if spec.anti_required:
                self.anti_shapes.add(shape)
                self._anti_version += 1
            if spec.scores_pod_affinity:
                self.scoring_shapes.add(shape)
                self._scoring_version += 1
        nodes[position] = nodes.get(position, 0) + 1

    def remove(self, shape: str, position: int) -> None:
        nodes = self.placements.get(shape)
        if not nodes or position not in nodes:
            return
        left = nodes[position] - 1
        if left:
            nodes[position] = left
            return
        del nodes[position]
        if not nodes:
            if shape in self.anti_shapes:
                self.anti_shapes.discard(shape)
                self._anti_version += 1
            if shape in self.scoring_shapes:
                self.scoring_shapes.discard(shape)
                self._scoring_version += 1

    # -- queries ---------------------------------------------------------------------------------

    def selected(self, key: Hashable, matcher: Matcher) -> list[str]:
        """Shapes (ever placed this session) that ``matcher`` accepts; cached under ``key``."""
        entry = self._selected.get(key)
        if entry is None:
            shapes = [shape for shape, spec in self.specs.items() if matcher(spec)]
            entry = self._selected[key] = (matcher, shapes)
        return entry[1]

    def selected_by(self, term: PodTerm) -> list[str]:
        return self.selected(term, lambda spec: term.selects(spec.namespace, spec.labels))

    def placed(self, shapes: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Node positions and pod counts of the pods of ``shapes``."""
        positions: list[int] = []
        counts: list[int] = []
        for shape in shapes:
            nodes = self.placements[shape]
            positions.extend(nodes)
            counts.extend(nodes.values())
        return np.array(positions, dtype=np.intp), np.array(counts, dtype=float)

    def existing_anti_terms(self, shape: str, spec: PodSpecInfo) -> list[tuple[str, PodTerm]]:
        """(shape, term) of placed pods' required anti-affinity terms that select ``spec``."""
        entry = self._anti_for.get(shape)
        if entry is None or entry[0] != self._anti_version:
            terms = [
                (other, term)
                for other in self.anti_shapes
                for term in self.specs[other].anti_required
                if term.selects(spec.namespace, spec.labels)
            ]
            entry = self._anti_for[shape] = (self._anti_version, terms)
        return entry[1]

    def existing_scoring_terms(
        self, shape: str, spec: PodSpecInfo
    ) -> list[tuple[str, int, PodTerm]]:
        """(shape, signed weight, term) of placed pods' terms that select ``spec``: required
        affinity (kube's hard pod affinity weight), preferred affinity (+), preferred anti (-)."""
        entry = self._scoring_for.get(shape)
        if entry is None or entry[0] != self._scoring_version:
            terms: list[tuple[str, int, PodTerm]] = []
            for other in self.scoring_shapes:
                existing = self.specs[other]
                weighted = [(HARD_POD_AFFINITY_WEIGHT, t) for t in existing.affinity_required]
                weighted += list(existing.affinity_preferred)
                weighted += [(-w, t) for w, t in existing.anti_preferred]
                terms += [
                    (other, w, t) for w, t in weighted if t.selects(spec.namespace, spec.labels)
                ]
            entry = self._scoring_for[shape] = (self._scoring_version, terms)
        return entry[1]

"""Inter-pod affinity and anti-affinity, required (filter) and preferred (score).

kube-scheduler's semantics, per topology domain (the nodes sharing a value of the term's
``topologyKey``):

- placed pods' required anti-affinity terms that select the incoming pod keep it out of their
  domains (the symmetric check);
- the pod's own required anti-affinity terms keep it out of domains holding a selected pod;
- the pod's required affinity terms need, for each term, a domain holding a pod selected by
  all of them; if no such pod exists anywhere and the pod selects itself, it may go to any
  node carrying every topology key (the first pod of a self-affine group).
"""

from __future__ import annotations

import numpy as np

from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.util.kube.nodeindex import NodeIndex
from stromboli.core.scheduler.util.kube.podindex import PodIndex
from stromboli.core.scheduler.util.kube.podspec import PodSpecInfo, PodTerm

EXISTING_ANTI_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
ANTI_REASON = "node(s) didn't match pod anti-affinity rules"
AFFINITY_REASON = "node(s) didn't match pod affinity rules"


class _Occupied:
    """Nodes sharing a topology domain with the pods of some shapes, computed once per call
    for each (shapes, key): a self-anti-affine pod asks the same question twice, once for the
    placed pods' terms and once for its own."""

    def __init__(self, index: NodeIndex, pods: PodIndex) -> None:
        self.index = index
        self.pods = pods
        self.seen: dict[tuple[tuple[str, ...], str], np.ndarray | None] = {}

    def nodes(self, shapes: list[str] | tuple[str, ...], key: str) -> np.ndarray | None:
        """The nodes, or None when no such pod is placed."""
        memo_key = (tuple(shapes), key)
        if memo_key in self.seen:
            return self.seen[memo_key]
        positions, _ = self.pods.placed(shapes)
        mask = None
        if positions.size:
            column = self.index.column(key)
            mask = column.spread(column.slots[positions])
        self.seen[memo_key] = mask
        return mask


def apply_filter(
    result: Filter, index: NodeIndex, pods: PodIndex, shape: str, spec: PodSpecInfo
) -> None:
    """Fail the nodes where ``spec``'s pod would break a required (anti-)affinity rule."""
    occupied = _Occupied(index, pods)
    if pods.anti_shapes:
        terms = pods.existing_anti_terms(shape, spec)
        if terms:
            blocked = np.zeros(index.size, dtype=bool)
            for other, term in terms:
                nodes = occupied.nodes((other,), term.topology_key)
                if nodes is not None:
                    blocked |= nodes
            result.fail(blocked & result.passed, EXISTING_ANTI_REASON)
    if spec.anti_required:
        blocked = np.zeros(index.size, dtype=bool)
        for term in spec.anti_required:
            nodes = occupied.nodes(pods.selected_by(term), term.topology_key)
            if nodes is not None:
                blocked |= nodes
        result.fail(blocked & result.passed, ANTI_REASON)
    if spec.affinity_required:
        ok = _affinity_ok(index, pods, spec)
        result.fail(~ok & result.passed, AFFINITY_REASON, unresolvable=True)


def _affinity_ok(index: NodeIndex, pods: PodIndex, spec: PodSpecInfo) -> np.ndarray:
    terms = spec.affinity_required
    shapes = pods.selected(
        terms, lambda other: all(t.selects(other.namespace, other.labels) for t in terms)
    )
    positions, _ = pods.placed(shapes)
    ok = np.ones(index.size, dtype=bool)
    has_keys = np.ones(index.size, dtype=bool)
    any_pair = False
    for term in terms:
        column = index.column(term.topology_key)
        has_keys &= column.present()
        slots = column.slots[positions]
        slots = slots[slots > 0]
        if slots.size:
            any_pair = True
        ok &= column.spread(slots)
    if any_pair:
        return ok
    if all(t.selects(spec.namespace, spec.labels) for t in terms):
        return has_keys
    return np.zeros(index.size, dtype=bool)


# -- scoring -----------------------------------------------------------------------------------


def raw_scores(
    index: NodeIndex, pods: PodIndex, shape: str, spec: PodSpecInfo, positions: np.ndarray
) -> np.ndarray | None:
    """kube's InterPodAffinity score before normalisation, for ``positions``; None when no
    term on either side applies (every node then scores 0)."""
    weighted: list[tuple[list[str], int, PodTerm]] = []
    for weight, term in spec.affinity_preferred:
        weighted.append((pods.selected_by(term), weight, term))
    for weight, term in spec.anti_preferred:
        weighted.append((pods.selected_by(term), -weight, term))
    if pods.scoring_shapes:
        for other, weight, term in pods.existing_scoring_terms(shape, spec):
            weighted.append(([other], weight, term))
    if not weighted:
        return None
    by_key: dict[str, np.ndarray] = {}
    for shapes, weight, term in weighted:
        placed, counts = pods.placed(shapes)
        if not placed.size:
            continue
        column = index.column(term.topology_key)
        slots = column.slots[placed]
        domain = by_key.get(term.topology_key)
        if domain is None:
            domain = by_key[term.topology_key] = np.zeros(column.size)
        np.add.at(domain, slots, weight * counts)
    if not by_key:
        return None
    scores = np.zeros(positions.shape[0])
    for key, domain in by_key.items():
        domain[0] = 0.0  # pods on nodes without the key score nowhere
        scores += domain[index.column(key).slots[positions]]
    return scores


def normalise(raw: np.ndarray) -> np.ndarray:
    """Scale to 0..100 between the lowest and highest candidate, truncated as kube does."""
    if raw.size == 0:
        return raw
    low, high = raw.min(), raw.max()
    if high - low <= 0:
        return np.zeros_like(raw)
    return np.floor(100.0 * (raw - low) / (high - low))

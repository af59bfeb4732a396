"""Pod topology spread: ``DoNotSchedule`` constraints filter, ``ScheduleAnyway`` ones score.

kube-scheduler's semantics: pods selected by a constraint (same namespace as the incoming pod)
are counted per domain of its ``topologyKey`` over the eligible nodes, i.e. nodes carrying every
constraint's key and passing the node inclusion policies (``nodeAffinityPolicy`` Honor: the
pod's node selector and required affinity; ``nodeTaintsPolicy`` Honor: its tolerations). A node
fails when its domain's count, plus one if the pod selects itself, exceeds the smallest domain
count by more than ``maxSkew``; the smallest count is 0 while fewer than ``minDomains`` domains
exist.
"""

from __future__ import annotations

import math

import numpy as np

from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.plugins.predicates.nodeindex import NodeIndex
from stromboli.core.scheduler.plugins.predicates.podindex import PodIndex
from stromboli.core.scheduler.plugins.predicates.podspec import (
    HONOR,
    PodSpecInfo,
    SpreadConstraint,
)

REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_REASON = f"{REASON} (missing required label)"
HOSTNAME = "kubernetes.io/hostname"


def _selected_counts(
    index: NodeIndex, pods: PodIndex, spec: PodSpecInfo, constraint: SpreadConstraint
) -> np.ndarray:
    """Pods per node selected by ``constraint`` in the incoming pod's namespace."""
    namespace, selector = spec.namespace, constraint.selector
    shapes = pods.selected(
        constraint,
        lambda other: other.namespace == namespace and selector.matches(other.labels),
    )
    positions, counts = pods.placed(shapes)
    if not positions.size:
        return np.zeros(index.size)
    return np.bincount(positions, weights=counts, minlength=index.size)


def eligible_nodes(
    index: NodeIndex,
    constraints: tuple[SpreadConstraint, ...],
    constraint: SpreadConstraint,
    affinity_ok: np.ndarray,
    taints_ok: np.ndarray,
) -> np.ndarray:
    """Nodes whose pods count for ``constraint``."""
    mask = np.ones(index.size, dtype=bool)
    for other in constraints:
        mask &= index.column(other.topology_key).present()
    if constraint.node_affinity_policy == HONOR:
        mask &= affinity_ok
    if constraint.node_taints_policy == HONOR:
        mask &= taints_ok
    return mask


def apply_filter(
    result: Filter,
    index: NodeIndex,
    pods: PodIndex,
    spec: PodSpecInfo,
    affinity_ok: np.ndarray,
    taints_ok: np.ndarray,
) -> None:
    constraints = spec.spread_hard
    for constraint in constraints:
        column = index.column(constraint.topology_key)
        result.fail(~column.present() & result.passed, MISSING_LABEL_REASON, unresolvable=True)
        eligible = eligible_nodes(index, constraints, constraint, affinity_ok, taints_ok)
        slots = column.slots[eligible]
        if not slots.size:
            continue
        per_node = _selected_counts(index, pods, spec, constraint)
        per_domain = np.bincount(slots, weights=per_node[eligible], minlength=column.size)
        present = np.zeros(column.size, dtype=bool)
        present[slots] = True
        domains = int(np.count_nonzero(present))
        smallest = per_domain[present].min() if domains >= constraint.min_domains else 0.0
        self_match = 1 if constraint.selector.matches(spec.labels) else 0
        skew = per_domain[column.slots] + self_match - smallest
        result.fail((skew > constraint.max_skew) & result.passed, REASON)


def scores(
    index: NodeIndex,
    pods: PodIndex,
    spec: PodSpecInfo,
    positions: np.ndarray,
    affinity_ok: np.ndarray,
    taints_ok: np.ndarray,
) -> np.ndarray:
    """kube's PodTopologySpread score over candidate ``positions`` (0..100, fewer matching pods
    in a node's domains scores higher; candidates lacking a key score 0)."""
    constraints = spec.spread_soft
    result = np.zeros(positions.shape[0])
    if not constraints or not positions.size:
        return result
    scored = np.ones(positions.shape[0], dtype=bool)
    for constraint in constraints:
        scored &= index.column(constraint.topology_key).slots[positions] > 0
    if not scored.any():
        return result
    candidates = positions[scored]
    raw = np.zeros(candidates.shape[0])
    for constraint in constraints:
        column = index.column(constraint.topology_key)
        per_node = _selected_counts(index, pods, spec, constraint)
        candidate_slots = column.slots[candidates]
        if constraint.topology_key == HOSTNAME:
            size = candidates.shape[0]
            counts = per_node[candidates]
        else:
            wanted = np.zeros(column.size, dtype=bool)
            wanted[candidate_slots] = True
            size = int(np.count_nonzero(wanted))
            eligible = eligible_nodes(index, constraints, constraint, affinity_ok, taints_ok)
            eligible &= wanted[column.slots]
            per_domain = np.bincount(
                column.slots[eligible], weights=per_node[eligible], minlength=column.size
            )
            counts = per_domain[candidate_slots]
        raw += counts * math.log(size + 2) + (constraint.max_skew - 1)
    raw = np.floor(raw + 0.5)
    high, low = raw.max(), raw.min()
    if high == 0:
        result[scored] = 100.0
    else:
        result[scored] = np.floor(100.0 * (high + low - raw) / high)
    return result

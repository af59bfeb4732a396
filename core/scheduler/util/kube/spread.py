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
from dataclasses import dataclass

import numpy as np

from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.util.kube.nodeindex import LabelColumn, NodeIndex
from stromboli.core.scheduler.util.kube.podindex import PodIndex
from stromboli.core.scheduler.util.kube.podspec import (
    HONOR,
    PodSpecInfo,
    SpreadConstraint,
)
from stromboli.core.scheduler.util.kube.state import StaticMasks

REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_REASON = f"{REASON} (missing required label)"
HOSTNAME = "kubernetes.io/hostname"


def _placed(
    pods: PodIndex, spec: PodSpecInfo, constraint: SpreadConstraint
) -> tuple[np.ndarray, np.ndarray]:
    """Node positions and counts of the pods ``constraint`` selects in the pod's namespace."""
    namespace, selector = spec.namespace, constraint.selector
    shapes = pods.selected(
        constraint,
        lambda other: other.namespace == namespace and selector.matches(other.labels),
    )
    return pods.placed(shapes)


def _domain_counts(
    column: LabelColumn, eligible: np.ndarray, positions: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Selected pods per domain (indexed by slot), counting only pods on eligible nodes."""
    if not positions.size:
        return np.zeros(column.size)
    keep = eligible[positions]
    return np.bincount(column.slots[positions[keep]], weights=counts[keep], minlength=column.size)


@dataclass(slots=True)
class Eligible:
    """The nodes one constraint counts (fixed for a pod shape): their mask, the domains they
    form (a table by slot) and how many domains that is."""

    nodes: np.ndarray
    domains: np.ndarray
    count: int


def eligible_nodes(
    index: NodeIndex,
    constraints: tuple[SpreadConstraint, ...],
    constraint: SpreadConstraint,
    masks: StaticMasks,
) -> Eligible:
    """Nodes whose pods count for ``constraint`` (memoised on the shape's ``masks``)."""
    key = (constraint.hard, constraints.index(constraint))
    eligible = masks.spread_eligible.get(key)
    if eligible is None:
        nodes = np.ones(index.size, dtype=bool)
        for other in constraints:
            nodes &= index.column(other.topology_key).present()
        if constraint.node_affinity_policy == HONOR:
            nodes &= masks.affinity_ok
        if constraint.node_taints_policy == HONOR:
            nodes &= masks.taints_ok
        column = index.column(constraint.topology_key)
        domains = np.zeros(column.size, dtype=bool)
        domains[column.slots[nodes]] = True  # eligible nodes all carry the key: no slot 0
        eligible = Eligible(nodes, domains, int(np.count_nonzero(domains)))
        masks.spread_eligible[key] = eligible
    return eligible


def apply_filter(
    result: Filter, index: NodeIndex, pods: PodIndex, spec: PodSpecInfo, masks: StaticMasks
) -> None:
    constraints = spec.spread_hard
    for constraint in constraints:
        column = index.column(constraint.topology_key)
        result.fail((column.slots == 0) & result.passed, MISSING_LABEL_REASON, unresolvable=True)
        eligible = eligible_nodes(index, constraints, constraint, masks)
        if not eligible.count:
            continue
        per_domain = _domain_counts(column, eligible.nodes, *_placed(pods, spec, constraint))
        if eligible.count >= constraint.min_domains:
            smallest = per_domain[eligible.domains].min()
        else:
            smallest = 0.0
        self_match = 1 if constraint.selector.matches(spec.labels) else 0
        crowded = per_domain + self_match - smallest > constraint.max_skew
        crowded[0] = False
        result.fail(crowded[column.slots] & result.passed, REASON)


def scores(
    index: NodeIndex, pods: PodIndex, spec: PodSpecInfo, positions: np.ndarray, masks: StaticMasks
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
        placed, counts = _placed(pods, spec, constraint)
        candidate_slots = column.slots[candidates]
        if constraint.topology_key == HOSTNAME:
            size = candidates.shape[0]
            on_node = np.bincount(placed, weights=counts, minlength=index.size)
            found = on_node[candidates] if placed.size else np.zeros(size)
        else:
            size = int(np.count_nonzero(np.bincount(candidate_slots)))
            eligible = eligible_nodes(index, constraints, constraint, masks).nodes
            found = _domain_counts(column, eligible, placed, counts)[candidate_slots]
        raw += found * math.log(size + 2) + (constraint.max_skew - 1)
    raw = np.floor(raw + 0.5)
    high, low = raw.max(), raw.min()
    if high == 0:
        result[scored] = 100.0
    else:
        result[scored] = np.floor(100.0 * (high + low - raw) / high)
    return result

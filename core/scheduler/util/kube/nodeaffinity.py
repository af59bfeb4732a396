"""Node selector and node affinity: which nodes a pod may go to, and which it prefers.

kube-scheduler's rules: ``nodeSelector`` pairs and the required node affinity must both hold;
the required ``nodeSelectorTerms`` are ORed and each term's requirements ANDed; an empty or
malformed term matches nothing. Preferred terms add their weight where they match.
"""

from __future__ import annotations

import numpy as np

from stromboli.core.scheduler.util.kube.nodeindex import NodeIndex
from stromboli.core.scheduler.util.kube.podspec import (
    NodeExpression,
    NodeTerm,
    PodSpecInfo,
)

REASON = "node(s) didn't match Pod's node affinity/selector"


def expression_mask(index: NodeIndex, expr: NodeExpression) -> np.ndarray:
    op = expr.operator
    if op in ("Gt", "Lt"):
        numbers = index.numbers(expr.key)
        with np.errstate(invalid="ignore"):
            return numbers > expr.number if op == "Gt" else numbers < expr.number
    column = index.column(expr.key)
    if op == "In":
        return column.mask_in(expr.values)
    if op == "NotIn":
        return ~column.mask_in(expr.values)
    if op == "Exists":
        return column.present()
    return ~column.present()  # DoesNotExist


def term_mask(index: NodeIndex, term: NodeTerm) -> np.ndarray:
    if term.matches_nothing:
        return np.zeros(index.size, dtype=bool)
    mask = np.ones(index.size, dtype=bool)
    for expr in term.expressions:
        mask &= expression_mask(index, expr)
    for operator, names in term.fields:
        named = index.names(names)
        mask &= named if operator == "In" else ~named
    return mask


def required_mask(index: NodeIndex, info: PodSpecInfo) -> np.ndarray:
    """Nodes that satisfy the pod's ``nodeSelector`` and required node affinity."""
    mask = np.ones(index.size, dtype=bool)
    for key, value in info.node_selector:
        mask &= index.column(key).mask_in((value,))
    if info.required_terms is not None:
        any_term = np.zeros(index.size, dtype=bool)
        for term in info.required_terms:
            any_term |= term_mask(index, term)
        mask &= any_term
    return mask


def preferred_scores(index: NodeIndex, info: PodSpecInfo) -> np.ndarray:
    """Sum of the weights of the preferred terms each node matches."""
    scores = np.zeros(index.size)
    for weight, term in info.preferred_terms:
        scores += weight * term_mask(index, term)
    return scores

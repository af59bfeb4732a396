"""Taints and tolerations: NoSchedule and NoExecute taints block, PreferNoSchedule only scores.

Nodes rarely carry more than a handful of distinct taint lists, so tolerations are checked once
per taint signature (see ``NodeIndex.taints``) and spread to nodes with a table lookup.
"""

from __future__ import annotations

import numpy as np

from stromboli.core.scheduler.util.kube.nodeindex import NodeIndex
from stromboli.core.scheduler.util.kube.podspec import PodSpecInfo

HARD_EFFECTS = ("NoSchedule", "NoExecute")
PREFER_NO_SCHEDULE = "PreferNoSchedule"


def reason(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def hard_failures(index: NodeIndex, info: PodSpecInfo) -> list[tuple[np.ndarray, str]]:
    """(nodes, reason) per first untolerated NoSchedule/NoExecute taint, in node taint order."""
    table = index.taints
    by_reason: dict[str, list[int]] = {}
    for sig_id, signature in enumerate(table.signatures):
        for key, value, effect in signature:
            if effect in HARD_EFFECTS and not info.tolerates(key, value, effect):
                by_reason.setdefault(reason(key, value), []).append(sig_id)
                break
    failures = []
    for text, sig_ids in by_reason.items():
        lookup = np.zeros(len(table.signatures), dtype=bool)
        lookup[sig_ids] = True
        failures.append((lookup[table.ids], text))
    return failures


def intolerable_soft_counts(index: NodeIndex, info: PodSpecInfo) -> np.ndarray:
    """Per node, the PreferNoSchedule taints the pod does not tolerate (kube's TaintToleration
    score input; a toleration for another effect does not count)."""
    table = index.taints
    counts = np.zeros(len(table.signatures))
    for sig_id, signature in enumerate(table.signatures):
        counts[sig_id] = sum(
            1
            for key, value, effect in signature
            if effect == PREFER_NO_SCHEDULE and not info.tolerates(key, value, effect)
        )
    return counts[table.ids]

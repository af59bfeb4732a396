"""Cordoned nodes (``spec.unschedulable``) take only pods that tolerate the matching taint."""

from __future__ import annotations

import numpy as np

from stromboli.core.scheduler.util.kube.nodeindex import NodeIndex
from stromboli.core.scheduler.util.kube.podspec import UNSCHEDULABLE_TAINT, PodSpecInfo

REASON = "node(s) were unschedulable"


def failures(index: NodeIndex, info: PodSpecInfo) -> np.ndarray:
    """Nodes the pod may not use because they are cordoned."""
    if info.tolerates(UNSCHEDULABLE_TAINT, "", "NoSchedule"):
        return np.zeros(index.size, dtype=bool)
    return index.unschedulable

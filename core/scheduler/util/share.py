"""Dominant resource share, the measure of fairness of ``drf``, its hierarchy and the metrics."""

from __future__ import annotations

from stromboli.core.scheduler.api.resource import PODS, Resource


def dominant_share(allocated: Resource, total: Resource) -> float:
    """The largest fraction of any cluster resource (pods and absent resources excluded)."""
    share = 0.0
    for name, capacity in total.amounts.items():
        if name == PODS or capacity <= 0:
            continue
        share = max(share, allocated.get(name) / capacity)
    return share

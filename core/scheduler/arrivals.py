"""New work seen by the watch, so that the loop may start a cycle before its period ends.

kube-scheduler takes a pod from its queue the moment it arrives; a periodic scheduler would make
each pod wait half a period on average. The loop asks this signal whether work came in since
the last snapshot: a pod of ours with no node, or a PodGroup, newly added. Status changes of
pods already placed (kwok's, the kubelet's) are not new work and never wake it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from stromboli.core.api import constants as k

_POD = ("v1", "Pod")
_PODGROUP = (k.SCHEDULING_V1BETA1, "PodGroup")


class Arrivals:
    """Set when new work arrives; cleared when a snapshot takes it in."""

    def __init__(self, scheduler_names: Collection[str]) -> None:
        self.scheduler_names = scheduler_names
        self.event = asyncio.Event()
        #: Arrivals noticed since the process started (for tests and benchmarks).
        self.seen = 0

    def notice(self, kind: tuple[str, str], event_type: str, obj: dict) -> None:
        if event_type != "ADDED" or not self._is_work(kind, obj):
            return
        self.seen += 1
        self.event.set()

    def _is_work(self, kind: tuple[str, str], obj: dict) -> bool:
        if kind == _PODGROUP:
            return True
        if kind != _POD:
            return False
        spec = obj.get("spec") or {}
        if not isinstance(spec, dict) or spec.get("nodeName"):
            return False
        return spec.get("schedulerName", "default-scheduler") in self.scheduler_names

    def clear(self) -> None:
        self.event.clear()

    def is_set(self) -> bool:
        return self.event.is_set()

"""Queues of a snapshot (Volcano's QueueInfo)."""

from __future__ import annotations

from dataclasses import dataclass

from stromboli.core.scheduler.api.resource import Resource


@dataclass(slots=True, eq=False)
class QueueInfo:
    name: str
    uid: str
    weight: int
    priority: int
    reclaimable: bool
    state: str
    parent: str
    creation: str
    queue: dict
    capability: Resource | None = None
    deserved: Resource | None = None
    guarantee: Resource | None = None

    def is_open(self) -> bool:
        return self.state in ("", "Open")

    @property
    def annotations(self) -> dict[str, str]:
        return (self.queue.get("metadata") or {}).get("annotations") or {}

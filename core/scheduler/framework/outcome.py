"""What a session decided, collected for the binder and the status writer."""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.api.job import TaskInfo


@dataclass(slots=True)
class Eviction:
    task: TaskInfo
    reason: str
    action: str


@dataclass(slots=True)
class SessionOutcome:
    binds: list[tuple[TaskInfo, str]] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)

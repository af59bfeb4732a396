"""conformance: never evict critical system pods."""

from __future__ import annotations

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, Session

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


def evictable(task: TaskInfo) -> bool:
    class_name = (task.pod.get("spec") or {}).get("priorityClassName", "")
    return class_name not in CRITICAL_CLASSES and task.namespace != SYSTEM_NAMESPACE


class ConformancePlugin(Plugin):
    name = "conformance"

    def on_session_open(self, ssn: Session) -> None:
        def victims(_preemptor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return [t for t in candidates if evictable(t)], PERMIT

        ssn.register(ExtensionPoint.PREEMPTABLE, self.name, victims)
        ssn.register(ExtensionPoint.RECLAIMABLE, self.name, victims)

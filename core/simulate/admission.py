"""What the API server's admission does to the simulator's input before it is stored.

Volcano's mutating webhook rules (shared with the webhook) plus the one built-in admission
step the scheduler depends on: resolving a pod's ``priorityClassName`` into ``spec.priority``.
"""

from __future__ import annotations

from stromboli.core.api import constants as k
from stromboli.webhooks.rules.mutate import mutate_podgroup, mutate_queue


class Admission:
    def __init__(self) -> None:
        self.priority_classes: dict[str, int] = {}
        self.global_default = 0
        self.namespace_annotations: dict[str, dict[str, str]] = {}

    def admit(self, obj: dict) -> dict:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        if kind == "PriorityClass":
            value = int(obj.get("value") or 0)
            self.priority_classes[meta["name"]] = value
            if obj.get("globalDefault"):
                self.global_default = value
        elif kind == "Namespace":
            self.namespace_annotations[meta["name"]] = dict(meta.get("annotations") or {})
        elif kind == "Queue" and obj.get("apiVersion") == k.SCHEDULING_V1BETA1:
            return mutate_queue(obj)
        elif kind == "PodGroup" and obj.get("apiVersion") == k.SCHEDULING_V1BETA1:
            namespace = meta.get("namespace", "default")
            return mutate_podgroup(obj, self.namespace_annotations.get(namespace, {}))
        elif kind == "Pod":
            return self._pod_priority(obj)
        return obj

    def _pod_priority(self, pod: dict) -> dict:
        spec = pod.get("spec") or {}
        if spec.get("priority") is not None:
            return pod
        class_name = spec.get("priorityClassName")
        if class_name:
            value = self.priority_classes.get(class_name)
            if value is None:
                raise ValueError(f"spec.priorityClassName: no PriorityClass named {class_name!r}")
        else:
            value = self.global_default
        return {**pod, "spec": {**spec, "priority": value}}

"""What the scheduler reads from a pod: requests, priority, role, flags.

Pods arrive as plain dicts (Kubernetes wire shape); parsing happens once per pod version in the
cache, never per cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.resource import Resource

#: Priority a task gets when its pod carries none (Volcano's default task priority).
DEFAULT_TASK_PRIORITY = 1
#: vGPU amounts that no node advertises as a resource: the ``deviceshare`` plugin checks them
#: card by card, so they are left out of every amount the scheduler reads (pod requests,
#: PodGroup ``minResources``, queue capability, node allocatable), as Volcano's "ignored
#: devices" are. ``volcano.sh/vgpu-number`` is not among them: it stays a counted scalar.
IGNORED_DEVICE_RESOURCES = frozenset(
    ("volcano.sh/vgpu-memory", "volcano.sh/vgpu-memory-percentage", "volcano.sh/vgpu-cores")
)


def without_ignored_devices(resources: Any) -> Any:
    """A ResourceList without the per-card vGPU amounts; anything but a mapping is returned as
    it is, for ``Resource.from_list`` to refuse naming the field.

    Without this, a PodGroup whose ``minResources`` carries ``volcano.sh/vgpu-memory`` (copied
    from its pods' requests) would wait in enqueue forever for a resource no node lists.
    """
    if not isinstance(resources, Mapping) or IGNORED_DEVICE_RESOURCES.isdisjoint(resources):
        return resources
    return {n: v for n, v in resources.items() if n not in IGNORED_DEVICE_RESOURCES}


def _container_requests(container: dict, where: str) -> Resource:
    resources = container.get("resources") or {}
    # Kubernetes defaults each missing request to its limit, resource by resource.
    requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return Resource.from_list(without_ignored_devices(requests), f"{where}.resources.requests")


def pod_requests(pod: dict) -> tuple[Resource, Resource]:
    """Return (running request, scheduling request) of a pod.

    The running request sums the app containers (and sidecars); the scheduling request also
    covers init containers (the largest one runs alone) and pod overhead, as kube-scheduler and
    Volcano's ``InitResreq`` do.
    """
    spec = pod.get("spec") or {}
    running = Resource()
    for i, container in enumerate(spec.get("containers") or ()):
        running.add(_container_requests(container, f"spec.containers[{i}]"))
    sidecars = Resource()
    init_peak = Resource()
    for i, container in enumerate(spec.get("initContainers") or ()):
        request = _container_requests(container, f"spec.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            sidecars.add(request)
            continue
        init_peak = init_peak.max_with(request + sidecars)
    running.add(sidecars)
    scheduling = running.max_with(init_peak)
    overhead = spec.get("overhead")
    if overhead:
        scheduling.add(Resource.from_list(overhead, "spec.overhead"))
    return running, scheduling


def annotation_or_label(pod: dict, key: str) -> str | None:
    """Volcano reads behaviour keys from annotations first, then labels."""
    meta = pod.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(key)
    if value is None:
        value = (meta.get("labels") or {}).get(key)
    return value


def parse_bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1", "yes")


def task_priority(pod: dict) -> int:
    """``volcano.sh/task-priority`` overrides ``spec.priority``; default 1."""
    override = annotation_or_label(pod, k.TASK_PRIORITY_KEY)
    if override is not None:
        try:
            return int(override)
        except ValueError:
            pass
    priority = (pod.get("spec") or {}).get("priority")
    return int(priority) if priority is not None else DEFAULT_TASK_PRIORITY


def pod_index(name: str) -> int:
    """The replica index parsed from a ``<job>-<task>-<index>`` name; -1 when absent."""
    _, _, tail = name.rpartition("-")
    return int(tail) if tail.isdigit() else -1


def is_scheduling_gated(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))

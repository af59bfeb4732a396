"""What one pod of a task counts against a ResourceQuota, as Volcano writes it into the
``minResources`` of a vcjob's PodGroup (Kubernetes' pod quota usage).

Beside ``cpu`` and ``memory`` a pod counts ``pods`` and ``count/pods``, its requests again as
``requests.<name>``, its limits as ``limits.<name>``, and an extended resource both with and
without the ``requests.`` prefix, so a quota check on the group sees the names a quota lists.
Only what the template states counts: a request left out is not filled in from its limit
(Volcano reads the template, which nothing has defaulted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.scheduler.api.resource import CPU, PODS, Resource, format_amount, to_amount

#: Requests counted under their own name and again with ``requests.`` before it.
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_HUGEPAGES = "hugepages-"
_REQUESTS = "requests."
_LIMITS = "limits."
_COUNT_PODS = "count/pods"


def _container_amounts(container: Any, key: str, where: str) -> Resource:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    listed = resources.get(key) if isinstance(resources, Mapping) else None
    if not isinstance(listed, Mapping):
        return Resource()
    return Resource(
        {
            str(name): to_amount(str(name), v, f"{where}.resources.{key}.{name}")
            for name, v in listed.items()
        }
    )


def _aggregate(spec: Mapping[str, Any], key: str, where: str) -> Resource:
    """Containers summed; each init container alone (with the sidecars started before it), the
    largest of those if larger; sidecars run throughout."""
    total = Resource()
    for i, container in enumerate(spec.get("containers") or ()):
        total.add(_container_amounts(container, key, f"{where}.containers[{i}]"))
    sidecars = Resource()
    init_peak = Resource()
    for i, container in enumerate(spec.get("initContainers") or ()):
        amounts = _container_amounts(container, key, f"{where}.initContainers[{i}]")
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            total.add(amounts)
            sidecars.add(amounts)
            continue
        init_peak = init_peak.max_with(amounts + sidecars)
    return total.max_with(init_peak)


def _is_extended(name: str) -> bool:
    """A resource outside Kubernetes' own domain (``nvidia.com/gpu``)."""
    domain, slash, _ = name.partition("/")
    if not slash or name.startswith(_REQUESTS):
        return False
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def pod_quota_usage(spec: Mapping[str, Any], where: str = "spec") -> Resource:
    """One pod's quota usage, keyed by quota name; amounts in canonical units of the resource
    each name counts (cpu names in millicores). Raises QuantityError naming the field."""
    requests = _aggregate(spec, "requests", where)
    limits = _aggregate(spec, "limits", where)
    overhead = spec.get("overhead")
    if isinstance(overhead, Mapping):
        extra = Resource(
            {str(n): to_amount(str(n), v, f"{where}.overhead.{n}") for n, v in overhead.items()}
        )
        requests.add(extra)
        for name, amount in extra.amounts.items():
            if limits.get(name):  # overhead is added to limits that are set and not zero
                limits.amounts[name] += amount
    usage = {PODS: 1.0, _COUNT_PODS: 1.0}
    for name, amount in requests.amounts.items():
        if name in _COMPUTE or name.startswith(_HUGEPAGES):
            usage[name] = amount
            usage[_REQUESTS + name] = amount
        elif _is_extended(name):
            usage[_REQUESTS + name] = amount
            usage[name] = amount
    for name in _COMPUTE:
        if name in limits.amounts:
            usage[_LIMITS + name] = limits.amounts[name]
    return Resource(usage)


def quota_list(usage: Resource) -> dict[str, str]:
    """ResourceList text of a quota usage: each name formatted as the resource it counts."""
    listed: dict[str, str] = {}
    for name, amount in sorted(usage.amounts.items()):
        base = name.removeprefix(_REQUESTS).removeprefix(_LIMITS)
        if name == _COUNT_PODS:
            base = PODS
        listed[name] = format_amount(CPU if base == CPU else base, amount)
    return listed

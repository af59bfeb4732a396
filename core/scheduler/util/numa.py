"""A node's NUMA layout (from its ``Numatopology``) and where a task's exclusive CPUs go.

The choice follows the kubelet's topology manager, so that a pod the scheduler places is one
the kubelet admits: ``single-numa-node`` takes every CPU from one NUMA node; ``restricted``
takes them from the fewest NUMA nodes that could ever hold the request (the kubelet's
preferred width) or not at all; ``best-effort`` tries that width and widens when it must;
``none`` asks for no alignment. Every function here is pure: the plugin keeps the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stromboli.core.api.constants import NumaTopologyPolicy
from stromboli.core.scheduler.util.cpuset import CpuSetError, parse_cpuset

#: ``spec.policies`` keys the node agent reports (the kubelet's own option names).
CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"
STATIC = "static"
#: Most NUMA nodes one node may report; more is a broken object, not a machine.
MAX_NUMA_NODES = 256

POLICIES = frozenset(p.value for p in NumaTopologyPolicy)


@dataclass(frozen=True, slots=True)
class NodeNuma:
    """One node's CPUs by NUMA node, as its Numatopology reports them."""

    cpu_manager_policy: str
    topology_policy: str
    #: NUMA node → the CPUs of it the kubelet may hand out exclusively.
    allocatable: Mapping[int, frozenset[int]]

    @property
    def numa_count(self) -> int:
        return len(self.allocatable)


def node_numa(obj: Mapping[str, Any]) -> NodeNuma:
    """The layout of a stored Numatopology; a malformed one raises ``ValueError`` naming the
    object and the field."""
    name = (obj.get("metadata") or {}).get("name", "?")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"Numatopology {name}: spec is not an object")
    policies = spec.get("policies") or {}
    if not isinstance(policies, Mapping):
        raise ValueError(f"Numatopology {name}: spec.policies is not a map")
    numares = spec.get("numares") or {}
    cpu = numares.get("cpu") if isinstance(numares, Mapping) else None
    text = cpu.get("allocatable") if isinstance(cpu, Mapping) else ""
    try:
        cpus = parse_cpuset(text or "")
    except CpuSetError as err:
        raise ValueError(f"Numatopology {name}: spec.numares.cpu.allocatable: {err}") from None
    detail = spec.get("cpuDetail") or {}
    if not isinstance(detail, Mapping):
        raise ValueError(f"Numatopology {name}: spec.cpuDetail is not a map")
    by_numa: dict[int, set[int]] = {}
    for cpu_id in sorted(cpus):
        info = detail.get(str(cpu_id))
        numa = info.get("numa") if isinstance(info, Mapping) else None
        if isinstance(numa, bool) or not isinstance(numa, int) or numa < 0:
            raise ValueError(
                f"Numatopology {name}: spec.cpuDetail[{cpu_id}].numa is {numa!r}, not a NUMA id"
            )
        by_numa.setdefault(numa, set()).add(cpu_id)
        if len(by_numa) > MAX_NUMA_NODES:
            raise ValueError(f"Numatopology {name}: more than {MAX_NUMA_NODES} NUMA nodes")
    return NodeNuma(
        str(policies.get(CPU_MANAGER_POLICY) or ""),
        str(policies.get(TOPOLOGY_MANAGER_POLICY) or ""),
        {numa: frozenset(ids) for numa, ids in by_numa.items()},
    )


def preferred_width(capacity: Mapping[int, int], count: int) -> int | None:
    """The fewest NUMA nodes whose CPUs together could hold ``count`` on an empty node (the
    kubelet's preferred hint width); None when the whole node could not."""
    total = 0
    for width, size in enumerate(sorted(capacity.values(), reverse=True), start=1):
        total += size
        if total >= count:
            return width
    return None


def choose_cpus(
    policy: str,
    capacity: Mapping[int, int],
    free: Mapping[int, frozenset[int]],
    count: int,
) -> frozenset[int] | None:
    """The CPUs to give a task asking ``count`` exclusive CPUs under ``policy``, or None when
    the policy cannot be honoured on this node now. ``capacity`` is each NUMA node's CPU count,
    ``free`` its CPUs not held by other pods."""
    if count <= 0:
        return frozenset()
    width = preferred_width(capacity, count)
    if width is None:
        return None
    # NUMA nodes with the most free CPUs first (then the lowest id): the best set of any
    # width, since holding the request only needs the largest free counts.
    ranked = sorted(free, key=lambda n: (-len(free[n]), n))
    if policy == NumaTopologyPolicy.SINGLE_NUMA_NODE:
        fitting = [n for n in free if len(free[n]) >= count]
        if not fitting:
            return None
        # The tightest NUMA node that holds the request keeps roomier ones for larger pods.
        chosen = [min(fitting, key=lambda n: (len(free[n]), n))]
    elif policy == NumaTopologyPolicy.RESTRICTED:
        chosen = ranked[:width]
        if sum(len(free[n]) for n in chosen) < count:
            return None
    elif policy == NumaTopologyPolicy.BEST_EFFORT:
        chosen = []
        held = 0
        for n in ranked:
            if held >= count:
                break
            chosen.append(n)
            held += len(free[n])
        if held < count:
            return None
    else:
        chosen = sorted(free)
        if sum(len(free[n]) for n in chosen) < count:
            return None
    picked: list[int] = []
    for n in chosen:
        for cpu in sorted(free[n]):
            if len(picked) == count:
                break
            picked.append(cpu)
    return frozenset(picked)


def numa_nodes_of(cpus: frozenset[int], layout: NodeNuma) -> set[int]:
    """The NUMA nodes ``cpus`` lie on."""
    return {n for n, ids in layout.allocatable.items() if ids & cpus}

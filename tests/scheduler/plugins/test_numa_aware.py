"""numa-aware: CPU lists, the kubelet's alignment rules per topology policy, the predicate's
reasons, the decision written on the pod, and CPUs kept across a scheduler restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.plugins.numa_aware import (
    NO_FIT,
    NO_TOPOLOGY,
    NOT_STATIC,
    exclusive_cpus,
    no_fit_reason,
    policy_mismatch,
)
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.scheduler.util.cpuset import CpuSetError, format_cpuset, parse_cpuset
from stromboli.core.scheduler.util.numa import choose_cpus, node_numa, preferred_width
from tests.scheduler.builders import Cluster, conf, container, make_session, node, pod, podgroup

register_builtins()

NUMA_CONF = conf("enqueue, allocate", ["priority", "gang"], ["proportion", "numa-aware"])
SINGLE = k.NumaTopologyPolicy.SINGLE_NUMA_NODE.value
RESTRICTED = k.NumaTopologyPolicy.RESTRICTED.value
BEST_EFFORT = k.NumaTopologyPolicy.BEST_EFFORT.value


def numatopology(
    name: str,
    numa_sizes: list[int],
    policy: str = SINGLE,
    cpu_manager: str = "static",
    allocatable: str | None = None,
) -> dict[str, Any]:
    """A node agent's report: NUMA node i holds the next ``numa_sizes[i]`` CPU ids."""
    detail: dict[str, dict[str, int]] = {}
    cpu = 0
    for numa, size in enumerate(numa_sizes):
        for _ in range(size):
            detail[str(cpu)] = {"numa": numa, "socket": numa, "core": cpu}
            cpu += 1
    return {
        "apiVersion": k.NODEINFO_V1ALPHA1,
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": cpu_manager, "TopologyManagerPolicy": policy},
            "numares": {
                "cpu": {"allocatable": allocatable or f"0-{cpu - 1}", "capacity": cpu},
            },
            "cpuDetail": detail,
        },
    }


def pinned(name: str, cpus: int, policy: str = SINGLE, **more: Any) -> list[dict]:
    """A Guaranteed pod asking ``cpus`` whole CPUs under ``policy``, in its own PodGroup."""
    spec = container(str(cpus), "1Gi", limits={"cpu": str(cpus), "memory": "1Gi"})
    notes = {k.NUMA_TOPOLOGY_POLICY_KEY: policy} if policy else {}
    return [
        podgroup(name, 1, phase="Inqueue"),
        pod(name, group=name, containers=[spec], annotations=notes, **more),
    ]


# -- CPU lists ---------------------------------------------------------------------------------


def test_cpuset_round_trip_and_ranges() -> None:
    assert parse_cpuset("0-3,8,10-11") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert parse_cpuset("") == frozenset()
    assert format_cpuset({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"


@pytest.mark.parametrize("text", ["0-99999999", "3-1", "a", "1,-2", "0-"])
def test_cpuset_refuses_what_is_not_a_bounded_list(text: str) -> None:
    with pytest.raises(CpuSetError, match="CPU"):
        parse_cpuset(text)


@given(st.sets(st.integers(0, 300), max_size=60))
def test_cpuset_format_parses_back(ids: set[int]) -> None:
    assert parse_cpuset(format_cpuset(ids)) == ids


# -- the alignment rules -------------------------------------------------------------------


def free_of(sizes: list[int], taken: list[int]) -> tuple[dict[int, int], dict[int, frozenset]]:
    capacity, free, cpu = {}, {}, 0
    for numa, size in enumerate(sizes):
        capacity[numa] = size
        free[numa] = frozenset(range(cpu + taken[numa], cpu + size))
        cpu += size
    return capacity, free


def test_preferred_width_is_the_fewest_numa_nodes_that_could_hold_it() -> None:
    assert preferred_width({0: 8, 1: 8}, 8) == 1
    assert preferred_width({0: 8, 1: 8}, 9) == 2
    assert preferred_width({0: 8, 1: 8}, 17) is None


def test_single_numa_node_takes_the_tightest_numa_node_that_holds_it() -> None:
    capacity, free = free_of([8, 8], [5, 2])  # 3 and 6 free
    assert choose_cpus(SINGLE, capacity, free, 3) == frozenset({5, 6, 7})
    assert choose_cpus(SINGLE, capacity, free, 6) == frozenset(range(10, 16))
    assert choose_cpus(SINGLE, capacity, free, 7) is None  # 9 free, but not on one NUMA node


def test_restricted_keeps_the_preferred_width_and_best_effort_widens() -> None:
    capacity, free = free_of([4, 4, 4], [2, 2, 0])  # 2, 2, 4 free
    # 6 CPUs fit on 2 NUMA nodes of an empty node: restricted uses 2 or refuses.
    assert choose_cpus(RESTRICTED, capacity, free, 6) == frozenset({8, 9, 10, 11, 2, 3})
    capacity, free = free_of([4, 4, 4], [2, 2, 2])  # 2 free each
    assert choose_cpus(RESTRICTED, capacity, free, 6) is None
    widened = choose_cpus(BEST_EFFORT, capacity, free, 6)
    assert widened == frozenset({2, 3, 6, 7, 10, 11})
    assert choose_cpus(BEST_EFFORT, capacity, free, 7) is None


layouts = st.lists(st.integers(1, 8), min_size=1, max_size=4).flatmap(
    lambda sizes: st.tuples(
        st.just(sizes), st.tuples(*(st.integers(0, s) for s in sizes)), st.integers(1, 16)
    )
)


@settings(max_examples=300, deadline=None)
@given(layouts, st.sampled_from([SINGLE, RESTRICTED, BEST_EFFORT]))
def test_policies_are_honoured(case: tuple, policy: str) -> None:
    sizes, taken, count = case
    capacity, free = free_of(sizes, list(taken))
    chosen = choose_cpus(policy, capacity, free, count)
    spans = None if chosen is None else {n for n, ids in free.items() if ids & chosen}
    if chosen is not None:
        assert len(chosen) == count
        assert chosen <= frozenset().union(*free.values())  # only free CPUs
    if policy == SINGLE:
        assert (chosen is not None) == any(len(f) >= count for f in free.values())
        assert spans is None or len(spans) == 1  # never spans NUMA nodes
    elif policy == RESTRICTED:
        width = preferred_width(capacity, count)
        if spans is not None:
            assert width is not None and len(spans) <= width
    else:
        total = sum(len(f) for f in free.values())
        assert (chosen is not None) == (count <= total and sum(sizes) >= count)


# -- the plugin in a session ---------------------------------------------------------------


def test_predicate_names_why_each_node_is_refused() -> None:
    objects = [node(f"n{i}", cpu="16", memory="64Gi") for i in range(5)]
    objects += [
        numatopology("n1", [8, 8], cpu_manager="none"),
        numatopology("n2", [8, 8], policy=RESTRICTED),
        numatopology("n3", [8, 8], allocatable="0-3,8-11"),  # 4 free per NUMA node
        numatopology("n4", [8, 8]),
    ]
    objects += pinned("p", 6)
    ssn = make_session(objects, NUMA_CONF)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values())
    verdict = ssn.predicate(task)
    assert verdict.passed.tolist() == [False, False, False, False, True]
    reasons = {reason: mask.nonzero()[0].tolist() for mask, reason, _ in verdict.reasons}
    assert reasons == {
        NO_TOPOLOGY: [0],
        NOT_STATIC: [1],
        policy_mismatch(SINGLE): [2],
        no_fit_reason(SINGLE, 6): [3],
    }
    assert no_fit_reason(SINGLE, 6).startswith(NO_FIT)
    assert "no NUMA node has 6 free CPUs" in no_fit_reason(SINGLE, 6)


def test_pods_without_a_policy_or_not_guaranteed_are_not_checked() -> None:
    objects = [node("n0", cpu="16", memory="64Gi")]
    objects += pinned("plain", 4, policy="")
    shared = pinned("burstable", 4)
    shared[1]["spec"]["containers"][0]["resources"].pop("limits")
    objects += shared
    ssn = make_session(objects, NUMA_CONF)
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            assert ssn.predicate(task).passed.all()
    burstable = next(
        t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "burstable"
    )
    assert exclusive_cpus(burstable) == 0


def test_a_node_reporting_nonsense_is_a_node_without_topology() -> None:
    broken = numatopology("n0", [8, 8])
    broken["spec"]["cpuDetail"]["3"] = {"numa": "zero"}
    objects = [node("n0", cpu="16", memory="64Gi"), broken, *pinned("p", 2)]
    ssn = make_session(objects, NUMA_CONF)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values())
    verdict = ssn.predicate(task)
    assert not verdict.passed.any()
    assert [reason for _, reason, _ in verdict.reasons] == [NO_TOPOLOGY]
    with pytest.raises(ValueError, match=r"Numatopology n0: spec.cpuDetail\[3\].numa"):
        node_numa(broken)


# -- through the real scheduler ----------------------------------------------------------------


def decision(obj: dict) -> frozenset[int]:
    text = obj["metadata"]["annotations"][k.TOPOLOGY_DECISION_KEY]
    return parse_cpuset(json.loads(text)["cpu"])


async def test_decisions_written_never_overlap_and_survive_a_restart(tmp_path: Path) -> None:
    cluster = await Cluster(tmp_path, NUMA_CONF).start()
    await cluster.add(node("n0", cpu="16", memory="64Gi"), numatopology("n0", [8, 8]))
    await cluster.add(*pinned("a", 6), *pinned("b", 6))
    await cluster.run(2)
    a, b = await cluster.pod("a"), await cluster.pod("b")
    assert a["spec"]["nodeName"] == b["spec"]["nodeName"] == "n0"
    first, second = decision(a), decision(b)
    assert len(first) == len(second) == 6 and not first & second
    numa_of = {cpu: cpu // 8 for cpu in range(16)}
    assert len({numa_of[c] for c in first}) == len({numa_of[c] for c in second}) == 1

    # A new scheduler over the same store reads the decisions back: the 2 CPUs left on each
    # NUMA node do not hold a third 6-CPU pod, but two 2-CPU ones fit beside the others.
    cluster.scheduler = Scheduler(cluster.store, cluster.clock, cluster.config)
    await cluster.start()
    await cluster.add(*pinned("c", 6), *pinned("d", 2), *pinned("e", 2))
    await cluster.run(2)
    assert await cluster.node_of("c") == ""
    d, e = await cluster.pod("d"), await cluster.pod("e")
    held = [first, second, decision(d), decision(e)]
    assert sum(len(h) for h in held) == len(frozenset().union(*held)) == 16


async def test_single_numa_node_pod_waits_rather_than_span(tmp_path: Path) -> None:
    cluster = await Cluster(tmp_path, NUMA_CONF).start()
    await cluster.add(
        node("n0", cpu="16", memory="64Gi"), numatopology("n0", [8, 8], allocatable="0-4,8-12")
    )
    await cluster.add(*pinned("wide", 6))
    await cluster.run(2)
    assert await cluster.node_of("wide") == ""
    condition = (await cluster.pod("wide"))["status"]["conditions"][0]
    assert NO_FIT in condition["message"]

"""The bounded sub-group search places partitions as trying every HyperNode does.

The whole allocate action is run twice on random small trees, busy nodes (some pods leaving)
and partitioned jobs (``subGroupPolicy`` as a vcjob's ``partitionPolicy`` makes it, with or
without a job ``networkTopology``, partitions hard, soft or free, some members already running,
some PodGroups carrying ``volcano.sh/job-allocated-hypernode``): once with the bounded search,
once with every HyperNode tried. Bindings, pipelined tasks, statuses, fit errors, why each
task waits and the PodGroup annotations must be the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.util.hypernode_search import level_rows, subgroup_prospects
from stromboli.core.scheduler.util.hypernodes import session_tree

from ..builders import conf, make_session, node, pod, podgroup
from .test_hypernode_search import hypernode, trees

TOPO_CONF = conf(
    "allocate", ["priority", "gang"], ["proportion", "binpack", "network-topology-aware"]
)
NO_GANG_CONF = conf("allocate", ["priority"], ["proportion", "network-topology-aware"])
#: No HyperNode scorer: every bound is 0 and the first HyperNode by name that holds wins.
UNSCORED_CONF = conf("allocate", ["priority", "gang"], ["proportion", "binpack"])

TOPOLOGIES: list[dict[str, Any] | None] = [
    None,
    {"mode": "hard", "highestTierAllowed": 1},
    {"mode": "hard", "highestTierAllowed": 2},
    {"mode": "hard", "highestTierAllowed": 3},
    {"mode": "soft"},
]


def partitioned_job(
    draw: st.DrawFn, name: str, nodes: list[str], hypernodes: list[str]
) -> list[dict]:
    """A job of one or two partitioned tasks (and sometimes a plain one), as the job
    controller writes its PodGroup: one policy per task, ``minMember`` the tasks' sum."""
    group = podgroup(name, 1, phase="Inqueue")
    policies: list[dict] = []
    pods: list[dict] = []
    minimum = 0
    for role in draw(st.sampled_from([["worker"], ["worker", "ps"]])):
        partitions, size = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        need = draw(st.integers(0, partitions))
        policy: dict[str, Any] = {
            "name": role,
            "subGroupSize": size,
            "minSubGroups": need,
            "labelSelector": {"matchLabels": {k.TASK_SPEC_KEY: role}},
            "matchLabelKeys": [k.PARTITION_ID_KEY],
        }
        topology = draw(st.sampled_from(TOPOLOGIES))
        if topology is not None:
            policy["networkTopology"] = topology
        policies.append(policy)
        minimum += need * size if need else partitions * size
        cpu = draw(st.sampled_from(["1", "2", "3", "4"]))
        memory = f"{draw(st.integers(1, 3))}Gi"
        for i in range(partitions * size):
            labels = {k.TASK_SPEC_KEY: role, k.PARTITION_ID_KEY: str(i // size)}
            running = draw(st.integers(0, 5)) == 0
            pods.append(
                pod(
                    f"{name}-{role}-{i}",
                    group=name,
                    cpu=cpu,
                    memory=memory,
                    role=role,
                    labels=labels,
                    node_name=draw(st.sampled_from(nodes)) if running else None,
                    phase="Running" if running else None,
                )
            )
    if draw(st.booleans()):
        minimum += 1
        pods.append(pod(f"{name}-launcher-0", group=name, cpu="1", role="launcher"))
    group["spec"]["minMember"] = minimum
    group["spec"]["subGroupPolicy"] = policies
    job_topology = draw(st.sampled_from(TOPOLOGIES))
    if job_topology is not None:
        group["spec"]["networkTopology"] = job_topology
        if draw(st.integers(0, 3)) == 0:
            group["metadata"]["annotations"] = {
                k.JOB_ALLOCATED_HYPERNODE_KEY: draw(st.sampled_from(hypernodes))
            }
    if any(p["spec"].get("nodeName") for p in pods):
        group["status"] = {"phase": "Running"}
    return [group, *pods]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict], str]:
    objects, names, hypernodes = draw(trees())
    for b in range(draw(st.integers(0, 6))):
        objects.append(podgroup(f"busy{b}", 1, phase="Running"))
        objects.append(
            pod(
                f"busy{b}-0",
                group=f"busy{b}",
                cpu=draw(st.sampled_from(["1", "2", "3", "4"])),
                memory=f"{draw(st.integers(1, 4))}Gi",
                node_name=draw(st.sampled_from(names)),
                phase="Running",
                deleting=draw(st.booleans()),
            )
        )
    for j in range(draw(st.integers(1, 3))):
        objects += partitioned_job(draw, f"j{j}", names, hypernodes)
    return objects, draw(st.sampled_from([TOPO_CONF, NO_GANG_CONF, UNSCORED_CONF]))


def outcome(objects: list[dict], config: str, exhaustive_search: bool) -> dict[str, Any]:
    AllocateAction.exhaustive_search = exhaustive_search
    try:
        ssn = make_session(objects, config)
        AllocateAction().execute(ssn)
    finally:
        AllocateAction.exhaustive_search = False
    tasks = {
        t.name: (t.status, t.node_name, t.last_status, t.last_node)
        for j in ssn.jobs.values()
        for t in j.tasks.values()
    }
    return {
        "binds": sorted((t.name, n) for t, n in ssn.outcome.binds),
        "tasks": tasks,
        "errors": {j.name: (j.job_fit_error, dict(j.fit_errors)) for j in ssn.jobs.values()},
        "annotations": ssn.outcome.podgroup_annotations,
        "set_aside": [(j.name, repr(e)) for j, e in ssn.outcome.set_aside],
    }


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_property_bounded_subgroup_search_places_as_trying_every_hypernode(
    case: tuple[list[dict], str],
) -> None:
    objects, config = case
    bounded = outcome(objects, config, False)
    assert bounded == outcome(objects, config, True)
    assert not bounded["set_aside"]


# -- what is known of a sub-group's trial without one ------------------------------------------


def test_a_rack_without_room_for_the_whole_partition_is_never_tried() -> None:
    objects: list[dict] = [node(f"n{i}", cpu="4", memory="8Gi") for i in range(6)]
    objects += [hypernode(f"r{r}", 1, [f"n{2 * r}", f"n{2 * r + 1}"]) for r in range(3)]
    objects += [podgroup("busy", 1, phase="Running")]
    # r0 has 5 of 8 cpu free; r1 is empty; r2 has a node whose pod is leaving (future room).
    objects += [pod("busy-0", group="busy", cpu="3", node_name="n0", phase="Running")]
    objects += [pod("busy-1", group="busy", cpu="4", node_name="n4", phase="Running")]
    objects[-1]["metadata"]["deletionTimestamp"] = "1970-01-01T00:00:00Z"
    group = podgroup("j", 2, phase="Inqueue")
    # network-topology-aware scores HyperNodes in sessions that have a job networkTopology.
    group["spec"]["networkTopology"] = {"mode": "soft"}
    group["spec"]["subGroupPolicy"] = [
        {
            "name": "worker",
            "subGroupSize": 2,
            "minSubGroups": 1,
            "labelSelector": {"matchLabels": {k.TASK_SPEC_KEY: "worker"}},
            "matchLabelKeys": [k.PARTITION_ID_KEY],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    ]
    labels = {k.TASK_SPEC_KEY: "worker", k.PARTITION_ID_KEY: "0"}
    objects += [group]
    objects += [pod(f"j-{i}", group="j", cpu="3", role="worker", labels=labels) for i in range(2)]
    ssn = make_session(objects, TOPO_CONF)
    job = ssn.jobs["default/j"]
    level = level_rows(ssn, session_tree(ssn), ["r0", "r1", "r2"])
    assert level is not None
    known = subgroup_prospects(ssn, job, level, list(job.tasks.values()))
    assert known is not None
    # Both members (6 cpu) fit r1's idle room and r2's idle plus leaving room, not r0's 5.
    assert known.can_ready.tolist() == [False, True, True]
    # The bound adds the whole partition: r2 counts its leaving pod as used.
    # r1: cpu 6/8, memory 0/16Gi (the pods ask none) → 0.75 / 2 × 100.
    assert known.bounds[1] == pytest.approx(37.5)
    assert known.bounds[2] > known.bounds[1]
    assert not known.can_place().any()  # a sub-group trial is never merely pipelined


def test_rows_within_a_domain_are_only_those_under_it() -> None:
    objects: list[dict] = [node(f"n{i}", cpu="4") for i in range(4)]
    objects += [hypernode("r0", 1, ["n0", "n1"]), hypernode("r1", 1, ["n2", "n3"])]
    objects += [hypernode("wide", 1, ["n1", "n2"]), hypernode("s", 2, ["r0"], "HyperNode")]
    ssn = make_session(objects, TOPO_CONF)
    tree = session_tree(ssn)
    inside = level_rows(ssn, tree, ["r0", "wide"], within="s")
    assert inside is not None
    table = ssn.nodes
    names = [table.nodes[int(r)].name for r in inside.rows]
    assert names == ["n0", "n1", "n1"]
    assert inside.starts.tolist() == [0, 2]
    assert inside.group is None  # n1 under both: sums are always taken afresh
    assert np.array_equal(inside.allocatable, inside.sums(table.allocatable))
    assert level_rows(ssn, tree, ["r1"], within="s") is None  # r1 holds nothing under s


def test_a_partition_costs_one_placement_when_the_best_rack_is_tried_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight empty racks and a fuller last one: its bound is the highest and its trial is
    ready, so each partition gets one trial, kept as its placement; trying every rack costs
    nine trials per partition for the same placement."""
    from stromboli.core.scheduler.util import subgroup_placement

    objects: list[dict] = [node(f"n{i}", cpu="8", memory="16Gi") for i in range(18)]
    objects += [hypernode(f"r{r}", 1, [f"n{2 * r}", f"n{2 * r + 1}"]) for r in range(9)]
    # A running job with a networkTopology: network-topology-aware scores HyperNodes.
    busy = podgroup("busy", 1, phase="Running")
    busy["spec"]["networkTopology"] = {"mode": "soft"}
    objects += [busy, pod("busy-0", group="busy", cpu="2", node_name="n16", phase="Running")]
    group = podgroup("j", 4, phase="Inqueue")
    group["spec"]["subGroupPolicy"] = [
        {
            "name": "worker",
            "subGroupSize": 2,
            "minSubGroups": 2,
            "labelSelector": {"matchLabels": {k.TASK_SPEC_KEY: "worker"}},
            "matchLabelKeys": [k.PARTITION_ID_KEY],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    ]
    objects.append(group)
    for i in range(4):
        labels = {k.TASK_SPEC_KEY: "worker", k.PARTITION_ID_KEY: str(i // 2)}
        objects.append(pod(f"j-{i}", group="j", cpu="2", role="worker", labels=labels))
    fills: list[str] = []
    original = subgroup_placement._place_tasks

    def counted(*args: Any, **kwargs: Any) -> bool:
        tasks, domain = args[3], args[5]
        if tasks:  # the tasks no policy selects: none here
            fills.append(domain[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(subgroup_placement, "_place_tasks", counted)
    for exhaustive, expected in ((False, ["r8"] * 2), (True, [f"r{r}" for r in range(9)] * 2)):
        fills.clear()
        AllocateAction.exhaustive_search = exhaustive
        try:
            ssn = make_session(objects, TOPO_CONF)
            AllocateAction().execute(ssn)
        finally:
            AllocateAction.exhaustive_search = False
        assert {n for _, n in ssn.outcome.binds} <= {"n16", "n17"}
        assert len(ssn.outcome.binds) == 4
        assert fills == expected

"""network-topology-aware scheduling in one session: hard jobs never cross a tier they may
not span, soft jobs take the lowest tier that holds them, HyperNode binpacking picks among a
tier's HyperNodes, and a job already placed grows only inside its HyperNode."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.plugins.network_topology import NetworkTopologyPlugin
from stromboli.core.scheduler.util.hypernodes import build_tree

from ..builders import conf, make_session, node, pod, podgroup

TOPO_CONF = conf("allocate", ["priority", "gang"], ["proportion", "network-topology-aware"])
PLAIN_CONF = conf("allocate", ["priority", "gang"], ["proportion"])


def member(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def hypernode(name: str, tier: int, members: list[str], kind: str = "Node", **spec: Any) -> dict:
    return {
        "apiVersion": k.TOPOLOGY_V1ALPHA1,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": [member(m, kind) for m in members], **spec},
    }


def topology_tree() -> list[dict]:
    """Eight 4-cpu nodes: racks s0..s3 (tier 1, two nodes each), spines s4 = s0+s1 and
    s5 = s2+s3 (tier 2), s6 over both (tier 3)."""
    objects: list[dict] = [node(f"n{i}", cpu="4") for i in range(8)]
    for r in range(4):
        objects.append(hypernode(f"s{r}", 1, [f"n{2 * r}", f"n{2 * r + 1}"], tierName="rack"))
    objects.append(hypernode("s4", 2, ["s0", "s1"], "HyperNode", tierName="spine"))
    objects.append(hypernode("s5", 2, ["s2", "s3"], "HyperNode", tierName="spine"))
    objects.append(hypernode("s6", 3, ["s4", "s5"], "HyperNode"))
    return objects


def gang(
    name: str,
    size: int,
    topology: dict | None,
    cpu: str = "4",
    annotations: dict[str, str] | None = None,
) -> list[dict]:
    group = podgroup(name, size, phase="Inqueue", annotations=annotations)
    if topology is not None:
        group["spec"]["networkTopology"] = topology
    return [group, *[pod(f"{name}-{i}", group=name, cpu=cpu) for i in range(size)]]


def running(name: str, on: str, cpu: str = "4") -> list[dict]:
    """A one-pod job already running on node ``on``."""
    return [
        podgroup(name, 1, phase="Running"),
        pod(f"{name}-0", group=name, cpu=cpu, node_name=on, phase="Running"),
    ]


def allocate(objects: list[dict], config: str = TOPO_CONF) -> tuple[Session, dict[str, str]]:
    ssn = make_session(objects, config)
    AllocateAction().execute(ssn)
    return ssn, {task.name: node_name for task, node_name in ssn.outcome.binds}


def racks(placed: dict[str, str]) -> set[int]:
    return {int(n[1:]) // 2 for n in placed.values()}


HARD1 = {"mode": "hard", "highestTierAllowed": 1}
HARD2 = {"mode": "hard", "highestTierAllowed": 2}
SOFT = {"mode": "soft"}


# -- hard mode (Volcano e2e "hypernode" 1.x, 2.1, 2.2) -------------------------------------------


def test_hard_tier_1_gang_lands_in_one_rack() -> None:
    _, placed = allocate([*topology_tree(), *gang("j", 2, HARD1)])
    assert len(placed) == 2 and len(racks(placed)) == 1


def test_hard_gang_skips_a_rack_without_room() -> None:
    objects = [*topology_tree(), *running("busy", "n0"), *gang("j", 2, HARD1)]
    _, placed = allocate(objects)
    assert len(placed) == 2 and len(racks(placed)) == 1 and 0 not in racks(placed)


def test_hard_gang_pending_when_no_rack_holds_it() -> None:
    ssn, placed = allocate([*topology_tree(), *gang("j", 3, HARD1)])
    assert placed == {}
    job = ssn.jobs["default/j"]
    assert "tier <= 1" in job.job_fit_error and "hard" in job.job_fit_error
    assert set(job.fit_errors.values()) == {job.job_fit_error}  # each pod says why


def test_hard_tier_2_falls_to_a_spine_when_no_rack_holds_it() -> None:
    _, placed = allocate([*topology_tree(), *gang("j", 3, HARD2)])
    assert len(placed) == 3
    spines = {int(n[1:]) // 4 for n in placed.values()}
    assert len(spines) == 1


def test_hard_tier_2_pending_when_no_spine_holds_it() -> None:
    _, placed = allocate([*topology_tree(), *gang("j", 5, HARD2)])
    assert placed == {}


def test_highest_tier_name_is_translated() -> None:
    _, placed = allocate([*topology_tree(), *gang("j", 3, {"highestTierName": "spine"})])
    assert len(placed) == 3
    _, placed = allocate([*topology_tree(), *gang("j", 3, {"highestTierName": "rack"})])
    assert placed == {}


def test_unknown_tier_name_applies_no_tier_constraint() -> None:
    _, placed = allocate([*topology_tree(), *gang("j", 8, {"highestTierName": "zone"})])
    assert len(placed) == 8


def test_hard_holds_without_the_plugin_enabled() -> None:
    _, placed = allocate([*topology_tree(), *gang("j", 3, HARD1)], PLAIN_CONF)
    assert placed == {}
    _, placed = allocate([*topology_tree(), *gang("j", 2, HARD1)], PLAIN_CONF)
    assert len(racks(placed)) == 1


# -- soft mode (3.1) -------------------------------------------------------------------------------


def test_soft_prefers_a_single_rack() -> None:
    objects = [*topology_tree(), *gang("j", 2, SOFT, cpu="2")]
    _, placed = allocate(objects)
    assert len(placed) == 2 and len(racks(placed)) == 1


def test_soft_takes_the_lowest_tier_that_holds_it_and_never_waits_for_topology() -> None:
    _, placed = allocate([*topology_tree(), *gang("j", 4, SOFT)])
    assert len(placed) == 4 and {int(n[1:]) // 4 for n in placed.values()} in ({0}, {1})
    _, placed = allocate([*topology_tree(), *gang("j", 6, SOFT)])
    assert len(placed) == 6  # only the root holds six nodes: soft has no boundary


# -- choosing among a tier's HyperNodes (1.2: the better-scoring one) -------------------------


def test_hypernode_binpacking_picks_the_fuller_rack() -> None:
    objects = [*topology_tree(), *running("busy", "n5", cpu="2"), *gang("j", 2, HARD1, cpu="2")]
    _, placed = allocate(objects)
    assert racks(placed) == {2}  # s2 already holds 2 cpu: filling it keeps whole racks free


def test_without_the_plugin_the_first_rack_that_fits_wins() -> None:
    objects = [*topology_tree(), *running("busy", "n5", cpu="2"), *gang("j", 2, HARD1, cpu="2")]
    _, placed = allocate(objects, PLAIN_CONF)
    assert racks(placed) == {0}


def test_hypernode_order_score_formula() -> None:
    ssn = make_session([*topology_tree(), *running("busy", "n0", cpu="2")], TOPO_CONF)
    plugin = ssn.plugins["network-topology-aware"]
    assert isinstance(plugin, NetworkTopologyPlugin)
    job = ssn.jobs["default/busy"]
    # s0 = n0 + n1: 2 of 8 cpu used, and memory used 0 of its share: (0.25 + 0) / 2 × 100.
    score = plugin.hyper_node_order(job, "s0", np.array([0, 1]))
    assert abs(score - 12.5) < 1e-6
    assert plugin.hyper_node_order(job, "s1", np.array([2, 3])) == 0.0


def test_plugin_registers_nothing_without_topology_jobs() -> None:
    ssn = make_session([*topology_tree(), *gang("j", 2, None)], TOPO_CONF)
    assert not ssn.enabled(ExtensionPoint.BATCH_NODE_ORDER, "network-topology-aware")
    assert not ssn.enabled(ExtensionPoint.HYPER_NODE_ORDER, "network-topology-aware")


# -- a job already placed stays in its HyperNode (2.3) ---------------------------------------


def test_a_restarted_pod_returns_to_its_jobs_rack() -> None:
    group = podgroup("j", 2, phase="Running")
    group["spec"]["networkTopology"] = HARD2
    objects = [
        *topology_tree(),
        group,
        pod("j-0", group="j", cpu="4", node_name="n6", phase="Running"),
        pod("j-1", group="j", cpu="4"),
    ]
    _, placed = allocate(objects)
    assert placed == {"j-1": "n7"}  # same rack s3, though n0..n5 are all free


def test_the_allocated_hypernode_annotation_brings_a_whole_new_gang_back() -> None:
    objects = [
        *topology_tree(),
        *gang("j", 2, HARD2, annotations={k.JOB_ALLOCATED_HYPERNODE_KEY: "s3"}),
    ]
    _, placed = allocate(objects)
    assert sorted(placed.values()) == ["n6", "n7"]


def test_an_anchored_job_grows_to_the_parent_when_its_rack_is_full() -> None:
    group = podgroup("j", 3, phase="Running")
    group["spec"]["networkTopology"] = HARD2
    objects = [
        *topology_tree(),
        group,
        pod("j-0", group="j", cpu="4", node_name="n6", phase="Running"),
        pod("j-1", group="j", cpu="4", node_name="n7", phase="Running"),
        pod("j-2", group="j", cpu="4"),
    ]
    _, placed = allocate(objects)
    assert placed["j-2"] in ("n4", "n5")  # spine s5, never s4


def test_jobs_without_topology_are_placed_as_before() -> None:
    objects = [*topology_tree(), *gang("j", 8, None)]
    _, with_plugin = allocate(objects)
    _, without = allocate(objects, PLAIN_CONF)
    assert with_plugin == without and len(with_plugin) == 8


# -- property: hard is never violated; a fitting HyperNode is always found ------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict], int, int, str]:
    rack_sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    spine_of = [draw(st.integers(0, 2)) for _ in rack_sizes]
    objects: list[dict] = []
    index = 0
    for r, size in enumerate(rack_sizes):
        names = []
        for _ in range(size):
            cpu = draw(st.sampled_from(["4", "4", "2"]))  # a 2-cpu node holds no member
            objects.append(node(f"n{index}", cpu=cpu))
            names.append(f"n{index}")
            index += 1
        objects.append(hypernode(f"rack{r}", 1, names))
    for s in set(spine_of):
        members = [f"rack{r}" for r, sp in enumerate(spine_of) if sp == s]
        objects.append(hypernode(f"spine{s}", 2, members, "HyperNode"))
    size = draw(st.integers(1, 6))
    tier = draw(st.integers(1, 3))
    mode = draw(st.sampled_from(["hard", "soft"]))
    return objects, size, tier, mode


@settings(max_examples=120, deadline=None)
@given(clusters())
def test_property_hard_never_crosses_its_tier_and_fitting_gangs_bind(
    case: tuple[list[dict], int, int, str],
) -> None:
    objects, size, tier, mode = case
    topology = {"mode": mode, "highestTierAllowed": tier}
    ssn, placed = allocate([*objects, *gang("j", size, topology)])
    hypernodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "HyperNode"}
    tree = build_tree(hypernodes, {n.name: n.labels for n in ssn.nodes.nodes})
    limit = min(tier, tree.root_tier) if mode == "hard" else tree.root_tier
    big = {n.name for n in ssn.nodes.nodes if n.allocatable.get("cpu") >= 4000}
    fitting = [
        info
        for info in tree.hypernodes.values()
        if info.tier <= limit and len(info.nodes & big) >= size
    ]
    if not fitting:
        assert placed == {}
        return
    assert len(placed) == size
    home = tree.lca(placed.values())
    assert home is not None and home.tier <= limit
    # The lowest tier that holds the gang is the one used.
    assert home.tier <= min(info.tier for info in fitting)

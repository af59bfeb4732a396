"""The bounded HyperNode search chooses what trying every HyperNode chooses.

``best_of`` is checked against an exhaustive oracle on random candidates; the whole allocate
action, bounded and exhaustive, is run on random small trees, gangs and busy nodes and must
bind, pipeline and refuse the same tasks on the same nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.plugins.network_topology import NetworkTopologyPlugin
from stromboli.core.scheduler.util.hypernode_search import (
    NEITHER,
    PIPELINED,
    READY,
    best_of,
    level_rows,
    prospects,
)
from stromboli.core.scheduler.util.hypernodes import session_tree

from ..builders import conf, make_session, node, pod, podgroup

TOPO_CONF = conf(
    "allocate", ["priority", "gang"], ["proportion", "binpack", "network-topology-aware"]
)
NO_GANG_CONF = conf("allocate", ["priority"], ["proportion", "network-topology-aware"])


# -- best_of against an exhaustive oracle --------------------------------------------------------


def exhaustive(outcomes: list[tuple[int, float]]) -> int | None:
    """Volcano's rule as allocate had it: every candidate tried in order, the first best wins."""
    best: tuple[int, float, int] | None = None
    for i, (rank, score) in enumerate(outcomes):
        if rank and (best is None or (rank, score) > best[:2]):
            best = (rank, score, i)
    return None if best is None else best[2]


@st.composite
def candidates(
    draw: st.DrawFn,
) -> tuple[list[tuple[int, float]], np.ndarray, np.ndarray, np.ndarray]:
    count = draw(st.integers(1, 12))
    outcomes = [
        (draw(st.sampled_from([NEITHER, PIPELINED, READY])), float(draw(st.integers(0, 6))))
        for _ in range(count)
    ]
    # A bound is at least the score (of a ready trial), sometimes well above it.
    bounds = np.array([s + draw(st.sampled_from([0, 0, 1, 3])) for _, s in outcomes], dtype=float)
    can_ready = np.array([r == READY or draw(st.booleans()) for r, _ in outcomes])
    can_place = np.array([r != NEITHER or draw(st.booleans()) for r, _ in outcomes])
    return outcomes, bounds, can_ready, can_place


@settings(max_examples=400, deadline=None)
@given(candidates())
def test_property_best_of_chooses_what_trying_every_candidate_chooses(
    case: tuple[list[tuple[int, float]], np.ndarray, np.ndarray, np.ndarray],
) -> None:
    outcomes, bounds, can_ready, can_place = case
    tried: list[int] = []

    def trial(i: int) -> tuple[int, float]:
        tried.append(i)
        return outcomes[i]

    assert best_of(bounds, can_ready, lambda: can_place, trial) == exhaustive(outcomes)
    assert len(tried) == len(set(tried))  # none tried twice


def test_equal_bounds_need_one_trial_when_the_first_is_ready() -> None:
    tried: list[int] = []

    def trial(i: int) -> tuple[int, float]:
        tried.append(i)
        return READY, 5.0

    everyone = np.ones(300, dtype=bool)
    assert best_of(np.full(300, 5.0), everyone, lambda: everyone, trial) == 0
    assert tried == [0]


def test_a_higher_bound_is_tried_first_and_a_lower_one_never() -> None:
    tried: list[int] = []
    outcomes = [(READY, 1.0), (READY, 4.0), (READY, 2.0)]

    def trial(i: int) -> tuple[int, float]:
        tried.append(i)
        return outcomes[i]

    everyone = np.ones(3, dtype=bool)
    assert best_of(np.array([1.0, 4.0, 2.0]), everyone, lambda: everyone, trial) == 1
    assert tried == [1]


def test_pipelined_only_are_all_tried_for_the_best() -> None:
    outcomes = [(PIPELINED, 1.0), (NEITHER, 0.0), (PIPELINED, 3.0)]
    never_ready = np.zeros(3, dtype=bool)
    chosen = best_of(
        np.full(3, 9.0), never_ready, lambda: np.ones(3, dtype=bool), lambda i: outcomes[i]
    )
    assert chosen == 2


# -- the plugin's bound ------------------------------------------------------------------------


def member(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def hypernode(name: str, tier: int, members: list[str], kind: str = "Node") -> dict:
    return {
        "apiVersion": k.TOPOLOGY_V1ALPHA1,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": [member(m, kind) for m in members]},
    }


def test_the_bound_is_the_score_of_a_placement_that_adds_the_whole_gang() -> None:
    objects: list[dict] = [node(f"n{i}", cpu="8", memory="16Gi") for i in range(4)]
    objects += [hypernode("r0", 1, ["n0", "n1"]), hypernode("r1", 1, ["n2", "n3"])]
    group = podgroup("j", 2, phase="Inqueue")
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    objects += [group, *[pod(f"j-{i}", group="j", cpu="2", memory="2Gi") for i in range(2)]]
    objects += [podgroup("busy", 1, phase="Running")]
    objects += [pod("busy-0", group="busy", cpu="4", node_name="n2", phase="Running")]
    ssn = make_session(objects, TOPO_CONF)
    plugin = ssn.plugins["network-topology-aware"]
    assert isinstance(plugin, NetworkTopologyPlugin)
    job = ssn.jobs["default/j"]
    tree = session_tree(ssn)
    level = level_rows(ssn, tree, ["r0", "r1"])
    assert level is not None
    waiting = list(job.tasks.values())
    known = prospects(ssn, job, level, waiting)
    assert known is not None
    # r0 after the gang: cpu 4/16, memory 4Gi/32Gi → (0.25 + 0.125) / 2 × 100 = 18.75;
    # r1 also holds busy's 4 cpu: (0.5 + 0.125) / 2 × 100 = 31.25.
    assert known.bounds == pytest.approx([18.75, 31.25])
    assert known.can_ready.tolist() == [True, True]


def test_a_hypernode_without_the_gangs_room_is_not_tried_first() -> None:
    objects: list[dict] = [node(f"n{i}", cpu="4") for i in range(4)]
    objects += [hypernode("r0", 1, ["n0", "n1"]), hypernode("r1", 1, ["n2", "n3"])]
    group = podgroup("j", 2, phase="Inqueue")
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    objects += [group, *[pod(f"j-{i}", group="j", cpu="3") for i in range(2)]]
    objects += [podgroup("busy", 1, phase="Running")]
    objects += [pod("busy-0", group="busy", cpu="4", node_name="n0", phase="Running")]
    ssn = make_session(objects, TOPO_CONF)
    job = ssn.jobs["default/j"]
    level = level_rows(ssn, session_tree(ssn), ["r0", "r1"])
    assert level is not None
    known = prospects(ssn, job, level, list(job.tasks.values()))
    assert known is not None
    assert known.can_ready.tolist() == [False, True]  # r0 has 4 of the 6 cpu the gang needs
    # One member fits n1, but gang would not call the job pipelined there either: not tried.
    assert known.can_place().tolist() == [False, True]


# -- the whole action, bounded and exhaustive ------------------------------------------------------


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[dict], list[str], list[str]]:
    """Nodes in racks (tier 1) under spines (tier 2), sometimes a zone (tier 3) above."""
    rack_sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    spine_of = [draw(st.integers(0, 2)) for _ in rack_sizes]
    objects: list[dict] = []
    names: list[str] = []
    for r, size in enumerate(rack_sizes):
        rack = []
        for _ in range(size):
            name = f"n{len(names)}"
            cpu = draw(st.sampled_from(["2", "4", "8"]))
            objects.append(node(name, cpu=cpu, memory=f"{draw(st.integers(4, 16))}Gi"))
            rack.append(name)
            names.append(name)
        objects.append(hypernode(f"rack{r}", 1, rack))
    spines = sorted(set(spine_of))
    for s in spines:
        racks = [f"rack{r}" for r, x in enumerate(spine_of) if x == s]
        objects.append(hypernode(f"spine{s}", 2, racks, "HyperNode"))
    hypernodes = [f"rack{r}" for r in range(len(rack_sizes))] + [f"spine{s}" for s in spines]
    if draw(st.booleans()):
        objects.append(hypernode("zone", 3, [f"spine{s}" for s in spines], "HyperNode"))
        hypernodes.append("zone")
    return objects, names, hypernodes


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict], str]:
    objects, names, _hypernodes = draw(trees())
    # Busy nodes: running pods, some leaving (their room is future idle: pipelining).
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
    for g in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 5))
        group = podgroup(f"g{g}", draw(st.integers(1, size)), phase="Inqueue")
        mode = draw(st.sampled_from(["hard", "soft"]))
        group["spec"]["networkTopology"] = {
            "mode": mode,
            "highestTierAllowed": draw(st.integers(1, 3)),
        }
        objects.append(group)
        cpu = draw(st.sampled_from(["1", "2", "3", "4"]))
        memory = f"{draw(st.integers(1, 4))}Gi"
        for i in range(size):
            objects.append(pod(f"g{g}-{i}", group=f"g{g}", cpu=cpu, memory=memory))
    return objects, draw(st.sampled_from([TOPO_CONF, NO_GANG_CONF]))


def outcome(objects: list[dict], config: str, exhaustive_search: bool) -> dict[str, Any]:
    AllocateAction.exhaustive_search = exhaustive_search
    try:
        ssn = make_session(objects, config)
        AllocateAction().execute(ssn)
    finally:
        AllocateAction.exhaustive_search = False
    tasks = {t.name: (t.status, t.node_name) for j in ssn.jobs.values() for t in j.tasks.values()}
    return {
        "binds": sorted((t.name, n) for t, n in ssn.outcome.binds),
        "tasks": tasks,
        "errors": {j.name: (j.job_fit_error, dict(j.fit_errors)) for j in ssn.jobs.values()},
        "annotations": ssn.outcome.podgroup_annotations,
    }


@settings(max_examples=250, deadline=None)
@given(scenarios())
def test_property_bounded_search_places_as_trying_every_hypernode(
    case: tuple[list[dict], str],
) -> None:
    objects, config = case
    assert outcome(objects, config, False) == outcome(objects, config, True)


# -- sums kept current -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 29), st.integers(-50, 50)), max_size=60),
    st.booleans(),
)
def test_property_kept_sums_equal_fresh_sums(
    sizes: list[int], changes: list[tuple[int, int]], with_spare: bool
) -> None:
    """Per-HyperNode sums updated from changed rows equal sums taken afresh, whatever rows
    change, in or outside the level, one look after each change or several changes apart."""
    from stromboli.core.scheduler.util.hypernode_search import LevelRows

    count = sum(sizes) + (3 if with_spare else 0)
    rows = np.arange(sum(sizes))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    level = LevelRows(tuple(f"h{i}" for i in range(len(sizes))), rows, starts, np.zeros(0))
    level.group = np.full(count, -1)
    level.group[rows] = np.repeat(np.arange(len(sizes)), sizes)
    array = np.zeros((count, 2))
    versions = np.zeros(count, dtype=np.int64)
    for step, (row, amount) in enumerate(changes):
        row %= count
        array[row, step % 2] += amount
        versions[row] += 1
        if step % 3 == 0:
            kept = level.current_sums("a", versions, lambda rows: np.maximum(array[rows], 0.0))
            assert np.array_equal(kept, level.sums(np.maximum(array, 0.0)))
    kept = level.current_sums("a", versions, lambda rows: np.maximum(array[rows], 0.0))
    assert np.array_equal(kept, level.sums(np.maximum(array, 0.0)))

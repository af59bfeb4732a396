"""The HyperNode tree: tiers, member selectors, the virtual root, bounded walks, and a job's
allowed domains."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.util.hypernodes import (
    ROOT,
    build_tree,
    gradients,
    job_anchor,
    job_topology,
)


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def regex(pattern: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"regexMatch": {"pattern": pattern}}}


def labels(match: dict[str, str], kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"labelMatch": {"matchLabels": match}}}


def hypernode(name: str, tier: int, *members: dict, tier_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": list(members)}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": k.TOPOLOGY_V1ALPHA1,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def by_name(*objects: dict) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects}


NODES = {f"node-{i}": {"rack": f"r{i // 2}"} for i in range(4)}
#: s0 (tier 1: node-0, node-1), s1 (tier 1: node-2, node-3), s2 (tier 2: s0, s1).
BASIC = by_name(
    hypernode("s0", 1, exact("node-0"), exact("node-1"), tier_name="rack"),
    hypernode("s1", 1, regex("node-[23]"), tier_name="rack"),
    hypernode("s2", 2, exact("s0", "HyperNode"), exact("s1", "HyperNode"), tier_name="spine"),
)


def job(topology: dict | None = None, annotations: dict[str, str] | None = None) -> JobInfo:
    spec: dict[str, Any] = {"minMember": 1}
    if topology is not None:
        spec["networkTopology"] = topology
    meta: dict[str, Any] = {"name": "pg", "namespace": "default"}
    if annotations:
        meta["annotations"] = annotations
    return JobInfo(
        "default/pg", "pg", "default", "default", 0, 1, {"metadata": meta, "spec": spec}, ""
    )


def test_tiers_members_and_the_virtual_root() -> None:
    tree = build_tree(BASIC, NODES)
    assert tree.hypernodes["s0"].nodes == {"node-0", "node-1"}
    assert tree.hypernodes["s1"].nodes == {"node-2", "node-3"}
    assert tree.hypernodes["s2"].nodes == set(NODES)
    assert tree.hypernodes["s0"].parent == "s2"
    assert tree.root.tier == 3 and tree.root.children == ["s2"]
    assert tree.tiers() == [1, 2, 3]
    assert tree.leaf_of == {"node-0": "s0", "node-1": "s0", "node-2": "s1", "node-3": "s1"}
    assert tree.tier_names == {"rack": 1, "spine": 2}
    assert not tree.problems


def test_no_hypernodes_means_a_tier_1_root_over_every_node() -> None:
    tree = build_tree({}, NODES)
    assert tree.root.tier == 1 and tree.root.nodes == set(NODES)
    assert set(tree.leaf_of.values()) == {ROOT}


def test_label_match_selects_nodes_by_labels() -> None:
    tree = build_tree(by_name(hypernode("r1", 1, labels({"rack": "r1"}))), NODES)
    assert tree.hypernodes["r1"].nodes == {"node-2", "node-3"}
    assert tree.leaf_of["node-0"] == ROOT  # in no HyperNode: directly under the root


def test_regex_match_is_a_search_and_hypernode_members_can_be_regex() -> None:
    tree = build_tree(
        by_name(
            hypernode("rack-a", 1, regex("0$")),
            hypernode("rack-b", 1, regex("1")),
            hypernode("spine", 2, regex("^rack-", "HyperNode")),
        ),
        NODES,
    )
    assert tree.hypernodes["rack-a"].nodes == {"node-0"}
    assert sorted(tree.hypernodes["spine"].children) == ["rack-a", "rack-b"]
    assert tree.hypernodes["spine"].nodes == {"node-0", "node-1"}


def test_bad_members_are_reported_not_raised() -> None:
    tree = build_tree(
        by_name(
            hypernode("bad-regex", 1, regex("([")),
            hypernode("label-hn", 2, labels({"a": "b"}, "HyperNode")),
            hypernode("no-selector", 1, {"type": "Node", "selector": {}}),
            hypernode("bad-tier", -1, exact("node-0")),
            {"metadata": {"name": "junk"}, "spec": {"tier": 1, "members": ["x", {"type": "Pod"}]}},
            hypernode("ghost", 1, exact("no-such-node")),
        ),
        NODES,
    )
    text = "\n".join(tree.problems)
    assert "bad-regex: spec.members[0]" in text and "does not compile" in text
    assert "labelMatch selects nodes only" in text
    assert "no exactMatch, regexMatch or labelMatch" in text
    assert "bad-tier: spec.tier -1" in text
    assert "junk: spec.members[0] is not an object" in text
    assert "neither Node nor HyperNode" in text
    assert "bad-tier" not in tree.hypernodes
    assert tree.hypernodes["ghost"].nodes == frozenset()
    assert tree.at_tier(1) == []  # empty HyperNodes are never offered


def test_a_stored_cycle_is_broken_and_reported() -> None:
    tree = build_tree(
        by_name(
            hypernode("a", 1, exact("b", "HyperNode"), exact("node-0")),
            hypernode("b", 1, exact("a", "HyperNode"), exact("node-1")),
            hypernode("self", 2, exact("self", "HyperNode")),
        ),
        NODES,
    )
    assert tree.hypernodes["a"].parent == ROOT and tree.hypernodes["b"].parent == ROOT
    assert tree.hypernodes["a"].nodes == {"node-0"}
    assert sum("not below" in p for p in tree.problems) == 3
    assert [i.name for i in tree.ancestors("a")] == ["a", ROOT]


def test_two_parents_keep_the_lowest_tier_one() -> None:
    tree = build_tree(
        by_name(
            hypernode("leaf", 1, exact("node-0")),
            hypernode("p3", 3, exact("leaf", "HyperNode")),
            hypernode("p2", 2, exact("leaf", "HyperNode")),
        ),
        NODES,
    )
    assert tree.hypernodes["leaf"].parent == "p2"
    assert any("kept under p2" in p for p in tree.problems)
    assert tree.hypernodes["p3"].nodes == frozenset()


def test_a_hypernode_named_like_the_root_is_ignored() -> None:
    tree = build_tree(by_name(hypernode(ROOT, 7, exact("node-0"))), NODES)
    assert tree.root.tier == 1 and any("virtual root" in p for p in tree.problems)


def test_lca_and_join() -> None:
    tree = build_tree(BASIC, NODES)
    lca = tree.lca(["node-0", "node-1"])
    assert lca is not None and lca.name == "s0"
    lca = tree.lca(["node-0", "node-3"])
    assert lca is not None and lca.name == "s2"
    assert tree.lca([]) is None
    assert tree.join("s0", "node-1") == "s0" and tree.join("s0", "node-2") == "s2"


# -- a job's constraint -------------------------------------------------------------------------


def test_hard_tier_and_tier_name_and_soft() -> None:
    tree = build_tree(BASIC, NODES)
    hard1 = job_topology(job({"mode": "hard", "highestTierAllowed": 1}), tree)
    assert hard1 is not None and hard1.hard and hard1.highest_tier == 1
    named = job_topology(job({"mode": "hard", "highestTierName": "spine"}), tree)
    assert named is not None and named.highest_tier == 2
    unknown = job_topology(job({"mode": "hard", "highestTierName": "zone"}), tree)
    assert unknown is not None and unknown.highest_tier == 3  # no constraint applied
    soft = job_topology(job({"mode": "soft", "highestTierAllowed": 1}), tree)
    assert soft is not None and not soft.hard and soft.highest_tier == 3
    assert job_topology(job(None), tree) is None
    default_mode = job_topology(job({"highestTierAllowed": 2}), tree)
    assert default_mode is not None and default_mode.hard


def test_gradients_go_tier_by_tier_and_stop_at_the_allowed_tier() -> None:
    tree = build_tree(BASIC, NODES)
    hard1 = job_topology(job({"mode": "hard", "highestTierAllowed": 1}), tree)
    assert hard1 is not None
    assert gradients(hard1, tree, None) == [["s0", "s1"]]
    hard2 = job_topology(job({"mode": "hard", "highestTierAllowed": 2}), tree)
    assert hard2 is not None
    assert gradients(hard2, tree, None) == [["s0", "s1"], ["s2"]]
    soft = job_topology(job({"mode": "soft"}), tree)
    assert soft is not None
    assert gradients(soft, tree, None) == [["s0", "s1"], ["s2"], [ROOT]]
    assert gradients(hard2, tree, "s1") == [["s1"], ["s2"]]


def test_anchor_from_the_allocated_hypernode_annotation() -> None:
    tree = build_tree(BASIC, NODES)
    placed = job({"mode": "hard"}, {k.JOB_ALLOCATED_HYPERNODE_KEY: "s1"})
    assert job_anchor(placed, tree) == "s1"
    assert job_anchor(job({"mode": "hard"}, {k.JOB_ALLOCATED_HYPERNODE_KEY: "gone"}), tree) is None
    assert job_anchor(job({"mode": "hard"}), tree) is None


# -- property: walks are bounded and node sets respect tiers ---------------------------------------


@st.composite
def random_hypernodes(draw: st.DrawFn) -> dict[str, dict]:
    count = draw(st.integers(0, 8))
    names = [f"h{i}" for i in range(count)]
    objects = []
    for name in names:
        members = draw(
            st.lists(
                st.one_of(
                    st.sampled_from(sorted(NODES)).map(exact),
                    st.sampled_from(names).map(lambda n: exact(n, "HyperNode")),
                    st.just(regex("^h", "HyperNode")),
                ),
                min_size=1,
                max_size=4,
            )
        )
        objects.append(hypernode(name, draw(st.integers(0, 4)), *members))
    return by_name(*objects)


@settings(max_examples=200, deadline=None)
@given(random_hypernodes())
def test_any_stored_tree_builds_and_children_lie_below_parents(objects: dict[str, dict]) -> None:
    tree = build_tree(objects, NODES)
    for info in tree.hypernodes.values():
        chain = tree.ancestors(info.name)
        assert chain[-1].name == ROOT and len(chain) <= len(tree.hypernodes)
        for child in info.children:
            assert tree.hypernodes[child].tier < info.tier
            assert tree.hypernodes[child].nodes <= info.nodes
    for node, leaf in tree.leaf_of.items():
        assert node in tree.hypernodes[leaf].nodes


def test_a_backtracking_pattern_selects_nothing_instead_of_stalling() -> None:
    # (a|a)+$ against a long run of a's backtracks exponentially: the match is time-bounded.
    nodes = {"a" * 60 + "b": {}, "node-0": {}}
    tree = build_tree(by_name(hypernode("evil", 1, regex("(a|a)+$"))), nodes)
    assert tree.hypernodes["evil"].nodes == frozenset()
    assert any("evil: spec.members[0]" in p and "took over" in p for p in tree.problems)

"""HyperNode discovery from node labels: the configuration read as Volcano's, HyperNodes
created per label value with tiers, members and nodeCount, updated when labels move, removed
when a value is gone, and never a HyperNode it does not own touched."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.hypernodes import (
    CONFIG_KEY,
    CONFIG_MAP_NAME,
    DiscoveryConfigError,
    HyperNodeDiscovery,
    LabelDiscovery,
    desired_hypernodes,
    hypernode_name,
    parse_config,
)
from stromboli.core.scheduler.util.hypernodes import build_tree

CONF = """\
networkTopologyDiscovery:
- source: ufm
  enabled: false
- source: label
  enabled: true
  interval: 10m
  config:
    networkTopologyTypes:
      fabric:
      - nodeLabel: example.dev/spine
      - nodeLabel: example.dev/rack
      - nodeLabel: kubernetes.io/hostname
"""
SPINE, RACK = "example.dev/spine", "example.dev/rack"


def labelled(name: str, spine: str | None, rack: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if spine:
        labels[SPINE] = spine
    if rack:
        labels[RACK] = rack
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def config_map(text: str = CONF) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP_NAME, "namespace": "volcano-system"},
        "data": {CONFIG_KEY: text},
    }


# -- configuration ---------------------------------------------------------------------------


def test_the_label_source_is_read_as_volcano_writes_it() -> None:
    found = parse_config(CONF, "cm")
    assert found == LabelDiscovery(
        {"fabric": (SPINE, RACK, "kubernetes.io/hostname")}, interval_seconds=600.0
    )
    assert parse_config("networkTopologyDiscovery: []", "cm") is None
    assert parse_config("", "cm") is None


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("networkTopologyDiscovery: 3", "networkTopologyDiscovery is not a list"),
        (
            "networkTopologyDiscovery: [{source: label, enabled: true, config: {}}]",
            "networkTopologyDiscovery[0].config.networkTopologyTypes",
        ),
        (
            "networkTopologyDiscovery: [{source: label, enabled: true, config: "
            "{networkTopologyTypes: {a: [{nodeLabel: x}]}}}]",
            "networkTopologyTypes.a",
        ),
        (
            "networkTopologyDiscovery: [{source: label, enabled: true, interval: soon, config: "
            "{networkTopologyTypes: {a: [{nodeLabel: x}, {nodeLabel: y}]}}}]",
            "interval",
        ),
        ("a: [" * 500, "cm"),
    ],
)
def test_a_broken_configuration_is_an_error_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(DiscoveryConfigError, match="cm") as err:
        parse_config(text, "cm")
    assert field in str(err.value)


# -- the desired tree ------------------------------------------------------------------------


def test_values_become_hypernodes_tier_by_tier() -> None:
    nodes = {
        "n0": {SPINE: "s1", RACK: "r1", "kubernetes.io/hostname": "n0"},
        "n1": {SPINE: "s1", RACK: "r1", "kubernetes.io/hostname": "n1"},
        "n2": {SPINE: "s1", RACK: "r2", "kubernetes.io/hostname": "n2"},
        "n3": {RACK: "r3", "kubernetes.io/hostname": "n3"},  # no spine: left out
    }
    found = desired_hypernodes(parse_config(CONF, "cm"), nodes)  # type: ignore[arg-type]
    rack1, rack2 = hypernode_name("fabric", 1, "r1"), hypernode_name("fabric", 1, "r2")
    spine = hypernode_name("fabric", 2, "s1")
    assert set(found) == {rack1, rack2, spine}
    assert found[rack1]["spec"]["tier"] == 1 and found[spine]["spec"]["tier"] == 2
    assert found[rack1]["spec"]["tierName"] == RACK
    assert found[spine]["status"]["nodeCount"] == 3 and found[rack1]["status"]["nodeCount"] == 2
    tree = build_tree(found, {n: labels for n, labels in nodes.items()})
    assert tree.problems == []
    assert tree.hypernodes[spine].nodes == frozenset({"n0", "n1", "n2"})
    assert tree.hypernodes[rack1].parent == spine


def test_names_are_dns_subdomains_and_never_collide() -> None:
    assert hypernode_name("fabric", 1, "r1") == "fabric-t1-r1"
    odd = {hypernode_name("fabric", 1, v) for v in ("R_1", "r-1", "R.1", "r_1")}
    assert len(odd) == 4
    assert all(len(n) <= 253 for n in odd)


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"n{i}" for i in range(12)]),
        st.tuples(st.sampled_from(["a", "b", "C_c"]), st.sampled_from(["x", "y", "z", "Z"])),
        max_size=12,
    )
)
def test_every_labelled_node_is_under_one_rack_and_one_spine(
    layout: dict[str, tuple[str, str]],
) -> None:
    nodes = {
        n: {SPINE: s, RACK: f"{s}-{r}", "kubernetes.io/hostname": n} for n, (s, r) in layout.items()
    }
    found = desired_hypernodes(parse_config(CONF, "cm"), nodes)  # type: ignore[arg-type]
    tree = build_tree(found, nodes)
    assert tree.problems == []
    for name, (spine, rack) in layout.items():
        leaf = tree.hypernodes[tree.leaf_of[name]]
        assert leaf.name == hypernode_name("fabric", 1, f"{spine}-{rack}")
        assert leaf.parent == hypernode_name("fabric", 2, spine)
    for info in found.values():
        assert info["status"]["nodeCount"] == len(tree.hypernodes[info["metadata"]["name"]].nodes)


# -- the controller on a store ---------------------------------------------------------------


async def hypernodes(store: MemoryStore) -> dict[str, dict]:
    items = (await store.list(k.TOPOLOGY_V1ALPHA1, "HyperNode")).items
    return {o["metadata"]["name"]: o for o in items}


async def test_discovery_creates_updates_and_removes_only_its_own() -> None:
    clock = VirtualClock(1000.0)
    store = MemoryStore(clock)
    await store.create(config_map())
    for name, spine, rack in [("n0", "s1", "r1"), ("n1", "s1", "r1"), ("n2", "s1", "r2")]:
        await store.create(labelled(name, spine, rack))
    manual = {
        "apiVersion": k.TOPOLOGY_V1ALPHA1,
        "kind": "HyperNode",
        "metadata": {"name": "by-hand"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}],
        },
    }
    await store.create(manual)
    controller = HyperNodeDiscovery(store, clock)
    await controller.step()
    found = await hypernodes(store)
    assert set(found) == {"by-hand", "fabric-t1-r1", "fabric-t1-r2", "fabric-t2-s1"}
    for name in ("fabric-t1-r1", "fabric-t1-r2", "fabric-t2-s1"):
        assert found[name]["metadata"]["labels"][k.NETWORK_TOPOLOGY_SOURCE_KEY] == "label"
    assert found["fabric-t2-s1"]["status"]["nodeCount"] == 3

    # n2 moves to rack r1: r2 is gone, r1 counts three nodes. A step without changes writes
    # nothing.
    node = await store.get("v1", "Node", "n2")
    node["metadata"]["labels"][RACK] = "r1"
    await store.update(node)
    await controller.step()
    found = await hypernodes(store)
    assert "fabric-t1-r2" not in found
    assert found["fabric-t1-r1"]["status"]["nodeCount"] == 3
    members = found["fabric-t1-r1"]["spec"]["members"]
    assert sorted(m["selector"]["exactMatch"]["name"] for m in members) == ["n0", "n1", "n2"]
    assert await controller.step() == 0

    # Someone deletes a discovered HyperNode: it comes back. The hand-written one is untouched.
    await store.delete(k.TOPOLOGY_V1ALPHA1, "HyperNode", "fabric-t2-s1")
    await controller.step()
    found = await hypernodes(store)
    assert "fabric-t2-s1" in found
    assert found["by-hand"]["spec"] == manual["spec"]
    assert k.NETWORK_TOPOLOGY_SOURCE_KEY not in (found["by-hand"]["metadata"].get("labels") or {})


async def test_an_unreadable_configuration_changes_nothing_stored() -> None:
    clock = VirtualClock(1000.0)
    store = MemoryStore(clock)
    cm = await store.create(config_map())
    await store.create(labelled("n0", "s1", "r1"))
    controller = HyperNodeDiscovery(store, clock)
    await controller.step()
    before = await hypernodes(store)
    assert len(before) == 2
    cm["data"][CONFIG_KEY] = "networkTopologyDiscovery: {broken"
    await store.update(cm)
    await store.delete("v1", "Node", "n0")
    clock.advance(120)
    await controller.step()
    assert set(await hypernodes(store)) == set(before)

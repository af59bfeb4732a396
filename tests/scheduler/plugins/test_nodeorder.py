"""The ``nodeorder`` plugin: kube score plugins times Volcano's weights."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from stromboli.core.scheduler.api.build import node_info_from, task_info_from
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.options import PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.snapshot import Snapshot
from stromboli.core.scheduler.plugins.nodeorder import WEIGHTS, NodeOrderPlugin

ZONE = "topology.kubernetes.io/zone"
MB = 1024 * 1024


def node(name: str, labels: dict | None = None, taints: list | None = None, **status: Any) -> dict:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, **status},
    }


def pod(
    name: str,
    labels: dict | None = None,
    on: str = "",
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    image: str = "busybox",
    **spec: Any,
) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": image, "resources": {"requests": requests}}],
        **spec,
    }
    if on:
        body["nodeName"] = on
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels or {}},
        "spec": body,
        "status": {"phase": "Running" if on else "Pending"},
    }


def only(**weights: int) -> dict[str, int]:
    """Arguments that zero every weight except the ones given (``least=1`` style names)."""
    names = {key.split(".")[0]: key for key in WEIGHTS}
    return {key: 0 for key in WEIGHTS} | {names[k]: v for k, v in weights.items()}


class Scores:
    def __init__(self, nodes: list[dict], placed: list[dict] = (), arguments: dict | None = None):  # type: ignore[assignment]
        table = NodeTable()
        for raw in nodes:
            table.add_node(node_info_from(raw))
        for raw in placed:
            task = task_info_from(raw, "placed")
            table.add_task(task.node_name, task)
        option = PluginOption("nodeorder", Arguments("nodeorder", arguments or {}))
        config = SchedulerConfig([], [[option]], {})
        self.ssn = Session(Snapshot({}, {}, table), config, datetime(2024, 1, 1, tzinfo=UTC))
        self.ssn.open()
        self.size = len(table)

    def task(self, raw: dict) -> TaskInfo:
        return task_info_from(raw, "job")

    def of(self, raw: dict, positions: list[int] | None = None) -> list[float]:
        where = np.arange(self.size) if positions is None else np.array(positions, dtype=np.intp)
        return self.ssn.node_scores(self.task(raw), where).tolist()


@pytest.fixture
def two() -> list[dict]:
    return [node("empty"), node("busy")]


BUSY = pod("load", on="busy", cpu="2", memory="4Gi")


def test_default_weights_are_volcanos() -> None:
    assert NodeOrderPlugin.known_arguments == {
        "leastrequested.weight": 1,
        "mostrequested.weight": 0,
        "nodeaffinity.weight": 2,
        "podaffinity.weight": 2,
        "balancedresource.weight": 1,
        "tainttoleration.weight": 3,
        "imagelocality.weight": 1,
        "podtopologyspread.weight": 2,
    }


def test_least_requested_prefers_the_emptier_node(two: list[dict]) -> None:
    scores = Scores(two, [BUSY], only(leastrequested=1))
    # empty: cpu 75, memory 87 → 81; busy: cpu 25, memory 37 → 31.
    assert scores.of(pod("p")) == [81.0, 31.0]


def test_least_requested_weight_multiplies(two: list[dict]) -> None:
    scores = Scores(two, [BUSY], only(leastrequested=3))
    assert scores.of(pod("p")) == [243.0, 93.0]


def test_least_requested_counts_a_pod_without_requests_as_kube_does(two: list[dict]) -> None:
    scores = Scores(two, [], only(leastrequested=1))
    # 100m of 4 cpus → 97; 200Mi of 8Gi → 97.
    assert scores.of(pod("p", cpu=None, memory=None)) == [97.0, 97.0]


def test_overflowing_resource_scores_zero_for_least_requested(two: list[dict]) -> None:
    scores = Scores(two, [BUSY], only(leastrequested=1))
    # busy: cpu 2+3 > 4 → 0, memory (8-5)/8 → 37; mean 18.
    assert scores.of(pod("p", cpu="3")) == [56.0, 18.0]


def test_most_requested_prefers_the_fuller_node(two: list[dict]) -> None:
    scores = Scores(two, [BUSY], only(mostrequested=1))
    # empty: cpu 25, memory 12 → 18; busy: cpu 75, memory 62 → 68.
    assert scores.of(pod("p")) == [18.0, 68.0]


def test_balanced_allocation(two: list[dict]) -> None:
    scores = Scores(
        two, [pod("cpu-heavy", on="busy", cpu="3", memory="0")], only(balancedresource=1)
    )
    # empty: fractions 0.25/0.125 → 93; busy: 1.0/0.125 → std 0.4375 → 56.
    assert scores.of(pod("p")) == [93.0, 56.0]


def test_balanced_allocation_caps_fractions_at_one(two: list[dict]) -> None:
    scores = Scores(
        two, [pod("cpu-heavy", on="busy", cpu="3", memory="0")], only(balancedresource=1)
    )
    # busy: cpu (3+2)/4 counts as 1.0, memory 1/8 → std 0.4375 → 56.
    assert scores.of(pod("p", cpu="2")) == [81.0, 56.0]


def test_preferred_node_affinity_adds_weights_times_plugin_weight() -> None:
    nodes = [node("a", {"zone": "east", "disk": "ssd"}), node("b", {"zone": "east"}), node("c")]
    preferred = [
        {"weight": 10, "preference": {"matchExpressions": [_expr("zone", "In", "east")]}},
        {"weight": 5, "preference": {"matchExpressions": [_expr("disk", "Exists")]}},
    ]
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    scores = Scores(nodes, [], only(nodeaffinity=2))
    assert scores.of(pod("p", affinity=affinity)) == [30.0, 20.0, 0.0]


def test_taint_toleration_prefers_fewer_intolerable_soft_taints() -> None:
    soft = {"effect": "PreferNoSchedule"}
    nodes = [
        node("clean"),
        node("one", taints=[{"key": "a", **soft}]),
        node("two", taints=[{"key": "a", **soft}, {"key": "b", **soft}]),
        node("hard", taints=[{"key": "c", "effect": "NoSchedule"}]),
    ]
    scores = Scores(nodes, [], only(tainttoleration=3))
    assert scores.of(pod("p")) == [300.0, 150.0, 0.0, 300.0]
    tolerant = pod("q", tolerations=[{"key": "a", "operator": "Exists"}])
    assert scores.of(tolerant) == [300.0, 300.0, 0.0, 300.0]
    # A toleration limited to another effect does not help.
    hard_only = pod("r", tolerations=[{"key": "a", "operator": "Exists", "effect": "NoSchedule"}])
    assert scores.of(hard_only) == [300.0, 150.0, 0.0, 300.0]


def test_taint_toleration_normalises_over_candidates_only() -> None:
    soft = {"effect": "PreferNoSchedule"}
    nodes = [node("one", taints=[{"key": "a", **soft}]), node("clean")]
    scores = Scores(nodes, [], only(tainttoleration=1))
    assert scores.of(pod("p"), [0]) == [0.0]


# -- inter-pod affinity score ----------------------------------------------------------------------


@pytest.fixture
def zones() -> list[dict]:
    return [node("a1", {ZONE: "a"}), node("a2", {ZONE: "a"}), node("b1", {ZONE: "b"})]


def _term(labels: dict, key: str = ZONE) -> dict:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def _expr(key: str, operator: str, *values: str) -> dict:
    return {"key": key, "operator": operator, "values": list(values)}


def test_preferred_pod_affinity_favours_the_domain_of_matching_pods(zones: list[dict]) -> None:
    scores = Scores(zones, [pod("db", {"app": "db"}, on="a1")], only(podaffinity=2))
    preferred = [{"weight": 50, "podAffinityTerm": _term({"app": "db"})}]
    affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    assert scores.of(pod("p", affinity=affinity)) == [200.0, 200.0, 0.0]


def test_preferred_pod_anti_affinity_avoids_the_domain(zones: list[dict]) -> None:
    scores = Scores(zones, [pod("db", {"app": "db"}, on="a1")], only(podaffinity=1))
    preferred = [{"weight": 50, "podAffinityTerm": _term({"app": "db"})}]
    affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    assert scores.of(pod("p", affinity=affinity)) == [0.0, 0.0, 100.0]


def test_existing_pods_terms_score_the_incoming_pod(zones: list[dict]) -> None:
    preferred = [{"weight": 30, "podAffinityTerm": _term({"app": "p"})}]
    fan = pod(
        "fan",
        {"app": "fan"},
        on="b1",
        affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}},
    )
    scores = Scores(zones, [fan], only(podaffinity=1))
    assert scores.of(pod("p", {"app": "p"})) == [0.0, 0.0, 100.0]
    assert scores.of(pod("q", {"app": "q"})) == [0.0, 0.0, 0.0]


def test_existing_pods_required_affinity_counts_with_weight_one(zones: list[dict]) -> None:
    required = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "p"})]}
    }
    preferred = [{"weight": 2, "podAffinityTerm": _term({"app": "p"})}]
    anti = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    placed = [
        pod("needs-p", {"app": "x"}, on="a1", affinity=required),
        pod("avoids-p", {"app": "y"}, on="b1", affinity=anti),
    ]
    scores = Scores([*zones, node("c1", {ZONE: "c"})], placed, only(podaffinity=1))
    # raw: zone a +1, zone b −2, zone c 0 → (raw + 2) / 3 × 100.
    assert scores.of(pod("p", {"app": "p"})) == [100.0, 100.0, 0.0, 66.0]


def test_no_affinity_anywhere_scores_zero(zones: list[dict]) -> None:
    scores = Scores(zones, [pod("x", on="a1")], only(podaffinity=2))
    assert scores.of(pod("p")) == [0.0, 0.0, 0.0]


# -- topology spread score -------------------------------------------------------------------------


def test_soft_spread_prefers_the_emptier_domain(zones: list[dict]) -> None:
    placed = [pod("s0", {"app": "s"}, on="a1"), pod("s1", {"app": "s"}, on="a2")]
    scores = Scores([*zones, node("bare")], placed, only(podtopologyspread=2))
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
    # Nodes lacking the key are ignored (0); zone a holds both pods.
    assert scores.of(pod("p", {"app": "s"}, topologySpreadConstraints=[constraint])) == [
        0.0,
        0.0,
        200.0,
        0.0,
    ]


def test_soft_spread_normalises_between_lowest_and_highest(zones: list[dict]) -> None:
    placed = [pod(f"s{i}", {"app": "s"}, on=n) for i, n in enumerate(["a1", "a2", "a1", "b1"])]
    scores = Scores(zones, placed, only(podtopologyspread=1))
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
    # raw: zone a 3·ln 4 → 4, zone b 1·ln 4 → 1; score 100·(4 + 1 − raw)/4.
    assert scores.of(pod("p", {"app": "s"}, topologySpreadConstraints=[constraint])) == [
        25.0,
        25.0,
        100.0,
    ]


def test_hard_spread_constraints_do_not_score(zones: list[dict]) -> None:
    placed = [pod("s0", {"app": "s"}, on="a1")]
    scores = Scores(zones, placed, only(podtopologyspread=2))
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
    assert scores.of(pod("p", {"app": "s"}, topologySpreadConstraints=[constraint])) == [0.0] * 3


# -- image locality ------------------------------------------------------------------------------


def test_image_locality_prefers_nodes_holding_the_image() -> None:
    images = [{"names": ["registry/big:1"], "sizeBytes": 500 * MB}]
    scores = Scores([node("has", images=images), node("lacks")], [], only(imagelocality=1))
    # 500 MB spread over 1 of 2 nodes = 250 MB; (250 - 23) / (1000 - 23) → 23.
    assert scores.of(pod("p", image="registry/big:1")) == [23.0, 0.0]
    assert scores.of(pod("q", image="registry/other:1")) == [0.0, 0.0]


def test_image_without_tag_means_latest() -> None:
    images = [{"names": ["registry/big:latest"], "sizeBytes": 2000 * MB}]
    scores = Scores([node("has", images=images)], [], only(imagelocality=1))
    assert scores.of(pod("p", image="registry/big")) == [100.0]


# -- registration and totals -----------------------------------------------------------------------


def test_all_weights_zero_registers_nothing(two: list[dict]) -> None:
    scores = Scores(two, [], only())
    assert not scores.ssn.has_scorers()


def test_default_total_adds_the_weighted_scores(two: list[dict]) -> None:
    scores = Scores(two, [BUSY])
    # least 81/31, balanced 93/93, taint 3×100, image 0.
    assert scores.of(pod("p")) == [81 + 93 + 300, 31 + 93 + 300]


def test_scores_follow_positions(two: list[dict]) -> None:
    scores = Scores(two, [BUSY], only(leastrequested=1))
    assert scores.of(pod("p"), [1, 0, 1]) == [31.0, 81.0, 31.0]
    assert scores.of(pod("p"), []) == []

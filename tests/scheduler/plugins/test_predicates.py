"""The ``predicates`` plugin: each kube-scheduler filter on small clusters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from stromboli.core.scheduler.api.build import node_info_from, task_info_from
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.options import PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.snapshot import Snapshot
from stromboli.core.scheduler.plugins.predicates import PredicatesPlugin

AFFINITY = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE = "node(s) were unschedulable"
PORTS = "node(s) didn't have free ports for the requested pod ports"
POD_COUNT = "node(s) pod number exceeded"
POD_AFFINITY = "node(s) didn't match pod affinity rules"
POD_ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


# -- fixtures ------------------------------------------------------------------------------------


def node(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict] | None = None,
    unschedulable: bool = False,
    pods: str = "110",
) -> dict:
    return {
        "metadata": {"name": name, "labels": {HOST: name, **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": pods}},
    }


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    on: str = "",
    ports: list[dict] | None = None,
    **spec: Any,
) -> dict:
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    if ports:
        container["ports"] = ports
    body: dict[str, Any] = {"containers": [container], **spec}
    status = {"phase": "Pending"}
    if on:
        body["nodeName"] = on
        status = {"phase": "Running"}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{namespace}-{name}",
            "labels": labels or {},
        },
        "spec": body,
        "status": status,
    }


class World:
    """Nodes, pods already running on them, and an open session with the plugin."""

    def __init__(
        self,
        nodes: list[dict],
        placed: list[dict] = (),  # type: ignore[assignment]
        arguments: dict[str, Any] | None = None,
    ) -> None:
        table = NodeTable()
        for raw in nodes:
            table.add_node(node_info_from(raw))
        self.jobs: dict[str, JobInfo] = {}
        for raw in placed:
            task = self._task(raw)
            table.add_task(task.node_name, task)
        option = PluginOption("predicates", Arguments("predicates", arguments or {}))
        config = SchedulerConfig([], [[option]], {})
        self.ssn = Session(Snapshot(self.jobs, {}, table), config, datetime(2024, 1, 1, tzinfo=UTC))
        self.ssn.open()
        self.plugin: PredicatesPlugin = self.ssn.plugins["predicates"]  # type: ignore[assignment]
        self.names = [n.name for n in table.nodes]

    def _task(self, raw: dict) -> TaskInfo:
        uid = raw["metadata"]["uid"]
        task = task_info_from(raw, uid)
        job = JobInfo(uid, uid, task.namespace, "default", 0, 1, {}, "")
        job.add_task(task)
        self.jobs[uid] = job
        return task

    def filter(self, raw: dict) -> Filter:
        task = self._task(raw)
        assert self.ssn.pre_predicate(task) is None
        return self.ssn.predicate(task)

    def passing(self, raw: dict) -> list[str]:
        passed = self.filter(raw).passed
        return [name for name, ok in zip(self.names, passed, strict=True) if ok]

    def reasons(self, raw: dict) -> dict[str, str]:
        """Failed node → its (single) reason."""
        out: dict[str, str] = {}
        for mask, reason, _ in self.filter(raw).reasons:
            for name, failed in zip(self.names, mask, strict=True):
                if failed:
                    assert name not in out, f"{name} has two reasons"
                    out[name] = reason
        return out

    def allocate(self, raw: dict, node_name: str) -> TaskInfo:
        task = self._task(raw)
        statement = self.ssn.statement()
        statement.allocate(task, node_name)
        return task


def required_node_affinity(*terms: dict) -> dict:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> dict:
    return {"key": key, "operator": operator, "values": list(values)}


def pod_term(labels: dict[str, str], key: str = HOST, **extra: Any) -> dict:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def required(kind: str, *terms: dict) -> dict:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


# -- node unschedulable ------------------------------------------------------------------------


def test_cordoned_node_is_filtered_with_volcano_reason() -> None:
    world = World([node("a"), node("b", unschedulable=True)])
    assert world.reasons(pod("p")) == {"b": UNSCHEDULABLE}


def test_unschedulable_taint_toleration_admits_cordoned_node() -> None:
    world = World([node("a"), node("b", unschedulable=True)])
    toleration = {
        "key": "node.kubernetes.io/unschedulable",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    assert world.passing(pod("p", tolerations=[toleration])) == ["a", "b"]


def test_tolerate_everything_admits_cordoned_node() -> None:
    world = World([node("b", unschedulable=True)])
    assert world.passing(pod("p", tolerations=[{"operator": "Exists"}])) == ["b"]


def test_unschedulable_failure_is_unresolvable() -> None:
    world = World([node("b", unschedulable=True)])
    ((_, _, unresolvable),) = world.filter(pod("p")).reasons
    assert unresolvable


# -- node selector and node affinity -----------------------------------------------------------


@pytest.fixture
def zoned() -> World:
    return World(
        [
            node("a", {"zone": "east", "gpu": "2", "disk": "ssd"}),
            node("b", {"zone": "west", "gpu": "8"}),
            node("c", {"zone": "north", "gpu": "many"}),
            node("d", {}),
        ]
    )


def test_node_selector_requires_every_pair(zoned: World) -> None:
    assert zoned.passing(pod("p", nodeSelector={"zone": "east"})) == ["a"]
    assert zoned.passing(pod("q", nodeSelector={"zone": "east", "disk": "hdd"})) == []
    reasons = zoned.reasons(pod("r", nodeSelector={"zone": "west"}))
    assert reasons == {"a": AFFINITY, "c": AFFINITY, "d": AFFINITY}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (expr("zone", "In", "east", "west"), ["a", "b"]),
        (expr("zone", "NotIn", "east"), ["b", "c", "d"]),
        (expr("disk", "Exists"), ["a"]),
        (expr("disk", "DoesNotExist"), ["b", "c", "d"]),
        (expr("gpu", "Gt", "4"), ["b"]),
        (expr("gpu", "Lt", "4"), ["a"]),
        (expr("gpu", "Gt", "x"), []),
        (expr("zone", "Bogus", "east"), []),
    ],
)
def test_node_affinity_operators(zoned: World, expression: dict, expected: list[str]) -> None:
    affinity = required_node_affinity({"matchExpressions": [expression]})
    assert zoned.passing(pod("p", affinity=affinity)) == expected


def test_node_affinity_terms_are_ored_and_expressions_anded(zoned: World) -> None:
    affinity = required_node_affinity(
        {"matchExpressions": [expr("zone", "In", "east", "west"), expr("gpu", "Gt", "4")]},
        {"matchExpressions": [expr("zone", "In", "north")]},
    )
    assert zoned.passing(pod("p", affinity=affinity)) == ["b", "c"]


def test_node_affinity_match_fields_on_name(zoned: World) -> None:
    field = {"key": "metadata.name", "operator": "In", "values": ["c", "d"]}
    affinity = required_node_affinity({"matchFields": [field]})
    assert zoned.passing(pod("p", affinity=affinity)) == ["c", "d"]
    field = {"key": "metadata.name", "operator": "NotIn", "values": ["c"]}
    affinity = required_node_affinity({"matchFields": [field]})
    assert zoned.passing(pod("q", affinity=affinity)) == ["a", "b", "d"]


def test_empty_node_selector_term_matches_nothing(zoned: World) -> None:
    affinity = required_node_affinity({})
    assert zoned.passing(pod("p", affinity=affinity)) == []


def test_node_selector_and_affinity_both_apply(zoned: World) -> None:
    affinity = required_node_affinity({"matchExpressions": [expr("gpu", "Exists")]})
    assert zoned.passing(pod("p", affinity=affinity, nodeSelector={"zone": "west"})) == ["b"]


def test_preferred_node_affinity_does_not_filter(zoned: World) -> None:
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [expr("zone", "In", "east")]}}
            ]
        }
    }
    assert zoned.passing(pod("p", affinity=affinity)) == ["a", "b", "c", "d"]


# -- taints and tolerations --------------------------------------------------------------------


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict:
    return {"key": key, "value": value, "effect": effect}


@pytest.fixture
def tainted() -> World:
    return World(
        [
            node("plain"),
            node("gpu", taints=[taint("gpu", "true")]),
            node("drain", taints=[taint("drain", "", "NoExecute")]),
            node("soft", taints=[taint("spot", "yes", "PreferNoSchedule")]),
        ]
    )


def test_no_schedule_and_no_execute_taints_block_with_kube_reason(tainted: World) -> None:
    assert tainted.reasons(pod("p")) == {
        "gpu": "node(s) had untolerated taint {gpu: true}",
        "drain": "node(s) had untolerated taint {drain: }",
    }


def test_taint_failures_are_unresolvable(tainted: World) -> None:
    assert all(unresolvable for _, _, unresolvable in tainted.filter(pod("p")).reasons)


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "gpu", "operator": "Equal", "value": "true"}, ["plain", "gpu", "soft"]),
        ({"key": "gpu", "value": "true"}, ["plain", "gpu", "soft"]),
        ({"key": "gpu", "operator": "Equal", "value": "false"}, ["plain", "soft"]),
        ({"key": "gpu", "operator": "Exists"}, ["plain", "gpu", "soft"]),
        ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, ["plain", "soft"]),
        ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, ["plain", "gpu", "soft"]),
        ({"operator": "Exists"}, ["plain", "gpu", "drain", "soft"]),
        ({"operator": "Exists", "effect": "NoExecute"}, ["plain", "drain", "soft"]),
    ],
)
def test_tolerations(tainted: World, toleration: dict, expected: list[str]) -> None:
    assert tainted.passing(pod("p", tolerations=[toleration])) == expected


def test_first_untolerated_taint_is_reported() -> None:
    world = World([node("n", taints=[taint("a", "1"), taint("b", "2")])])
    toleration = {"key": "a", "operator": "Exists"}
    assert world.reasons(pod("p", tolerations=[toleration])) == {
        "n": "node(s) had untolerated taint {b: 2}"
    }
    assert world.reasons(pod("q")) == {"n": "node(s) had untolerated taint {a: 1}"}


# -- host ports --------------------------------------------------------------------------------


def port(number: int, protocol: str = "TCP", ip: str = "") -> dict:
    entry: dict[str, Any] = {"containerPort": number, "hostPort": number, "protocol": protocol}
    if ip:
        entry["hostIP"] = ip
    return entry


@pytest.fixture
def ported() -> World:
    return World(
        [node("a"), node("b"), node("c")],
        placed=[
            pod("web", on="a", ports=[port(80)]),
            pod("dns", on="b", ports=[port(53, "UDP", "10.0.0.2")]),
        ],
    )


def test_host_port_in_use_conflicts(ported: World) -> None:
    assert ported.reasons(pod("p", ports=[port(80)])) == {"a": PORTS}


def test_host_port_other_protocol_does_not_conflict(ported: World) -> None:
    assert ported.passing(pod("p", ports=[port(80, "UDP")])) == ["a", "b", "c"]


def test_host_port_specific_ips(ported: World) -> None:
    assert ported.passing(pod("p", ports=[port(53, "UDP", "10.0.0.3")])) == ["a", "b", "c"]
    assert ported.passing(pod("q", ports=[port(53, "UDP", "10.0.0.2")])) == ["a", "c"]
    # 0.0.0.0 overlaps every address, in both directions.
    assert ported.passing(pod("r", ports=[port(53, "UDP")])) == ["a", "c"]
    assert ported.passing(pod("s", ports=[port(80, "TCP", "10.0.0.9")])) == ["b", "c"]


def test_host_port_taken_within_the_session(ported: World) -> None:
    ported.allocate(pod("first", ports=[port(8080)]), "c")
    assert ported.passing(pod("second", ports=[port(8080)])) == ["a", "b"]


def test_host_port_freed_when_allocation_is_discarded(ported: World) -> None:
    task = ported._task(pod("first", ports=[port(8080)]))
    statement = ported.ssn.statement()
    ported.passing(pod("warm", ports=[port(8080)]))  # build the views before the change
    statement.allocate(task, "c")
    assert ported.passing(pod("second", ports=[port(8080)])) == ["a", "b"]
    statement.discard()
    assert ported.passing(pod("third", ports=[port(8080)])) == ["a", "b", "c"]


def test_host_port_conflict_is_resolvable(ported: World) -> None:
    ((_, reason, unresolvable),) = ported.filter(pod("p", ports=[port(80)])).reasons
    assert reason == PORTS
    assert not unresolvable


# -- pod count ---------------------------------------------------------------------------------


def test_full_node_fails_pod_count() -> None:
    world = World(
        [node("small", pods="2"), node("big")],
        placed=[pod("x", on="small"), pod("y", on="small")],
    )
    assert world.reasons(pod("p")) == {"small": POD_COUNT}


def test_pod_count_counts_pods_placed_in_the_session() -> None:
    world = World([node("small", pods="2"), node("big")], placed=[pod("x", on="small")])
    assert world.passing(pod("p")) == ["small", "big"]
    world.allocate(pod("q"), "small")
    assert world.reasons(pod("r")) == {"small": POD_COUNT}


def test_pod_count_is_checked_before_other_filters() -> None:
    world = World([node("small", pods="1", unschedulable=True)], placed=[pod("x", on="small")])
    assert world.reasons(pod("p")) == {"small": POD_COUNT}


# -- inter-pod affinity ------------------------------------------------------------------------


@pytest.fixture
def zones() -> World:
    """Two zones of two nodes; a db pod on a1, a web pod on b1 (namespace other)."""
    return World(
        [
            node("a1", {ZONE: "a"}),
            node("a2", {ZONE: "a"}),
            node("b1", {ZONE: "b"}),
            node("b2", {ZONE: "b"}),
            node("bare"),
        ],
        placed=[
            pod("db", {"app": "db"}, on="a1"),
            pod("web", {"app": "web"}, namespace="other", on="b1"),
        ],
    )


def test_required_affinity_to_zone_of_matching_pod(zones: World) -> None:
    affinity = required("podAffinity", pod_term({"app": "db"}, ZONE))
    assert zones.reasons(pod("p", affinity=affinity)) == {
        "b1": POD_AFFINITY,
        "b2": POD_AFFINITY,
        "bare": POD_AFFINITY,
    }


def test_required_affinity_on_hostname(zones: World) -> None:
    affinity = required("podAffinity", pod_term({"app": "db"}))
    assert zones.passing(pod("p", affinity=affinity)) == ["a1"]


def test_affinity_terms_only_see_their_namespaces(zones: World) -> None:
    affinity = required("podAffinity", pod_term({"app": "web"}, ZONE))
    assert zones.passing(pod("p", affinity=affinity)) == []
    listed = required("podAffinity", pod_term({"app": "web"}, ZONE, namespaces=["other"]))
    assert zones.passing(pod("q", affinity=listed)) == ["b1", "b2"]
    everywhere = required("podAffinity", pod_term({"app": "web"}, ZONE, namespaceSelector={}))
    assert zones.passing(pod("r", affinity=everywhere)) == ["b1", "b2"]


def test_first_pod_of_self_affine_group_goes_where_the_topology_exists(zones: World) -> None:
    affinity = required("podAffinity", pod_term({"app": "cache"}, ZONE))
    first = pod("c0", {"app": "cache"}, affinity=affinity)
    assert zones.passing(first) == ["a1", "a2", "b1", "b2"]
    # Without matching itself, the pod has nowhere to go.
    assert zones.passing(pod("x", {"app": "other"}, affinity=affinity)) == []


def test_self_affine_group_follows_its_first_pod(zones: World) -> None:
    affinity = required("podAffinity", pod_term({"app": "cache"}, ZONE))
    zones.allocate(pod("c0", {"app": "cache"}, affinity=affinity), "b2")
    assert zones.passing(pod("c1", {"app": "cache"}, affinity=affinity)) == ["b1", "b2"]


def test_affinity_failure_is_unresolvable(zones: World) -> None:
    affinity = required("podAffinity", pod_term({"app": "db"}))
    result = zones.filter(pod("p", affinity=affinity))
    assert all(u for _, r, u in result.reasons if r == POD_AFFINITY)


def test_required_anti_affinity_keeps_out_of_the_domain(zones: World) -> None:
    affinity = required("podAntiAffinity", pod_term({"app": "db"}, ZONE))
    assert zones.reasons(pod("p", affinity=affinity)) == {"a1": POD_ANTI, "a2": POD_ANTI}
    on_host = required("podAntiAffinity", pod_term({"app": "db"}))
    assert zones.reasons(pod("q", affinity=on_host)) == {"a1": POD_ANTI}


def test_existing_pods_anti_affinity_rejects_matching_pod() -> None:
    guard = pod(
        "guard",
        {"app": "guard"},
        on="a1",
        affinity=required("podAntiAffinity", pod_term({"app": "noisy"}, ZONE)),
    )
    world = World(
        [node("a1", {ZONE: "a"}), node("a2", {ZONE: "a"}), node("b1", {ZONE: "b"})], [guard]
    )
    assert world.reasons(pod("n", {"app": "noisy"})) == {"a1": EXISTING_ANTI, "a2": EXISTING_ANTI}
    assert world.passing(pod("q", {"app": "quiet"})) == ["a1", "a2", "b1"]
    # Another namespace is not covered by the guard's term.
    assert world.passing(pod("m", {"app": "noisy"}, namespace="other")) == ["a1", "a2", "b1"]


def test_self_anti_affinity_spreads_pods_one_per_node() -> None:
    world = World([node("a"), node("b"), node("c")])
    affinity = required("podAntiAffinity", pod_term({"app": "solo"}))
    world.allocate(pod("s0", {"app": "solo"}, affinity=affinity), "a")
    assert world.passing(pod("s1", {"app": "solo"}, affinity=affinity)) == ["b", "c"]
    world.allocate(pod("s2", {"app": "solo"}, affinity=affinity), "b")
    assert world.reasons(pod("s3", {"app": "solo"}, affinity=affinity)) == {
        "a": EXISTING_ANTI,
        "b": EXISTING_ANTI,
    }


def test_evicted_pod_no_longer_repels() -> None:
    guard = pod(
        "guard",
        {"app": "guard"},
        on="a",
        affinity=required("podAntiAffinity", pod_term({"app": "noisy"})),
    )
    world = World([node("a"), node("b")], [guard])
    assert world.passing(pod("n0", {"app": "noisy"})) == ["b"]
    statement = world.ssn.statement()
    statement.evict(world.jobs["default-guard"].tasks["default-guard"], "preempted")
    assert world.passing(pod("n1", {"app": "noisy"})) == ["a", "b"]
    statement.discard()
    assert world.passing(pod("n2", {"app": "noisy"})) == ["b"]


def test_eviction_before_first_predicate_is_remembered() -> None:
    guard = pod(
        "guard",
        {"app": "guard"},
        on="a",
        affinity=required("podAntiAffinity", pod_term({"app": "noisy"})),
    )
    world = World([node("a"), node("b")], [guard])
    statement = world.ssn.statement()
    statement.evict(world.jobs["default-guard"].tasks["default-guard"], "preempted")
    assert world.passing(pod("n1", {"app": "noisy"})) == ["a", "b"]


def test_match_label_keys_narrow_affinity_to_same_value() -> None:
    world = World(
        [node("a"), node("b")],
        placed=[
            pod("x", {"app": "w", "rev": "1"}, on="a"),
            pod("y", {"app": "w", "rev": "2"}, on="b"),
        ],
    )
    term = pod_term({"app": "w"}, matchLabelKeys=["rev"])
    affinity = required("podAntiAffinity", term)
    assert world.passing(pod("p", {"app": "w", "rev": "2"}, affinity=affinity)) == ["a"]


# -- topology spread ---------------------------------------------------------------------------


def spread(key: str = ZONE, skew: int = 1, hard: bool = True, **extra: Any) -> dict:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "s"}},
        **extra,
    }


@pytest.fixture
def spreading() -> World:
    """Zone a holds two app=s pods, zone b none; node 'bare' has no zone."""
    return World(
        [
            node("a1", {ZONE: "a", "pool": "x"}),
            node("a2", {ZONE: "a", "pool": "x"}),
            node("b1", {ZONE: "b", "pool": "y"}),
            node("bare"),
        ],
        placed=[pod("s0", {"app": "s"}, on="a1"), pod("s1", {"app": "s"}, on="a2")],
    )


def test_spread_filters_the_crowded_domain(spreading: World) -> None:
    constraint = spread()
    assert spreading.reasons(pod("p", {"app": "s"}, topologySpreadConstraints=[constraint])) == {
        "a1": SPREAD,
        "a2": SPREAD,
        "bare": SPREAD_LABEL,
    }


def test_spread_max_skew_allows_some_imbalance(spreading: World) -> None:
    constraints = [spread(skew=3)]
    assert spreading.passing(pod("p", {"app": "s"}, topologySpreadConstraints=constraints)) == [
        "a1",
        "a2",
        "b1",
    ]


def test_spread_pod_not_matching_itself_adds_nothing(spreading: World) -> None:
    constraints = [spread(skew=2)]
    assert spreading.passing(pod("p", {"app": "t"}, topologySpreadConstraints=constraints)) == [
        "a1",
        "a2",
        "b1",
    ]
    assert spreading.passing(pod("q", {"app": "s"}, topologySpreadConstraints=constraints)) == [
        "b1"
    ]


def test_spread_schedule_anyway_does_not_filter(spreading: World) -> None:
    constraints = [spread(hard=False)]
    assert spreading.passing(pod("p", {"app": "s"}, topologySpreadConstraints=constraints)) == [
        "a1",
        "a2",
        "b1",
        "bare",
    ]


def test_spread_min_domains_counts_missing_domains_as_empty() -> None:
    world = World(
        [node("a1", {ZONE: "a"}), node("a2", {ZONE: "a"})],
        placed=[pod("s0", {"app": "s"}, on="a1")],
    )
    constraints = [spread(skew=1)]
    assert world.passing(pod("p", {"app": "s"}, topologySpreadConstraints=constraints)) == [
        "a1",
        "a2",
    ]
    constraints = [spread(skew=1, minDomains=2)]
    assert world.passing(pod("q", {"app": "s"}, topologySpreadConstraints=constraints)) == []


def test_spread_node_affinity_policy(spreading: World) -> None:
    # Honor (default): only pool x counts, so zone b is not a domain and zone a is balanced.
    constraints = [spread()]
    honoured = pod(
        "p", {"app": "s"}, topologySpreadConstraints=constraints, nodeSelector={"pool": "x"}
    )
    assert spreading.passing(honoured) == ["a1", "a2"]
    constraints = [spread(nodeAffinityPolicy="Ignore")]
    ignored = pod(
        "q", {"app": "s"}, topologySpreadConstraints=constraints, nodeSelector={"pool": "x"}
    )
    assert spreading.passing(ignored) == []


def test_spread_counts_no_pods_on_nodes_outside_the_affinity() -> None:
    world = World(
        [
            node("a1", {ZONE: "a", "pool": "x"}),
            node("a2", {ZONE: "a", "pool": "y"}),
            node("b1", {ZONE: "b", "pool": "x"}),
        ],
        placed=[pod("s0", {"app": "s"}, on="a2"), pod("s1", {"app": "s"}, on="a2")],
    )
    honour = pod(
        "p", {"app": "s"}, topologySpreadConstraints=[spread()], nodeSelector={"pool": "x"}
    )
    assert world.passing(honour) == ["a1", "b1"]
    constraints = [spread(nodeAffinityPolicy="Ignore")]
    ignore = pod(
        "q", {"app": "s"}, topologySpreadConstraints=constraints, nodeSelector={"pool": "x"}
    )
    assert world.passing(ignore) == ["b1"]


def test_spread_node_taints_policy() -> None:
    world = World(
        [
            node("a1", {ZONE: "a"}),
            node("b1", {ZONE: "b"}, taints=[taint("t", "1")]),
        ],
        placed=[pod("s0", {"app": "s"}, on="a1")],
    )
    tolerate = [{"key": "t", "operator": "Exists", "effect": "NoExecute"}]
    # Ignore (default): zone b counts with 0 pods, so a1 is too crowded; b1 is tainted.
    p = pod("p", {"app": "s"}, topologySpreadConstraints=[spread()], tolerations=tolerate)
    assert world.passing(p) == []
    honour = [spread(nodeTaintsPolicy="Honor")]
    q = pod("q", {"app": "s"}, topologySpreadConstraints=honour, tolerations=tolerate)
    assert world.passing(q) == ["a1"]


def test_spread_counts_pods_placed_in_the_session(spreading: World) -> None:
    constraints = [spread(key=HOST)]
    spreading.allocate(pod("s2", {"app": "s"}), "b1")
    # Hostname domains over a1, a2, b1, bare: one pod each on a1, a2, b1; bare has none.
    assert spreading.passing(pod("p", {"app": "s"}, topologySpreadConstraints=constraints)) == [
        "bare"
    ]


def test_spread_counts_only_the_pod_namespace(spreading: World) -> None:
    constraints = [spread()]
    other = pod("p", {"app": "s"}, namespace="other", topologySpreadConstraints=constraints)
    assert spreading.passing(other) == ["a1", "a2", "b1"]


# -- arguments and plumbing --------------------------------------------------------------------


def test_known_arguments_are_volcanos() -> None:
    assert set(PredicatesPlugin.known_arguments) == {
        "predicate.NodeAffinityEnable",
        "predicate.NodePortsEnable",
        "predicate.TaintTolerationEnable",
        "predicate.PodAffinityEnable",
        "predicate.NodeVolumeLimitsEnable",
        "predicate.VolumeZoneEnable",
        "predicate.PodTopologySpreadEnable",
        "predicate.VolumeBindingEnable",
        "predicate.CacheEnable",
        "predicate.DynamicResourceAllocationEnable",
        "volumebinding.weight",
        "volumebinding.shape",
        "volumebinding.bindTimeoutSeconds",
        "dynamicresources.filterTimeoutSeconds",
    }


@pytest.mark.parametrize(
    ("argument", "make_pod"),
    [
        ("predicate.NodeAffinityEnable", lambda: pod("p", nodeSelector={"zone": "nowhere"})),
        ("predicate.TaintTolerationEnable", lambda: pod("p")),
        ("predicate.NodePortsEnable", lambda: pod("p", ports=[port(80)])),
        (
            "predicate.PodAffinityEnable",
            lambda: pod("p", affinity=required("podAffinity", pod_term({"app": "none"}))),
        ),
        (
            "predicate.PodTopologySpreadEnable",
            lambda: pod("p", {"app": "s"}, topologySpreadConstraints=[spread(key="missing")]),
        ),
    ],
)
def test_arguments_disable_filters(argument: str, make_pod: Any) -> None:
    nodes = [node("n", taints=[taint("k", "v")])]
    placed = [pod("web", on="n", ports=[port(80)], tolerations=[{"operator": "Exists"}])]
    tolerate = (
        {"predicate.TaintTolerationEnable": False}
        if argument != "predicate.TaintTolerationEnable"
        else {}
    )
    enabled = World(nodes, placed, arguments=tolerate)
    disabled = World(nodes, placed, arguments={**tolerate, argument: "false"})
    assert enabled.passing(make_pod()) == []
    assert disabled.passing(make_pod()) == ["n"]


def test_unschedulable_cannot_be_disabled() -> None:
    world = World(
        [node("n", unschedulable=True)], arguments={"predicate.NodeAffinityEnable": False}
    )
    assert world.passing(pod("p")) == []


def test_static_filter_is_shared_by_pods_of_one_shape() -> None:
    world = World([node("a", {"zone": "x"}), node("b")])
    first = world._task(pod("p0", {"app": "x"}, nodeSelector={"zone": "x"}))
    second = world._task(pod("p1", {"app": "x"}, nodeSelector={"zone": "x"}))
    assert first.shape == second.shape
    assert world.plugin.predicate(first) is world.plugin.predicate(second)


def test_invalid_affinity_is_reported_by_pre_predicate() -> None:
    world = World([node("a")])
    bad = {"labelSelector": {"matchExpressions": [expr("app", "Near", "x")]}, "topologyKey": HOST}
    task = world._task(pod("p", affinity=required("podAffinity", bad)))
    error = world.ssn.pre_predicate(task)
    assert error is not None and "Near" in error


def test_combined_reasons_count_each_node_once() -> None:
    world = World(
        [node("a", unschedulable=True), node("b", taints=[taint("k")]), node("c", {"zone": "z"})]
    )
    result = world.filter(pod("p", nodeSelector={"zone": "z"}))
    counts = np.sum([mask for mask, _, _ in result.reasons], axis=0)
    assert counts.tolist() == [1, 1, 0]
    assert result.passed.tolist() == [False, False, True]


def test_yaml_boolean_in_node_selector_matches_the_label_text() -> None:
    world = World([node("a", {"gpu": "true"}), node("b", {"gpu": "false"})])
    assert world.passing(pod("p", nodeSelector={"gpu": True})) == ["a"]


def test_node_without_pod_capacity_is_not_limited() -> None:
    raw = node("a")
    del raw["status"]["allocatable"]["pods"]
    world = World([raw], placed=[pod("x", on="a")])
    assert world.passing(pod("p")) == ["a"]


def test_next_session_reuses_node_columns_only_while_nodes_are_unchanged() -> None:
    first = World([node("a", {"zone": "x"}), node("b", {"zone": "y"})])
    assert first.passing(pod("p", nodeSelector={"zone": "x"})) == ["a"]
    index = first.plugin.state.nodes
    table = first.ssn.nodes.copy()
    option = PluginOption("predicates", Arguments("predicates"))
    config = SchedulerConfig([], [[option]], {})
    again = Session(Snapshot({}, {}, table), config, datetime(2024, 1, 1, tzinfo=UTC))
    again.open()
    assert again.plugins["predicates"].state.nodes is index  # type: ignore[attr-defined]
    table.replace_node(node_info_from(node("a", {"zone": "y"})))
    changed = Session(Snapshot({}, {}, table), config, datetime(2024, 1, 1, tzinfo=UTC))
    changed.open()
    task = task_info_from(pod("q", nodeSelector={"zone": "x"}), "q")
    assert changed.plugins["predicates"].state.nodes is not index  # type: ignore[attr-defined]
    assert changed.predicate(task).passed.tolist() == [False, False]


def test_pipelined_pod_counts_for_anti_affinity() -> None:
    world = World([node("a"), node("b")])
    affinity = required("podAntiAffinity", pod_term({"app": "solo"}))
    task = world._task(pod("s0", {"app": "solo"}, affinity=affinity))
    world.ssn.statement().pipeline(task, "a")
    assert world.passing(pod("s1", {"app": "solo"}, affinity=affinity)) == ["b"]


def test_nodeorder_and_predicates_share_one_session_state() -> None:
    from stromboli.core.scheduler.plugins.nodeorder import NodeOrderPlugin

    table = NodeTable()
    table.add_node(node_info_from(node("a")))
    options = [
        PluginOption("predicates", Arguments("predicates")),
        PluginOption(NodeOrderPlugin.name, Arguments(NodeOrderPlugin.name)),
    ]
    ssn = Session(
        Snapshot({}, {}, table),
        SchedulerConfig([], [options], {}),
        datetime(2024, 1, 1, tzinfo=UTC),
    )
    ssn.open()
    assert ssn.plugins["predicates"].state is ssn.plugins["nodeorder"].state  # type: ignore[attr-defined]
    assert len(ssn.event_handlers) == 1


def test_node_index_survives_a_node_update_that_changes_nothing_it_uses() -> None:
    world = World([node("a", {"zone": "x"}), node("b", {"zone": "y"})])
    index = world.plugin.state.nodes
    table = world.ssn.nodes.copy()
    heartbeat = node("a", {"zone": "x"})
    heartbeat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    table.replace_node(node_info_from(heartbeat))
    option = PluginOption("predicates", Arguments("predicates"))
    again = Session(
        Snapshot({}, {}, table),
        SchedulerConfig([], [[option]], {}),
        datetime(2024, 1, 1, tzinfo=UTC),
    )
    again.open()
    assert again.plugins["predicates"].state.nodes is index  # type: ignore[attr-defined]
    cordoned = node("b", {"zone": "y"}, unschedulable=True)
    table.replace_node(node_info_from(cordoned))
    last = Session(
        Snapshot({}, {}, table),
        SchedulerConfig([], [[option]], {}),
        datetime(2024, 1, 1, tzinfo=UTC),
    )
    last.open()
    assert last.plugins["predicates"].state.nodes is not index  # type: ignore[attr-defined]
    assert last.predicate(task_info_from(pod("p"), "p")).passed.tolist() == [True, False]


def test_spread_reports_one_reason_per_node() -> None:
    world = World([node("a", {ZONE: "a"}), node("cordoned", unschedulable=True)])
    task = world._task(pod("p", {"app": "s"}, topologySpreadConstraints=[spread()]))
    result = world.plugin.predicate(task)
    assert [(mask.tolist(), reason) for mask, reason, _ in result.reasons] == [
        ([False, True], UNSCHEDULABLE)
    ]

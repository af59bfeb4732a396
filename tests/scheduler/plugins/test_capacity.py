"""capacity: explicit deserved/capability/guarantee amounts per queue, flat queues."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.conf import ConfigError, parse_config
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.capacity import (
    CapacityPlugin,
    Limit,
    capacity_share,
    exceeded,
    exceeds_deserved,
    guarantee_kept,
    within_deserved_partly,
)

from ..builders import Cluster, conf, make_session, node, pod, podgroup, queue, session_task

CPU = 1000.0
GI = float(2**30)
CAPACITY_CONF = conf("enqueue, allocate", ["priority", "gang"], ["capacity"])


def cqueue(name: str, *, deserved: dict[str, str] | None = None, **kwargs: Any) -> dict:
    """A Queue dict with ``spec.deserved`` (the shared builder does not know that field)."""
    obj = queue(name, **kwargs)
    if deserved is not None:
        obj["spec"]["deserved"] = deserved
    return obj


def plugin(ssn: Session) -> CapacityPlugin:
    found = ssn.plugins["capacity"]
    assert isinstance(found, CapacityPlugin)
    return found


def enqueue_vote(ssn: Session, name: str, namespace: str = "default") -> int:
    return ssn._callbacks["job_enqueueable"]["capacity"](ssn.jobs[f"{namespace}/{name}"])


def running(name: str, group: str, cpu: str = "1", node_name: str = "n1", **kw: Any) -> dict:
    return pod(name, group=group, uid=name, cpu=cpu, node_name=node_name, phase="Running", **kw)


# -- helpers -----------------------------------------------------------------------------------


def test_limit_arithmetic_keeps_unlimited_names_unlimited() -> None:
    tree = Limit({"cpu": 8 * CPU}, default=math.inf)
    left = tree.minus(Resource({"cpu": 2 * CPU, "nvidia.com/gpu": 1})).plus(Resource({"cpu": CPU}))
    assert left.get("cpu") == 7 * CPU
    assert left.get("nvidia.com/gpu") == math.inf
    assert left.get("memory") == math.inf
    flat = Limit({"cpu": 8 * CPU})
    assert flat.get("memory") == 0
    assert flat.capped({"cpu": 3 * CPU}).get("cpu") == 3 * CPU
    assert flat.minus(Resource({"cpu": 10 * CPU})).get("cpu") == 0


def test_share_is_largest_fraction_of_deserved_and_one_without_deserved() -> None:
    assert capacity_share(Resource({"cpu": CPU}), Resource({"cpu": 4 * CPU})) == 0.25
    assert capacity_share(
        Resource({"cpu": CPU, "memory": 3 * GI}), Resource({"cpu": 4 * CPU, "memory": 4 * GI})
    ) == pytest.approx(0.75)
    assert capacity_share(Resource(), Resource()) == 1.0
    assert capacity_share(Resource({"cpu": 9 * CPU}), Resource()) == 1.0
    assert capacity_share(Resource({"cpu": 6 * CPU}), Resource({"cpu": 4 * CPU})) == 1.5


def test_exceeded_looks_only_at_requested_resources() -> None:
    limit = Limit({"cpu": 4 * CPU, "memory": GI})
    future = Resource({"cpu": 5 * CPU, "memory": 2 * GI})
    assert exceeded(future, limit, Resource({"cpu": CPU})) == ["cpu"]
    assert exceeded(future, limit, Resource({"memory": 1})) == ["memory"]
    # Quota-style names in minResources are not schedulable resources.
    assert exceeded(Resource({"requests.cpu": 9}), limit, Resource({"requests.cpu": 9})) == []
    assert exceeded(Resource({"pods": 500}), limit, Resource({"pods": 1})) == []


def test_deserved_comparisons() -> None:
    deserved = Resource({"cpu": 4 * CPU})
    assert exceeds_deserved(Resource({"cpu": 5 * CPU}), deserved, Resource({"cpu": CPU})) == ["cpu"]
    assert exceeds_deserved(Resource({"cpu": 4 * CPU}), deserved, Resource({"cpu": CPU})) == []
    # Memory is not deserved at all: not a relevant dimension.
    assert exceeds_deserved(Resource({"memory": GI}), deserved, Resource({"memory": GI})) == []
    assert within_deserved_partly(Resource({"cpu": 4 * CPU}), deserved, Resource({"cpu": CPU}))
    assert not within_deserved_partly(Resource({"cpu": 5 * CPU}), deserved, Resource({"cpu": 1}))
    assert guarantee_kept(Resource({"cpu": 3 * CPU}), Resource({"cpu": CPU}), deserved.multi(0.5))
    assert not guarantee_kept(
        Resource({"cpu": 2 * CPU}), Resource({"cpu": CPU}), Resource({"cpu": 2 * CPU})
    )


# -- real capability and deserved ------------------------------------------------------------------


def attrs_of(*objects: dict, config: str = CAPACITY_CONF) -> Session:
    return make_session(list(objects), config)


def test_real_capability_is_capability_within_what_others_are_not_guaranteed() -> None:
    ssn = attrs_of(
        node("n1", cpu="8", memory="16Gi"),
        cqueue("guaranteed", guarantee={"cpu": "2"}),
        cqueue("capped", capability={"cpu": "5"}),
        cqueue("free"),
    )
    attrs = plugin(ssn).attrs
    assert attrs["guaranteed"].real_capability.get("cpu") == 8 * CPU
    assert attrs["capped"].real_capability.get("cpu") == 5 * CPU
    assert attrs["free"].real_capability.get("cpu") == 6 * CPU
    assert attrs["free"].real_capability.get("memory") == 16 * GI


def test_capability_dimension_missing_or_cpu_zero_is_unlimited() -> None:
    ssn = attrs_of(
        node("n1", cpu="8", memory="16Gi"),
        cqueue("mem-only", capability={"memory": "1Gi"}),
        cqueue("zero-cpu", capability={"cpu": "0", "memory": "2Gi"}),
        cqueue("no-gpu", capability={"nvidia.com/gpu": "0"}),
    )
    attrs = plugin(ssn).attrs
    assert attrs["mem-only"].real_capability.get("cpu") == 8 * CPU
    assert attrs["mem-only"].real_capability.get("memory") == GI
    assert attrs["zero-cpu"].real_capability.get("cpu") == 8 * CPU
    # A scalar capability of zero is a real limit.
    assert attrs["no-gpu"].real_capability.get("nvidia.com/gpu") == 0


def test_deserved_is_capped_by_real_capability_and_floored_at_guarantee() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("big", deserved={"cpu": "20"}, capability={"cpu": "6"}),
        cqueue("small", deserved={"cpu": "1"}, guarantee={"cpu": "2"}),
    )
    attrs = plugin(ssn).attrs
    assert attrs["big"].deserved.get("cpu") == 6 * CPU
    assert attrs["small"].deserved.get("cpu") == 2 * CPU


def test_figures_are_published_for_queues_with_jobs() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("q", deserved={"cpu": "4"}),
        cqueue("idle", deserved={"cpu": "4"}),
        podgroup("j", 1, queue="q", phase="Running"),
        running("j-0", "j", cpu="2"),
        pod("j-1", group="j", uid="j-1", cpu="1"),
    )
    figures = ssn.queue_figures["q"]
    assert figures["share"] == 0.5
    assert figures["allocated"] == Resource({"cpu": 2 * CPU})
    assert figures["request"] == Resource({"cpu": 3 * CPU})
    assert figures["deserved"] == Resource({"cpu": 4 * CPU})
    assert "idle" not in ssn.queue_figures
    ssn.statement().allocate(session_task(ssn, "j-1"), "n1")
    ssn.close()
    assert ssn.queue_figures["q"]["share"] == 0.75


# -- allocatable -------------------------------------------------------------------------------


def one_queue(capability: dict | None = None, **kwargs: Any) -> Session:
    return attrs_of(
        node("n1", cpu="8", memory="16Gi"),
        cqueue("q", capability=capability, **kwargs),
        podgroup("j", 1, queue="q", phase="Inqueue"),
        *[pod(f"j-{i}", group="j", uid=f"j-{i}", cpu="1", memory="1Gi") for i in range(8)],
    )


def test_allocatable_up_to_real_capability_not_deserved() -> None:
    ssn = one_queue({"cpu": "3"}, deserved={"cpu": "1"})
    q = ssn.queues["q"]
    stmt = ssn.statement()
    for i in range(3):
        assert ssn.allocatable(q, session_task(ssn, f"j-{i}"))
        stmt.allocate(session_task(ssn, f"j-{i}"), "n1")
    assert not ssn.allocatable(q, session_task(ssn, "j-3"))
    stmt.discard()
    assert ssn.allocatable(q, session_task(ssn, "j-3"))


def test_allocatable_checks_only_requested_dimensions() -> None:
    ssn = one_queue({"memory": "2Gi"})
    q = ssn.queues["q"]
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "j-0"), "n1")
    stmt.allocate(session_task(ssn, "j-1"), "n1")
    assert not ssn.allocatable(q, session_task(ssn, "j-2"))
    cpu_only = session_task(ssn, "j-2")
    cpu_only.resreq = Resource({"cpu": CPU})
    assert ssn.allocatable(q, cpu_only)


def test_closed_queue_is_not_allocatable() -> None:
    ssn = one_queue(state="Closed")
    assert not ssn.allocatable(ssn.queues["q"], session_task(ssn, "j-0"))


def test_guarantee_of_another_queue_is_kept_free() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("reserved", guarantee={"cpu": "3"}),
        cqueue("q"),
        podgroup("j", 1, queue="q", phase="Inqueue"),
        *[pod(f"j-{i}", group="j", uid=f"j-{i}", cpu="1") for i in range(8)],
    )
    q = ssn.queues["q"]
    stmt = ssn.statement()
    for i in range(5):
        assert ssn.allocatable(q, session_task(ssn, f"j-{i}"))
        stmt.allocate(session_task(ssn, f"j-{i}"), "n1")
    assert not ssn.allocatable(q, session_task(ssn, "j-5"))


# -- queue order -------------------------------------------------------------------------------


def test_queue_order_priority_then_share_then_deserved_before_best_effort() -> None:
    ssn = attrs_of(
        node("n1", cpu="16"),
        cqueue("half", deserved={"cpu": "4"}, created="1970-01-01T00:00:01Z"),
        cqueue("quarter", deserved={"cpu": "8"}, created="1970-01-01T00:00:02Z"),
        cqueue("besteffort", created="1970-01-01T00:00:03Z"),
        cqueue("full", deserved={"cpu": "2"}, created="1970-01-01T00:00:04Z"),
        cqueue("vip", priority=5, created="1970-01-01T00:00:05Z"),
        *[podgroup(q, 1, queue=q, phase="Running") for q in ("half", "quarter", "full", "vip")],
        podgroup("besteffort", 1, queue="besteffort", phase="Inqueue"),
        running("half-0", "half", cpu="2"),
        running("quarter-0", "quarter", cpu="2"),
        running("full-0", "full", cpu="2"),
        running("vip-0", "vip", cpu="8"),
        pod("besteffort-0", group="besteffort", uid="be0", cpu="1"),
    )
    names = ["half", "quarter", "besteffort", "full", "vip"]
    ordered = sorted((ssn.queues[n] for n in names), key=functools.cmp_to_key(ssn.queue_compare))
    # vip by priority; then shares 0.25, 0.5; full (share 1, deserves something) before the
    # best-effort queue (share 1, deserves nothing).
    assert [q.name for q in ordered] == ["vip", "quarter", "half", "full", "besteffort"]


def test_share_follows_allocations() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("a", deserved={"cpu": "4"}, created="1970-01-01T00:00:01Z"),
        cqueue("b", deserved={"cpu": "4"}, created="1970-01-01T00:00:02Z"),
        podgroup("a", 1, queue="a", phase="Inqueue"),
        podgroup("b", 1, queue="b", phase="Inqueue"),
        *[pod(f"a-{i}", group="a", uid=f"a{i}", cpu="1") for i in range(4)],
        *[pod(f"b-{i}", group="b", uid=f"b{i}", cpu="1") for i in range(4)],
    )
    a, b = ssn.queues["a"], ssn.queues["b"]
    assert ssn.queue_less(a, b)  # equal shares: creation order
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "a-0"), "n1")
    assert plugin(ssn).attrs["a"].share == 0.25
    assert ssn.queue_less(b, a)
    stmt.discard()
    assert plugin(ssn).attrs["a"].share == 0.0


# -- enqueue -----------------------------------------------------------------------------------


def test_enqueue_counts_allocated_inqueue_and_elastic_against_real_capability() -> None:
    ssn = attrs_of(
        node("n1", cpu="10"),
        cqueue("q", capability={"cpu": "6"}),
        podgroup("run", 1, queue="q", phase="Running", min_resources={"cpu": "2"}),
        running("run-0", "run", cpu="3"),
        podgroup("wait", 1, queue="q", phase="Inqueue", min_resources={"cpu": "1"}),
        podgroup("ok", 1, queue="q", min_resources={"cpu": "3"}),
        podgroup("no", 1, queue="q", min_resources={"cpu": "3100m"}),
        podgroup("free", 1, queue="q"),
        config=conf("enqueue", ["capacity"]),
    )
    # allocated 3 + inqueue 1 − elastic (3 − 2) = 3; 3 + 3 ≤ 6 but 3 + 3.1 > 6.
    assert enqueue_vote(ssn, "ok") == PERMIT
    assert enqueue_vote(ssn, "no") == REJECT
    assert enqueue_vote(ssn, "free") == PERMIT
    message = "queue resource quota insufficient: insufficient cpu"
    assert ssn.job_events == [("default/no", "Normal", "Unschedulable", message)]


def test_enqueued_jobs_count_against_the_queue() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("q", capability={"cpu": "4"}),
        podgroup("a", 1, queue="q", min_resources={"cpu": "3"}),
        podgroup("b", 1, queue="q", min_resources={"cpu": "2"}),
        config=conf("enqueue", ["capacity"]),
    )
    assert enqueue_vote(ssn, "a") == PERMIT
    ssn.job_enqueued(ssn.jobs["default/a"])
    assert enqueue_vote(ssn, "b") == REJECT


def test_enqueue_rejects_closed_queues() -> None:
    ssn = attrs_of(
        node("n1"),
        cqueue("shut", state="Closed"),
        podgroup("a", 1, queue="shut"),
        config=conf("enqueue", ["capacity"]),
    )
    assert enqueue_vote(ssn, "a") == REJECT


def test_elastic_of_jobs_without_min_resources_is_discounted() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("q", capability={"cpu": "4"}),
        podgroup("loose", 1, queue="q", phase="Running"),
        running("loose-0", "loose", cpu="4"),
        podgroup("next", 1, queue="q", min_resources={"cpu": "2"}),
        config=conf("enqueue", ["capacity"]),
    )
    # The running job names no minimum: all it holds is elastic and could be reclaimed.
    assert enqueue_vote(ssn, "next") == PERMIT


# -- reclaim and preemptive ---------------------------------------------------------------------


def lender_and_borrower(*extra: dict) -> Session:
    return attrs_of(
        node("n1", cpu="8", memory="32Gi"),
        cqueue("lender", deserved={"cpu": "4"}, created="1970-01-01T00:00:01Z"),
        cqueue(
            "borrower",
            deserved={"cpu": "4"},
            guarantee={"cpu": "1"},
            created="1970-01-01T00:00:02Z",
        ),
        podgroup("l", 1, queue="lender", phase="Running"),
        podgroup("b", 1, queue="borrower", phase="Running"),
        running("l-0", "l", cpu="1"),
        pod("l-1", group="l", uid="l-1", cpu="2"),
        *[running(f"b-{i}", "b", cpu="1") for i in range(7)],
        *extra,
    )


def reclaim(ssn: Session, reclaimer: str, candidates: list[str]) -> tuple[list[str], int]:
    fn = ssn._callbacks["reclaimable"]["capacity"]
    chosen, vote = fn(session_task(ssn, reclaimer), [session_task(ssn, n) for n in candidates])
    return [t.name for t in chosen], vote


def test_reclaim_takes_only_what_a_queue_holds_beyond_its_deserved() -> None:
    ssn = lender_and_borrower()
    names, vote = reclaim(ssn, "l-1", [f"b-{i}" for i in range(7)])
    assert vote == PERMIT
    # borrower holds 7 of 4 deserved: three tasks may go, not a fourth.
    assert names == ["b-0", "b-1", "b-2"]


def test_reclaim_never_takes_a_queue_below_its_guarantee() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("lender", deserved={"cpu": "6"}, created="1970-01-01T00:00:01Z"),
        cqueue("kept", guarantee={"cpu": "3"}, created="1970-01-01T00:00:02Z"),
        podgroup("l", 1, queue="lender", phase="Running"),
        podgroup("k", 1, queue="kept", phase="Running"),
        pod("l-0", group="l", uid="l-0", cpu="2"),
        *[running(f"k-{i}", "k", cpu="1") for i in range(4)],
    )
    # "kept" deserves only its guarantee (3) and holds 4: one task may go.
    names, _ = reclaim(ssn, "l-0", [f"k-{i}" for i in range(4)])
    assert names == ["k-0"]


def test_reclaim_skips_tasks_without_resources_the_reclaimer_needs() -> None:
    ssn = lender_and_borrower(
        podgroup("m", 1, queue="borrower", phase="Running"),
        running("m-0", "m", cpu=None, memory="8Gi"),
    )
    names, _ = reclaim(ssn, "l-1", ["m-0"])
    assert names == []


def test_reclaim_from_a_queue_that_deserves_none_of_it() -> None:
    ssn = attrs_of(
        node("n1", cpu="8", extra={"nvidia.com/gpu": "4"}),
        cqueue("gpu", deserved={"nvidia.com/gpu": "4"}, created="1970-01-01T00:00:01Z"),
        cqueue("cpu", deserved={"cpu": "8"}, created="1970-01-01T00:00:02Z"),
        podgroup("g", 1, queue="gpu", phase="Running"),
        podgroup("c", 1, queue="cpu", phase="Running"),
        pod("g-0", group="g", uid="g-0", cpu="1", extra={"nvidia.com/gpu": "1"}),
        running("c-0", "c", cpu=None, extra={"nvidia.com/gpu": "1"}),
        running("c-1", "c", cpu="1", extra={"nvidia.com/gpu": "1"}),
    )
    # The cpu queue deserves no GPUs: a task holding only GPUs may always be reclaimed; one
    # that also holds cpu goes only while the queue is past its deserved cpu.
    names, _ = reclaim(ssn, "g-0", ["c-0", "c-1"])
    assert names == ["c-0"]


def test_reclaim_respects_reclaimable_false() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("lender", deserved={"cpu": "4"}),
        cqueue("locked", deserved={"cpu": "1"}, reclaimable=False),
        podgroup("l", 1, queue="lender", phase="Running"),
        podgroup("k", 1, queue="locked", phase="Running"),
        pod("l-0", group="l", uid="l-0", cpu="2"),
        *[running(f"k-{i}", "k", cpu="1") for i in range(4)],
    )
    assert reclaim(ssn, "l-0", ["k-0"])[0] == []


def test_preemptive_while_below_deserved_on_some_requested_resource() -> None:
    ssn = lender_and_borrower()
    lender, borrower = ssn.queues["lender"], ssn.queues["borrower"]
    assert ssn.preemptive(lender, session_task(ssn, "l-1"))  # 1 + 2 ≤ 4
    big = session_task(ssn, "l-1")
    big.resreq = Resource({"cpu": 4 * CPU})
    assert not ssn.preemptive(lender, big)  # 1 + 4 > 4
    extra = session_task(ssn, "b-0")
    assert not ssn.preemptive(borrower, extra)  # already past its deserved


def test_best_effort_queue_never_reclaims() -> None:
    ssn = attrs_of(
        node("n1", cpu="8"),
        cqueue("be"),
        podgroup("j", 1, queue="be", phase="Inqueue"),
        pod("j-0", group="j", uid="j-0", cpu="1"),
    )
    assert not ssn.preemptive(ssn.queues["be"], session_task(ssn, "j-0"))


# -- configuration -----------------------------------------------------------------------------


def test_arguments_are_accepted_and_unknown_ones_rejected() -> None:
    text = conf(
        "allocate",
        [
            {
                "name": "capacity",
                "enableHierarchy": True,
                "arguments": {
                    "ancestorReclaimLevel": 2,
                    "capacity.DynamicResourceAllocationEnable": True,
                    "capacity.DRAConsumableCapacityEnable": False,
                },
            }
        ],
    )
    option = parse_config(text).tiers[0][0]
    assert option.hierarchy
    with pytest.raises(ConfigError, match="ancestorReclaim"):
        parse_config(conf("allocate", [{"name": "capacity", "arguments": {"ancestorReclaim": 1}}]))


def test_negative_ancestor_reclaim_level_falls_back_to_zero() -> None:
    ssn = attrs_of(
        node("n1"),
        config=conf("allocate", [{"name": "capacity", "arguments": {"ancestorReclaimLevel": -3}}]),
    )
    assert plugin(ssn).ancestor_reclaim_level == 0


# -- through the scheduler ----------------------------------------------------------------------


async def test_capability_limits_a_queue_on_an_empty_cluster(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, CAPACITY_CONF).start()
    await c.add(
        node("n1", cpu="8"),
        cqueue("capped", capability={"cpu": "3"}, deserved={"cpu": "1"}),
        podgroup("a", 1, queue="capped"),
        *[pod(f"a-{i}", group="a", cpu="1") for i in range(6)],
    )
    assert (await c.run()).bound == 3
    assert (await c.run(2)).bound == 0
    assert (await c.queue("capped"))["status"]["allocated"] == {
        "cpu": "3",
        "memory": "0",
        "pods": "3",
    }


async def test_a_queue_borrows_idle_capacity_beyond_its_deserved(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, CAPACITY_CONF).start()
    await c.add(
        node("n1", cpu="8"),
        cqueue("small", deserved={"cpu": "2"}),
        cqueue("idle", deserved={"cpu": "6"}),
        podgroup("a", 1, queue="small"),
        *[pod(f"a-{i}", group="a", cpu="1") for i in range(10)],
    )
    assert (await c.run()).bound == 8


async def test_guarantee_is_reserved_for_its_queue(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, CAPACITY_CONF).start()
    await c.add(
        node("n1", cpu="8"),
        cqueue("vip", guarantee={"cpu": "3"}),
        cqueue("crowd"),
        podgroup("crowd-job", 1, queue="crowd"),
        *[pod(f"crowd-{i}", group="crowd-job", cpu="1") for i in range(8)],
    )
    assert (await c.run()).bound == 5
    await c.add(
        podgroup("vip-job", 3, queue="vip"),
        *[pod(f"vip-{i}", group="vip-job", cpu="1") for i in range(3)],
    )
    assert (await c.run()).bound == 3
    assert all([await c.node_of(f"vip-{i}") == "n1" for i in range(3)])


async def test_enqueue_holds_a_podgroup_that_exceeds_the_queue(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, CAPACITY_CONF).start()
    await c.add(
        node("n1", cpu="8"),
        cqueue("capped", capability={"cpu": "2"}),
        podgroup("big", 1, queue="capped", min_resources={"cpu": "3"}),
        pod("big-0", group="big", cpu="3"),
    )
    await c.run()
    assert (await c.pg("big"))["status"]["phase"] == "Pending"
    events = await c.events(reason="Unschedulable", name="big")
    message = "queue resource quota insufficient: insufficient cpu"
    assert any(message in e["message"] for e in events)


async def test_lent_capacity_is_reclaimed_for_its_queue(tmp_path: Path) -> None:
    config = conf("enqueue, allocate, reclaim", ["priority", "gang", "conformance"], ["capacity"])
    c = await Cluster(tmp_path, config).start()
    await c.add(
        node("n1", cpu="8"),
        cqueue("lender", deserved={"cpu": "4"}),
        cqueue("borrower", deserved={"cpu": "4"}),
        podgroup("greedy", 1, queue="borrower"),
        *[pod(f"greedy-{i}", group="greedy", cpu="1") for i in range(8)],
    )
    assert (await c.run()).bound == 8
    for i in range(8):
        await c.set_phase(f"greedy-{i}", "Running")
    await c.add(
        podgroup("owed", 4, queue="lender"),
        *[pod(f"owed-{i}", group="owed", cpu="1") for i in range(4)],
    )
    await c.run(3)
    assert all([await c.node_of(f"owed-{i}") == "n1" for i in range(4)])
    left = [i for i in range(8) if await c.exists("Pod", f"greedy-{i}")]
    assert len(left) == 4

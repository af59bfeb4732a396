"""proportion: weighted water-filling of the cluster over queues, and the rules built on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.proportion import QueueAttr, share_of, water_fill

from ..builders import Cluster, conf, make_session, node, pod, podgroup, queue, session_task

CPU = 1000.0
GI = float(2**30)


def attr(
    name: str,
    weight: int = 1,
    request: dict | None = None,
    *,
    capability: dict | None = None,
    guarantee: dict | None = None,
    total: dict | None = None,
) -> QueueAttr:
    """A queue attr whose real capability is ``capability`` (or the total) as the plugin
    computes it: total − others' guarantees is left to the caller through ``total``."""
    real = Resource(total or {"cpu": 1e12, "memory": 1e18})
    if capability is not None:
        real = Resource({n: min(v, capability.get(n, v)) for n, v in real.amounts.items()})
    return QueueAttr(
        name=name,
        weight=weight,
        priority=0,
        request=Resource(request or {}),
        guarantee=Resource(guarantee or {}),
        capability=Resource(capability) if capability else None,
        real_capability=real,
    )


def deserved(attrs: list[QueueAttr], name: str, resource: str = "cpu") -> float:
    return next(a for a in attrs if a.name == name).deserved.get(resource)


# -- water filling -----------------------------------------------------------------------------


def test_weights_split_the_cluster() -> None:
    attrs = [attr("q1", 1, {"cpu": 8 * CPU}), attr("q3", 3, {"cpu": 8 * CPU})]
    water_fill(attrs, Resource({"cpu": 8 * CPU}))
    assert deserved(attrs, "q1") == pytest.approx(2 * CPU)
    assert deserved(attrs, "q3") == pytest.approx(6 * CPU)


def test_a_queue_never_deserves_more_than_it_asks() -> None:
    attrs = [attr("q1", 1, {"cpu": 1 * CPU}), attr("q3", 3, {"cpu": 100 * CPU})]
    water_fill(attrs, Resource({"cpu": 8 * CPU}))
    assert deserved(attrs, "q1") == pytest.approx(1 * CPU)
    # What q1 leaves is handed to q3 in later rounds.
    assert deserved(attrs, "q3") == pytest.approx(7 * CPU)


def test_capability_caps_a_queue_and_the_rest_flows_on() -> None:
    attrs = [
        attr("q1", 1, {"cpu": 8 * CPU}),
        attr("q3", 3, {"cpu": 8 * CPU}, capability={"cpu": 4 * CPU}),
    ]
    water_fill(attrs, Resource({"cpu": 8 * CPU}))
    assert deserved(attrs, "q3") == pytest.approx(4 * CPU)
    assert deserved(attrs, "q1") == pytest.approx(4 * CPU)


def test_guarantee_is_a_floor() -> None:
    total = {"cpu": 8 * CPU}
    attrs = [
        attr("q1", 1, {"cpu": 8 * CPU}, guarantee={"cpu": 3 * CPU}, total=total),
        # The other queue can use at most what q1's guarantee leaves.
        attr("q3", 3, {"cpu": 8 * CPU}, total={"cpu": 5 * CPU}),
    ]
    water_fill(attrs, Resource(total))
    assert deserved(attrs, "q1") == pytest.approx(3 * CPU)
    assert deserved(attrs, "q3") == pytest.approx(5 * CPU)


def test_queue_deserves_nothing_of_what_it_does_not_request() -> None:
    attrs = [attr("cpu-only", 1, {"cpu": 2 * CPU}), attr("both", 1, {"cpu": CPU, "memory": GI})]
    water_fill(attrs, Resource({"cpu": 8 * CPU, "memory": 8 * GI, "pods": 110}))
    assert deserved(attrs, "cpu-only", "memory") == 0
    assert deserved(attrs, "both", "memory") == pytest.approx(GI)
    assert all(a.deserved.get("pods") == 0 for a in attrs)


def test_each_resource_is_filled_on_its_own() -> None:
    attrs = [
        attr("a", 1, {"cpu": 8 * CPU, "memory": 1 * GI}),
        attr("b", 1, {"cpu": 1 * CPU, "memory": 8 * GI}),
    ]
    water_fill(attrs, Resource({"cpu": 8 * CPU, "memory": 8 * GI}))
    assert deserved(attrs, "a", "cpu") == pytest.approx(7 * CPU)
    assert deserved(attrs, "b", "memory") == pytest.approx(7 * GI)


def test_idle_queue_deserves_nothing() -> None:
    attrs = [attr("busy", 1, {"cpu": 8 * CPU}), attr("idle", 1, {})]
    water_fill(attrs, Resource({"cpu": 8 * CPU}))
    assert deserved(attrs, "idle") == 0
    assert deserved(attrs, "busy") == pytest.approx(8 * CPU)


def test_demand_below_supply_is_met_in_full() -> None:
    attrs = [attr("a", 1, {"cpu": 1 * CPU}), attr("b", 5, {"cpu": 2 * CPU})]
    water_fill(attrs, Resource({"cpu": 100 * CPU}))
    assert (deserved(attrs, "a"), deserved(attrs, "b")) == (
        pytest.approx(CPU),
        pytest.approx(2 * CPU),
    )


def test_share_of() -> None:
    assert share_of(Resource({"cpu": 1000}), Resource({"cpu": 4000})) == pytest.approx(0.25)
    assert share_of(
        Resource({"cpu": 1000, "memory": 3.0}), Resource({"cpu": 4000, "memory": 4.0})
    ) == pytest.approx(0.75)
    # Using something deserved not at all counts as fully used.
    assert share_of(Resource({"memory": 1.0}), Resource({"cpu": 4000})) == 1.0
    assert share_of(Resource(), Resource()) == 0.0


# -- the plugin in a session -------------------------------------------------------------------


def two_queues(*extra: dict, config: str | None = None) -> Session:
    return make_session(
        [
            node("n1", cpu="8", memory="16Gi"),
            queue("q1", 1, created="1970-01-01T00:00:01Z"),
            queue("q3", 3, created="1970-01-01T00:00:02Z"),
            podgroup("a", 1, queue="q1", phase="Inqueue"),
            podgroup("b", 1, queue="q3", phase="Inqueue"),
            *[pod(f"a-{i}", group="a", uid=f"a{i}", cpu="1") for i in range(8)],
            *[pod(f"b-{i}", group="b", uid=f"b{i}", cpu="1") for i in range(8)],
            *extra,
        ],
        config or conf("allocate", ["gang"], ["proportion"]),
    )


def test_session_deserved_and_published_figures() -> None:
    ssn = two_queues()
    attrs = ssn.plugins["proportion"].attrs
    assert attrs["q1"].deserved.milli_cpu == pytest.approx(2000)
    assert attrs["q3"].deserved.milli_cpu == pytest.approx(6000)
    assert ssn.queue_figures["q3"]["deserved"] is attrs["q3"].deserved
    assert ssn.queue_figures["q1"]["request"].milli_cpu == 8000  # type: ignore[union-attr]
    # Queues without jobs take no part.
    assert "default" not in attrs


def test_allocatable_up_to_deserved() -> None:
    ssn = two_queues()
    q1 = ssn.queues["q1"]
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "a-0"), "n1")
    assert ssn.allocatable(q1, session_task(ssn, "a-1"))
    stmt.allocate(session_task(ssn, "a-1"), "n1")
    assert not ssn.allocatable(q1, session_task(ssn, "a-2"))
    assert ssn.overused(q1)


def test_queue_order_prefers_the_smaller_share() -> None:
    ssn = two_queues()
    q1, q3 = ssn.queues["q1"], ssn.queues["q3"]
    ssn.statement().allocate(session_task(ssn, "a-0"), "n1")  # q1: 1 of 2 = 0.5
    assert ssn.queue_less(q3, q1)
    stmt = ssn.statement()
    for i in range(4):
        stmt.allocate(session_task(ssn, f"b-{i}"), "n1")  # q3: 4 of 6 = 0.67
    assert ssn.queue_less(q1, q3)


def test_queue_priority_beats_share() -> None:
    ssn = make_session(
        [
            node("n1", cpu="8"),
            queue("low", priority=1),
            queue("high", priority=9),
            podgroup("l", 1, queue="low", phase="Inqueue"),
            podgroup("h", 1, queue="high", phase="Running"),
            pod("l-0", group="l", uid="l0", cpu="1"),
            pod("h-0", group="h", uid="h0", cpu="4", node_name="n1", phase="Running"),
            pod("h-1", group="h", uid="h1", cpu="1"),
        ],
        conf("allocate", ["proportion"]),
    )
    assert ssn.queue_less(ssn.queues["high"], ssn.queues["low"])


def test_closed_queue_is_not_allocatable() -> None:
    ssn = make_session(
        [
            node("n1"),
            queue("shut", state="Closed"),
            podgroup("s", 1, queue="shut", phase="Inqueue"),
            pod("s-0", group="s", uid="s0", cpu="1"),
        ],
        conf("allocate", ["proportion"]),
    )
    assert not ssn.allocatable(ssn.queues["shut"], session_task(ssn, "s-0"))


def test_zero_capability_means_unlimited() -> None:
    ssn = make_session(
        [
            node("n1", cpu="8"),
            queue("q", capability={"cpu": "0"}),
            podgroup("j", 1, queue="q", phase="Inqueue"),
            *[pod(f"j-{i}", group="j", uid=f"j{i}", cpu="2") for i in range(4)],
        ],
        conf("allocate", ["proportion"]),
    )
    assert ssn.plugins["proportion"].attrs["q"].deserved.milli_cpu == pytest.approx(8000)


def test_capability_missing_dimension_is_unlimited() -> None:
    ssn = make_session(
        [
            node("n1", cpu="8", memory="8Gi"),
            queue("q", capability={"memory": "1Gi"}),
            podgroup("j", 1, queue="q", phase="Inqueue"),
            *[pod(f"j-{i}", group="j", uid=f"j{i}", cpu="2", memory="256Mi") for i in range(4)],
        ],
        conf("allocate", ["proportion"]),
    )
    deserved_ = ssn.plugins["proportion"].attrs["q"].deserved
    assert deserved_.milli_cpu == pytest.approx(8000)
    assert deserved_.memory == pytest.approx(2**30)


def enqueue_vote(ssn: Session, name: str) -> int:
    return ssn._callbacks["job_enqueueable"]["proportion"](ssn.jobs[f"default/{name}"])


def test_enqueueable_against_real_capability_with_inqueue_and_allocated() -> None:
    ssn = make_session(
        [
            node("n1", cpu="10"),
            queue("q", capability={"cpu": "6"}),
            podgroup("run", 1, queue="q", phase="Running", min_resources={"cpu": "2"}),
            pod("run-0", group="run", uid="r0", cpu="3", node_name="n1", phase="Running"),
            podgroup("wait", 1, queue="q", phase="Inqueue", min_resources={"cpu": "1"}),
            podgroup("ok", 1, queue="q", min_resources={"cpu": "3"}),
            podgroup("no", 1, queue="q", min_resources={"cpu": "3100m"}),
        ],
        conf("enqueue", ["proportion"]),
    )
    # allocated 3 + inqueue 1 − elastic (3 − 2) = 3; 3 + 3 ≤ 6 but 3 + 3.1 > 6.
    assert enqueue_vote(ssn, "ok") == PERMIT
    assert enqueue_vote(ssn, "no") == REJECT


def test_enqueued_jobs_count_against_the_queue() -> None:
    ssn = make_session(
        [
            node("n1", cpu="4"),
            podgroup("a", 1, min_resources={"cpu": "3"}),
            pod("a-0", group="a", uid="a0", cpu="3"),
            podgroup("b", 1, min_resources={"cpu": "2"}),
            pod("b-0", group="b", uid="b0", cpu="2"),
        ],
        conf("enqueue", ["proportion"]),
    )
    assert enqueue_vote(ssn, "a") == PERMIT
    ssn.job_enqueued(ssn.jobs["default/a"])
    assert enqueue_vote(ssn, "b") == REJECT


def test_reclaim_victims_only_from_queues_over_their_share() -> None:
    ssn = make_session(
        [
            node("n1", cpu="8"),
            queue("greedy"),
            queue("modest"),
            queue("locked", reclaimable=False),
            podgroup("g", 1, queue="greedy", phase="Running"),
            podgroup("m", 1, queue="modest", phase="Running"),
            podgroup("l", 1, queue="locked", phase="Running"),
            *[
                pod(f"g-{i}", group="g", uid=f"g{i}", cpu="1", node_name="n1", phase="Running")
                for i in range(5)
            ],
            pod("m-0", group="m", uid="m0", cpu="1", node_name="n1", phase="Running"),
            pod("m-1", group="m", uid="m1", cpu="4"),
            pod("l-0", group="l", uid="l0", cpu="1", node_name="n1", phase="Running"),
            pod("l-1", group="l", uid="l1", cpu="4"),
        ],
        conf("allocate", ["proportion"]),
    )
    fn = ssn._callbacks["reclaimable"]["proportion"]
    candidates = [session_task(ssn, n) for n in ("g-0", "g-1", "g-2", "m-0", "l-0")]
    chosen, vote = fn(session_task(ssn, "m-1"), candidates)
    assert vote == PERMIT
    names = [t.name for t in chosen]
    assert "m-0" not in names
    assert "l-0" not in names
    assert names and all(n.startswith("g-") for n in names)


# -- through the scheduler ---------------------------------------------------------------------


async def test_weights_one_and_three_share_a_full_cluster_one_to_three(tmp_path: Path) -> None:
    c = await Cluster(
        tmp_path, conf("enqueue, allocate", ["priority", "gang"], ["drf", "proportion"])
    ).start()
    await c.add(
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        queue("q1", 1),
        queue("q3", 3),
        podgroup("a", 1, queue="q1"),
        podgroup("b", 1, queue="q3"),
        *[pod(f"a-{i}", group="a", cpu="1") for i in range(8)],
        *[pod(f"b-{i}", group="b", cpu="1") for i in range(8)],
    )
    stats = await c.run()
    assert stats.bound == 8
    placed_a = [await c.node_of(f"a-{i}") for i in range(8)]
    placed_b = [await c.node_of(f"b-{i}") for i in range(8)]
    assert sum(1 for n in placed_a if n) == 2
    assert sum(1 for n in placed_b if n) == 6
    # Later cycles keep the split.
    assert (await c.run(2)).bound == 0
    assert (await c.queue("q1"))["status"]["allocated"] == {
        "cpu": "2",
        "memory": "0",
        "pods": "2",
    }
    assert (await c.queue("q3"))["status"]["allocated"] == {
        "cpu": "6",
        "memory": "0",
        "pods": "6",
    }


async def test_unused_share_goes_to_the_queue_that_wants_it(tmp_path: Path) -> None:
    c = await Cluster(
        tmp_path, conf("enqueue, allocate", ["priority", "gang"], ["proportion"])
    ).start()
    await c.add(
        node("n1", cpu="8"),
        queue("q1", 1),
        queue("q3", 3),
        podgroup("a", 1, queue="q1"),
        podgroup("b", 1, queue="q3"),
        pod("a-0", group="a", cpu="1"),
        *[pod(f"b-{i}", group="b", cpu="1") for i in range(10)],
    )
    assert (await c.run()).bound == 8
    assert await c.node_of("a-0") == "n1"


async def test_capability_limits_a_queue_on_an_empty_cluster(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, conf("enqueue, allocate", ["gang"], ["proportion"])).start()
    await c.add(
        node("n1", cpu="8"),
        queue("capped", capability={"cpu": "3"}),
        podgroup("a", 1, queue="capped"),
        *[pod(f"a-{i}", group="a", cpu="1") for i in range(6)],
    )
    assert (await c.run()).bound == 3

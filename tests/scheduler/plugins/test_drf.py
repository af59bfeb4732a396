"""drf: the job with the smaller dominant share goes first."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.framework.session import PERMIT, Session
from stromboli.core.scheduler.plugins.drf import dominant_share

from ..builders import Cluster, conf, make_session, node, pod, podgroup, session_task

DRF = conf("allocate", ["drf"], ["gang"])


def test_dominant_share_is_the_largest_fraction() -> None:
    total = Resource({"cpu": 10000, "memory": 100.0, "pods": 110})
    assert dominant_share(Resource({"cpu": 2000, "memory": 50.0}), total) == pytest.approx(0.5)
    assert dominant_share(Resource({"cpu": 4000, "memory": 10.0}), total) == pytest.approx(0.4)


def test_dominant_share_ignores_pods_and_missing_capacity() -> None:
    total = Resource({"cpu": 10000, "pods": 10})
    share = dominant_share(Resource({"cpu": 1000, "pods": 10, "nvidia.com/gpu": 1}), total)
    assert share == pytest.approx(0.1)


def test_empty_allocation_has_no_share() -> None:
    assert dominant_share(Resource(), Resource({"cpu": 1000})) == 0.0


def sharing() -> Session:
    # Total 8 cpu, 8Gi. "cpu-heavy" holds 4 cpu (share 0.5); "mem-heavy" holds 2Gi (0.25).
    return make_session(
        [
            node("n1", cpu="8", memory="8Gi"),
            podgroup("cpu-heavy", 1, phase="Running", created="1970-01-01T00:00:01Z"),
            podgroup("mem-heavy", 1, phase="Running", created="1970-01-01T00:00:02Z"),
            pod("c-0", group="cpu-heavy", uid="c0", cpu="4", node_name="n1", phase="Running"),
            pod("c-1", group="cpu-heavy", uid="c1", cpu="1"),
            pod("m-0", group="mem-heavy", uid="m0", memory="2Gi", node_name="n1", phase="Running"),
            pod("m-1", group="mem-heavy", uid="m1", cpu="3"),
        ],
        DRF,
    )


def test_smaller_dominant_share_orders_first() -> None:
    ssn = sharing()
    cpu, mem = ssn.jobs["default/cpu-heavy"], ssn.jobs["default/mem-heavy"]
    assert ssn.plugins["drf"].shares == {
        "default/cpu-heavy": pytest.approx(0.5),
        "default/mem-heavy": pytest.approx(0.25),
    }
    assert ssn.job_less(mem, cpu)


def test_shares_follow_allocations_in_the_session() -> None:
    ssn = sharing()
    cpu, mem = ssn.jobs["default/cpu-heavy"], ssn.jobs["default/mem-heavy"]
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "m-1"), "n1")  # mem-heavy now holds 3 cpu: 0.375
    assert ssn.plugins["drf"].shares["default/mem-heavy"] == pytest.approx(0.375)
    assert ssn.job_less(mem, cpu)
    stmt.allocate(session_task(ssn, "c-1"), "n1")
    assert ssn.plugins["drf"].shares["default/cpu-heavy"] == pytest.approx(0.625)


def test_victims_keep_the_preemptor_below_the_victim() -> None:
    ssn = sharing()
    fn = ssn._callbacks["preemptable"]["drf"]
    # mem-heavy (0.25) taking 3 cpu would reach 0.375; cpu-heavy minus 4 cpu falls to 0:
    # not a fair trade.
    chosen, vote = fn(session_task(ssn, "m-1"), [session_task(ssn, "c-0")])
    assert vote == PERMIT
    assert chosen == []


def test_victims_allowed_when_the_victim_stays_richer() -> None:
    ssn = make_session(
        [
            node("n1", cpu="8"),
            podgroup("rich", 1, phase="Running"),
            podgroup("poor", 1),
            *[
                pod(f"r-{i}", group="rich", uid=f"r{i}", cpu="2", node_name="n1", phase="Running")
                for i in range(3)
            ],
            pod("p-0", group="poor", uid="p0", cpu="1"),
        ],
        DRF,
    )
    fn = ssn._callbacks["preemptable"]["drf"]
    chosen, _ = fn(session_task(ssn, "p-0"), [session_task(ssn, "r-0")])
    assert [t.name for t in chosen] == ["r-0"]


async def test_job_with_smaller_share_gets_the_room(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, conf("enqueue, allocate", ["drf"], ["gang"])).start()
    await c.add(
        node("n1", cpu="8"),
        # Created first, so without drf it would win the last 2 cpus.
        podgroup("big", 1),
        podgroup("small", 1),
        pod("big-0", group="big", cpu="4", node_name="n1", phase="Running"),
        pod("small-0", group="small", cpu="2", node_name="n1", phase="Running"),
        pod("big-1", group="big", cpu="2"),
        pod("small-1", group="small", cpu="2"),
    )
    assert (await c.run()).bound == 1
    assert await c.node_of("small-1") == "n1"
    assert await c.node_of("big-1") == ""


async def test_without_drf_creation_order_decides(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, conf("enqueue, allocate", ["gang"])).start()
    await c.add(
        node("n1", cpu="8"),
        podgroup("big", 1),
        podgroup("small", 1),
        pod("big-0", group="big", cpu="4", node_name="n1", phase="Running"),
        pod("small-0", group="small", cpu="2", node_name="n1", phase="Running"),
        pod("big-1", group="big", cpu="2"),
        pod("small-1", group="small", cpu="2"),
    )
    await c.run()
    assert await c.node_of("big-1") == "n1"

"""Evictions remember whom they made room for, and the scheduler keeps the latest ones."""

from __future__ import annotations

import asyncio
from pathlib import Path

from stromboli.core.scheduler.scheduler import RECENT_EVICTIONS, Scheduler

from .builders import Cluster, conf, make_session, node, pod, podgroup, priority_class, session_task


def two_jobs_on_one_node() -> list[dict]:
    return [
        node("n1", cpu="4"),
        podgroup("low", 1, phase="Running"),
        pod("low-0", group="low", uid="l0", cpu="2", node_name="n1", phase="Running"),
        pod("low-1", group="low", uid="l1", cpu="2", node_name="n1", phase="Running"),
        podgroup("high", 1, phase="Inqueue"),
        pod("high-0", group="high", uid="h0", cpu="2"),
        pod("high-1", group="high", uid="h1", cpu="2"),
    ]


def test_each_eviction_names_the_task_placed_after_it() -> None:
    ssn = make_session(two_jobs_on_one_node(), conf("allocate", ["gang"]))
    stmt = ssn.statement()
    stmt.evict(session_task(ssn, "low-0"), "preempt")
    stmt.pipeline(session_task(ssn, "high-0"), "n1")
    stmt.evict(session_task(ssn, "low-1"), "preempt")
    stmt.pipeline(session_task(ssn, "high-1"), "n1")
    stmt.commit("preempt")
    made = {
        e.task.name: (e.preemptor.name if e.preemptor else None, e.action, e.reason)
        for e in ssn.outcome.evictions
    }
    assert made == {
        "low-0": ("high-0", "preempt", "preempt"),
        "low-1": ("high-1", "preempt", "preempt"),
    }


def test_an_eviction_with_nothing_placed_after_it_has_no_preemptor() -> None:
    ssn = make_session(two_jobs_on_one_node(), conf("allocate", ["gang"]))
    stmt = ssn.statement()
    stmt.pipeline(session_task(ssn, "high-0"), "n1")
    stmt.evict(session_task(ssn, "low-0"), "shuffle")
    stmt.commit("shuffle")
    [eviction] = ssn.outcome.evictions
    assert eviction.preemptor is None


def test_the_scheduler_records_evictions_carried_out(tmp_path: Path) -> None:
    config = conf(
        "enqueue, allocate, preempt",
        ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"],
        ["drf", "proportion"],
    )

    async def scenario() -> Scheduler:
        cluster = await Cluster(tmp_path, config).start()
        await cluster.add(
            priority_class("high-priority", 1000),
            node("n1", cpu="4"),
            podgroup("low", 1),
            pod("low-0", group="low", cpu="2"),
            pod("low-1", group="low", cpu="2"),
        )
        await cluster.run(2)
        urgent = podgroup("urgent", 1, priority_class="high-priority")
        await cluster.add(
            urgent,
            pod("urgent-0", group="urgent", cpu="2", priority_class="high-priority", priority=1000),
        )
        await cluster.run(3)
        return cluster.scheduler

    scheduler = asyncio.run(scenario())
    records = list(scheduler.recent_evictions)
    assert records, "the urgent pod preempts one of the low pods"
    first = records[0]
    assert first.victim.startswith("default/low-") and first.victim_job == "default/low"
    assert first.preemptor == "default/urgent-0" and first.preemptor_job == "default/urgent"
    assert first.reason == "preempt" and first.victim_queue == "default"
    assert scheduler.recent_evictions.maxlen == RECENT_EVICTIONS

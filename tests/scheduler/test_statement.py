"""Statements: operations change the session at once; commit hands them out, discard undoes
them exactly (reference §3.3 "Statement")."""

from __future__ import annotations

import numpy as np

from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.session import EventHandler, Session

from .builders import conf, make_session, node, pod, podgroup, session_task

S = TaskStatus


def cluster(config: str | None = None) -> Session:
    objects = [
        node("n1", cpu="4", memory="8Gi"),
        node("n2", cpu="4", memory="8Gi"),
        podgroup("pg", 2, phase="Running"),
        pod("pg-a-0", group="pg", uid="a0", cpu="1", memory="1Gi"),
        pod("pg-a-1", group="pg", uid="a1", cpu="2", memory="1Gi"),
        pod("pg-r-0", group="pg", uid="r0", cpu="1", memory="2Gi", node_name="n2", phase="Running"),
        pod("pg-r-1", group="pg", uid="r1", cpu="1", memory="2Gi", node_name="n2", phase="Running"),
    ]
    return make_session(objects, config or conf("allocate", ["gang"]))


def arrays(ssn: Session) -> dict[str, np.ndarray]:
    t = ssn.nodes
    return {
        "used": t.used.copy(),
        "releasing": t.releasing.copy(),
        "pipelined": t.pipelined.copy(),
        "idle": t.idle().copy(),
        "future_idle": t.future_idle().copy(),
    }


def job_state(ssn: Session) -> dict:
    job = ssn.jobs["default/pg"]
    return {
        "statuses": {uid: t.status for uid, t in job.tasks.items()},
        "nodes": {uid: t.node_name for uid, t in job.tasks.items()},
        "index": {s: sorted(bucket) for s, bucket in job.by_status.items() if bucket},
        "allocated": dict(job.allocated.amounts),
        "node_tasks": [sorted(n.tasks) for n in ssn.nodes.nodes],
    }


def assert_same(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> None:
    for name in before:
        assert np.array_equal(before[name], after[name]), name


def test_allocate_changes_the_session_immediately() -> None:
    ssn = cluster()
    t = session_task(ssn, "pg-a-0")
    stmt = ssn.statement()
    stmt.allocate(t, "n1")
    assert t.status == S.ALLOCATED
    assert t.node_name == "n1"
    assert ssn.nodes.used[0][0] == 1000
    assert ssn.nodes.used[0][2] == 1  # one pod
    assert t.uid in ssn.nodes.nodes[0].tasks
    assert ssn.jobs["default/pg"].allocated.milli_cpu == 3000


def test_pipeline_reserves_future_idle_only() -> None:
    ssn = cluster()
    t = session_task(ssn, "pg-a-1")
    used = ssn.nodes.used.copy()
    ssn.statement().pipeline(t, "n1")
    assert t.status == S.PIPELINED
    assert t.nominated_node == "n1"
    assert np.array_equal(ssn.nodes.used, used)
    assert ssn.nodes.pipelined[0][0] == 2000
    assert ssn.nodes.future_idle()[0][0] == 2000


def test_evict_makes_the_task_releasing() -> None:
    ssn = cluster()
    t = session_task(ssn, "pg-r-0")
    used = ssn.nodes.used.copy()
    ssn.statement().evict(t, "preempted")
    assert t.status == S.RELEASING
    assert np.array_equal(ssn.nodes.used, used)  # still on its node until it is gone
    assert ssn.nodes.releasing[1][0] == 1000
    assert ssn.nodes.future_idle()[1][0] == 3000


def test_discard_restores_everything_exactly() -> None:
    ssn = cluster()
    before_arrays, before_job = arrays(ssn), job_state(ssn)
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "pg-a-0"), "n1")
    stmt.evict(session_task(ssn, "pg-r-0"), "reason")
    stmt.pipeline(session_task(ssn, "pg-a-1"), "n2")
    assert job_state(ssn) != before_job
    stmt.discard()
    assert_same(before_arrays, arrays(ssn))
    assert job_state(ssn) == before_job
    assert session_task(ssn, "pg-a-1").nominated_node == ""
    assert stmt.operations == []
    assert ssn.outcome.binds == []
    assert ssn.outcome.evictions == []


def test_discard_restores_allocated_resources_of_the_job() -> None:
    ssn = cluster()
    job = ssn.jobs["default/pg"]
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "pg-a-0"), "n1")
    stmt.allocate(session_task(ssn, "pg-a-1"), "n1")
    assert job.allocated.milli_cpu == 5000
    stmt.discard()
    assert job.allocated.milli_cpu == 2000
    assert job.count(S.PENDING) == 2


def test_commit_dispatches_allocations_in_order() -> None:
    ssn = cluster()
    a0, a1 = session_task(ssn, "pg-a-0"), session_task(ssn, "pg-a-1")
    stmt = ssn.statement()
    stmt.allocate(a0, "n1")
    stmt.allocate(a1, "n2")
    stmt.commit("allocate")
    assert a0.status == S.BINDING
    assert a1.status == S.BINDING
    assert [(t.name, n) for t, n in ssn.outcome.binds] == [("pg-a-0", "n1"), ("pg-a-1", "n2")]
    assert stmt.operations == []


def test_commit_keeps_pipelined_tasks_in_the_session_only() -> None:
    ssn = cluster()
    t = session_task(ssn, "pg-a-0")
    stmt = ssn.statement()
    stmt.pipeline(t, "n1")
    stmt.commit("allocate")
    assert t.status == S.PIPELINED
    assert ssn.outcome.binds == []


def test_commit_hands_evictions_out() -> None:
    ssn = cluster()
    t = session_task(ssn, "pg-r-1")
    stmt = ssn.statement()
    stmt.evict(t, "reclaimed")
    stmt.commit("reclaim")
    assert len(ssn.outcome.evictions) == 1
    eviction = ssn.outcome.evictions[0]
    assert (eviction.task, eviction.reason, eviction.action) == (t, "reclaimed", "reclaim")


def test_discard_after_commit_changes_nothing() -> None:
    ssn = cluster()
    t = session_task(ssn, "pg-a-0")
    stmt = ssn.statement()
    stmt.allocate(t, "n1")
    stmt.commit()
    stmt.discard()
    assert t.status == S.BINDING
    assert t.node_name == "n1"


def test_merge_moves_operations() -> None:
    ssn = cluster()
    outer, inner = ssn.statement(), ssn.statement()
    inner.allocate(session_task(ssn, "pg-a-0"), "n1")
    outer.merge(inner)
    assert inner.operations == []
    assert [op.kind for op in outer.operations] == ["allocate"]
    outer.discard()
    assert session_task(ssn, "pg-a-0").status == S.PENDING


def test_event_handlers_follow_operations_and_their_undoing() -> None:
    ssn = cluster()
    seen: list[tuple[str, str]] = []
    ssn.add_event_handler(
        EventHandler(
            allocate=lambda t: seen.append(("+", t.name)),
            deallocate=lambda t: seen.append(("-", t.name)),
        )
    )
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "pg-a-0"), "n1")
    stmt.pipeline(session_task(ssn, "pg-a-1"), "n1")
    stmt.evict(session_task(ssn, "pg-r-0"), "x")
    stmt.discard()
    assert seen == [
        ("+", "pg-a-0"),
        ("+", "pg-a-1"),
        ("-", "pg-r-0"),
        ("+", "pg-r-0"),
        ("-", "pg-a-1"),
        ("-", "pg-a-0"),
    ]


def test_discard_restores_drf_shares() -> None:
    ssn = cluster(conf("allocate", ["gang", "drf"]))
    drf = ssn.plugins["drf"]
    before = dict(drf.shares)
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "pg-a-1"), "n1")
    assert drf.shares["default/pg"] > before["default/pg"]
    stmt.discard()
    assert drf.shares == before


# -- allocation outside a statement (backfill) --------------------------------------------------


def gang_of_two() -> Session:
    objects = [
        node("n1", cpu="4"),
        podgroup("g", 2, phase="Inqueue"),
        pod("g-0", group="g", uid="g0"),
        pod("g-1", group="g", uid="g1", cpu="1"),
    ]
    return make_session(objects, conf("backfill", ["gang"]))


def test_session_allocate_waits_for_the_job_to_be_ready() -> None:
    ssn = make_session(
        [
            node("n1", cpu="4"),
            podgroup("g", 2, phase="Inqueue"),
            pod("g-0", group="g", uid="g0", cpu="1"),
            pod("g-1", group="g", uid="g1", cpu="1"),
        ],
        conf("backfill", ["gang"]),
    )
    first, second = session_task(ssn, "g-0"), session_task(ssn, "g-1")
    ssn.allocate(first, "n1")
    assert first.status == S.ALLOCATED
    assert ssn.outcome.binds == []
    ssn.allocate(second, "n1")
    assert {t.name for t, _ in ssn.outcome.binds} == {"g-0", "g-1"}
    assert first.status == second.status == S.BINDING


def test_session_allocate_counts_pending_best_effort_toward_readiness() -> None:
    ssn = gang_of_two()
    ssn.allocate(session_task(ssn, "g-1"), "n1")
    # g-0 asks for nothing and is still Pending: the gang counts it, so g-1 goes out now.
    assert [t.name for t, _ in ssn.outcome.binds] == ["g-1"]

"""priority: higher-priority jobs and tasks first; lower-priority work is the victim."""

from __future__ import annotations

from pathlib import Path

from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.session import PERMIT, Session
from stromboli.core.scheduler.plugins.priority import PriorityPlugin

from ..builders import (
    Cluster,
    conf,
    job_info,
    make_session,
    node,
    pod,
    podgroup,
    priority_class,
    session_task,
    task,
)

PRIORITY = conf("enqueue, allocate", ["priority", "gang"])


def two_jobs(low: int, high: int) -> Session:
    return make_session(
        [
            priority_class("low", low),
            priority_class("high", high),
            podgroup("old", 1, priority_class="low", created="1970-01-01T00:00:01Z"),
            podgroup("new", 1, priority_class="high", created="1970-01-01T00:00:02Z"),
            pod("old-0", group="old", uid="o0", cpu="1", priority=low),
            pod("new-0", group="new", uid="n0", cpu="1", priority=high),
        ],
        conf("allocate", ["priority"]),
    )


def test_higher_priority_job_orders_first() -> None:
    ssn = two_jobs(10, 1000)
    old, new = ssn.jobs["default/old"], ssn.jobs["default/new"]
    assert ssn.job_less(new, old)
    assert not ssn.job_less(old, new)


def test_equal_priority_falls_back_to_creation() -> None:
    ssn = two_jobs(10, 10)
    assert ssn.job_less(ssn.jobs["default/old"], ssn.jobs["default/new"])


def test_higher_priority_task_orders_first() -> None:
    ssn = two_jobs(10, 1000)
    assert ssn.task_less(session_task(ssn, "new-0"), session_task(ssn, "old-0"))


def test_disabled_job_order_leaves_creation_order() -> None:
    ssn = make_session(
        [
            priority_class("high", 1000),
            podgroup("old", 1, created="1970-01-01T00:00:01Z"),
            podgroup("new", 1, priority_class="high", created="1970-01-01T00:00:02Z"),
        ],
        conf("allocate", [{"name": "priority", "enableJobOrder": False}]),
    )
    assert ssn.job_less(ssn.jobs["default/old"], ssn.jobs["default/new"])


def test_job_starving_until_every_task_has_a_place() -> None:
    statuses = [TaskStatus.RUNNING, TaskStatus.PIPELINED, TaskStatus.PENDING]
    tasks = []
    for i, status in enumerate(statuses):
        t = task(f"t-{i}", cpu="1")
        t.status = status
        tasks.append(t)
    assert PriorityPlugin.job_starving(job_info(1, tasks))
    tasks[2].status = TaskStatus.ALLOCATED
    assert not PriorityPlugin.job_starving(job_info(1, tasks))


def test_victims_are_lower_priority_jobs_or_lower_priority_tasks_of_the_same_job() -> None:
    ssn = make_session(
        [
            node("n1", cpu="8"),
            priority_class("low", 10),
            priority_class("mid", 100),
            podgroup("low", 1, priority_class="low", phase="Running"),
            podgroup("peer", 1, priority_class="mid", phase="Running"),
            podgroup("me", 1, priority_class="mid", phase="Running"),
            pod("low-0", group="low", uid="l0", cpu="1", node_name="n1", phase="Running"),
            pod("peer-0", group="peer", uid="p0", cpu="1", node_name="n1", phase="Running"),
            pod("me-0", group="me", uid="m0", cpu="1", priority=1, node_name="n1", phase="Running"),
            pod("me-1", group="me", uid="m1", cpu="1", priority=5, node_name="n1", phase="Running"),
            pod("me-2", group="me", uid="m2", cpu="1", priority=5),
        ],
        conf("allocate", ["priority"]),
    )
    fn = ssn._callbacks["preemptable"]["priority"]
    candidates = [session_task(ssn, n) for n in ("low-0", "peer-0", "me-0", "me-1")]
    chosen, vote = fn(session_task(ssn, "me-2"), candidates)
    assert vote == PERMIT
    assert [t.name for t in chosen] == ["low-0", "me-0"]


async def test_higher_priority_job_is_bound_first(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, PRIORITY).start()
    await c.add(
        node("n1", cpu="2"),
        priority_class("low", 10),
        priority_class("high", 1000),
        podgroup("old", 1, priority_class="low"),
        pod("old-0", group="old", cpu="2"),
        podgroup("new", 1, priority_class="high"),
        pod("new-0", group="new", cpu="2"),
    )
    assert (await c.run()).bound == 1
    assert await c.node_of("new-0") == "n1"
    assert await c.node_of("old-0") == ""


async def test_global_default_priority_class_applies_to_groups_without_one(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, PRIORITY).start()
    await c.add(
        node("n1", cpu="2"),
        priority_class("base", 100, global_default=True),
        priority_class("low", 10),
        podgroup("old", 1, priority_class="low"),
        pod("old-0", group="old", cpu="2"),
        podgroup("plain", 1),
        pod("plain-0", group="plain", cpu="2"),
    )
    await c.run()
    assert await c.node_of("plain-0") == "n1"


async def test_higher_priority_task_is_placed_first_within_a_job(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, PRIORITY).start()
    await c.add(
        node("n1", cpu="2"),
        podgroup("pg", 1),
        pod("pg-0", group="pg", cpu="2", priority=1),
        pod("pg-1", group="pg", cpu="2", priority=50),
    )
    await c.run()
    assert (await c.node_of("pg-0"), await c.node_of("pg-1")) == ("", "n1")

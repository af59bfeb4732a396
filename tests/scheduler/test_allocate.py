"""allocate and backfill through the real scheduler on an in-memory store (reference §3.4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stromboli.core.scheduler.actions.allocate import need_continue
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.conf import DEFAULT_CONFIG

from .builders import BASIC_CONF, Cluster, conf, job_info, node, pod, podgroup, queue, task


async def cluster(tmp_path: Path, config: str = BASIC_CONF, *objects: dict) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(*objects)
    return c


async def bound(c: Cluster, *names: str) -> dict[str, str]:
    return {name: await c.node_of(name) for name in names}


# -- gang: all or nothing --------------------------------------------------------------------


async def test_gang_that_does_not_fit_binds_nothing(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="2") for i in range(3)],
    )
    stats = await c.run()
    assert stats.bound == 0
    assert await bound(c, "pg-0", "pg-1", "pg-2") == {"pg-0": "", "pg-1": "", "pg-2": ""}
    # Nothing is kept half-placed for the next cycle either.
    await c.run(2)
    assert await bound(c, "pg-0", "pg-1", "pg-2") == {"pg-0": "", "pg-1": "", "pg-2": ""}


async def test_gang_that_fits_binds_every_member(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("pg", 4),
        *[pod(f"pg-{i}", group="pg", cpu="2") for i in range(4)],
    )
    stats = await c.run()
    assert stats.bound == 4
    placed = await bound(c, "pg-0", "pg-1", "pg-2", "pg-3")
    assert all(placed.values())
    assert sorted(placed.values()) == ["n1", "n1", "n2", "n2"]


async def test_gang_beyond_min_member_binds_what_fits(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        podgroup("pg", 1),
        *[pod(f"pg-{i}", group="pg", cpu="2") for i in range(3)],
    )
    stats = await c.run()
    assert stats.bound == 2
    assert sorted((await bound(c, "pg-0", "pg-1", "pg-2")).values()) == ["", "n1", "n1"]


async def test_gang_waits_until_room_appears(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="2"),
        podgroup("pg", 2),
        *[pod(f"pg-{i}", group="pg", cpu="2") for i in range(2)],
    )
    await c.run()
    assert (await c.run()).bound == 0
    await c.add(node("n2", cpu="2"))
    assert (await c.run()).bound == 2


async def test_one_gang_fits_the_other_waits(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        podgroup("a", 2),
        podgroup("b", 2),
        *[pod(f"a-{i}", group="a", cpu="2") for i in range(2)],
        *[pod(f"b-{i}", group="b", cpu="2") for i in range(2)],
    )
    stats = await c.run()
    assert stats.bound == 2
    placed = await bound(c, "a-0", "a-1", "b-0", "b-1")
    # The older group wins; no pod of the other is bound.
    assert placed == {"a-0": "n1", "a-1": "n1", "b-0": "", "b-1": ""}


async def test_gang_with_default_config(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        DEFAULT_CONFIG,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("fits", 2),
        podgroup("big", 3),
        *[pod(f"fits-{i}", group="fits", cpu="2") for i in range(2)],
        *[pod(f"big-{i}", group="big", cpu="3") for i in range(3)],
    )
    await c.run()
    assert all((await bound(c, "fits-0", "fits-1")).values())
    assert not any((await bound(c, "big-0", "big-1", "big-2")).values())


async def test_pods_already_running_count_toward_the_gang(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        podgroup("pg", 2, phase="Running"),
        pod("pg-0", group="pg", cpu="2", node_name="n1", phase="Running"),
        pod("pg-1", group="pg", cpu="2"),
    )
    stats = await c.run()
    assert stats.bound == 1
    assert await c.node_of("pg-1") == "n1"


async def test_running_pods_of_other_schedulers_use_node_room(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        pod("system", cpu="3", node_name="n1", phase="Running", scheduler="default-scheduler"),
        podgroup("pg", 1),
        pod("pg-0", group="pg", cpu="2"),
    )
    assert (await c.run()).bound == 0
    assert await c.node_of("pg-0") == ""


async def test_resource_fit_includes_memory_and_extended_resources(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("cpu-only", cpu="16", memory="64Gi"),
        node("gpu", cpu="16", memory="64Gi", extra={"nvidia.com/gpu": "4"}),
        podgroup("pg", 1),
        pod("pg-0", group="pg", cpu="1", extra={"nvidia.com/gpu": "2"}),
    )
    await c.run()
    assert await c.node_of("pg-0") == "gpu"


async def test_bind_writes_node_name_and_scheduled_event(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path, BASIC_CONF, node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1")
    )
    await c.run()
    scheduled = await c.events(reason="Scheduled", name="pg-0")
    assert len(scheduled) == 1
    assert scheduled[0]["type"] == "Normal"
    assert scheduled[0]["message"] == "Successfully assigned default/pg-0 to n1"


# -- without an enqueue action -----------------------------------------------------------------


async def test_allocate_alone_promotes_pending_podgroups(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        conf("allocate", ["priority", "gang"], ["drf", "proportion"]),
        node("n1", cpu="4"),
        podgroup("pg", 2),
        *[pod(f"pg-{i}", group="pg", cpu="1") for i in range(2)],
    )
    stats = await c.run()
    assert stats.bound == 2
    # Promoted and bound in one cycle: the status written already counts the bound pods.
    assert (await c.pg("pg"))["status"]["phase"] == "Running"


async def test_allocate_after_enqueue_skips_pending_podgroups(tmp_path: Path) -> None:
    # With an enqueue action, a group enqueue refuses stays Pending and allocate leaves it.
    c = await cluster(
        tmp_path,
        conf("enqueue, allocate", ["gang"], ["overcommit"]),
        node("n1", cpu="4"),
        podgroup("pg", 1, min_resources={"cpu": "100"}),
        pod("pg-0", group="pg", cpu="1"),
    )
    assert (await c.run()).bound == 0
    assert (await c.pg("pg"))["status"]["phase"] == "Pending"


# -- queues --------------------------------------------------------------------------------------


async def test_allocate_skips_a_closed_queue(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="8"),
        queue("shut", state="Closed"),
        queue("open"),
        podgroup("a", 1, queue="shut"),
        pod("a-0", group="a", cpu="1"),
        podgroup("b", 1, queue="open"),
        pod("b-0", group="b", cpu="1"),
    )
    await c.run(2)
    assert await c.node_of("a-0") == ""
    assert await c.node_of("b-0") == "n1"


async def test_podgroup_in_a_missing_queue_is_ignored(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1"),
        podgroup("lost", 1, queue="nowhere"),
        pod("lost-0", group="lost", cpu="1"),
    )
    await c.run()
    assert await c.node_of("lost-0") == ""
    assert "status" not in await c.pg("lost")


# -- invalid jobs --------------------------------------------------------------------------------


async def test_too_few_pods_for_min_member_is_invalid(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="1") for i in range(2)],
    )
    assert (await c.run()).bound == 0
    conditions = (await c.pg("pg"))["status"]["conditions"]
    # Volcano skips the invalid job and reports it at session close as a gang short of pods
    # (its jobValid reason, NotEnoughTasks, is written nowhere).
    assert [(x["type"], x["reason"], x["message"]) for x in conditions] == [
        (
            "Unschedulable",
            "NotEnoughResources",
            "3/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, "
            "3 minAvailable; Pending: 2 Unschedulable",
        )
    ]


async def test_role_short_of_its_minimum_is_invalid(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1"),
        podgroup("pg", 3, min_task_member={"ps": 1, "worker": 2}),
        pod("pg-ps-0", group="pg", cpu="1", role="ps"),
        pod("pg-worker-0", group="pg", cpu="1", role="worker"),
        pod("pg-worker-1", group="pg", cpu="1", role="ps"),
    )
    assert (await c.run()).bound == 0
    condition = (await c.pg("pg"))["status"]["conditions"][0]
    # NotEnoughPodsOfTask stays gang's jobValid reason only, as in Volcano.
    assert condition["reason"] == "NotEnoughResources"
    assert condition["message"] == (
        "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
        "Pending: 3 Unschedulable"
    )


async def test_roles_that_meet_their_minimum_are_bound(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="8"),
        podgroup("pg", 3, min_task_member={"ps": 1, "worker": 2}),
        pod("pg-ps-0", group="pg", cpu="1", role="ps"),
        pod("pg-worker-0", group="pg", cpu="1", role="worker"),
        pod("pg-worker-1", group="pg", cpu="1", role="worker"),
    )
    assert (await c.run()).bound == 3


# -- backfill ------------------------------------------------------------------------------------


async def test_backfill_places_best_effort_pods(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path, BASIC_CONF, node("n1", cpu="1"), podgroup("be", 1), pod("be-0", group="be")
    )
    stats = await c.run()
    assert stats.bound == 1
    assert await c.node_of("be-0") == "n1"


async def test_best_effort_pods_fit_on_a_full_node(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="2"),
        pod("hog", cpu="2", node_name="n1", phase="Running", scheduler="default-scheduler"),
        podgroup("be", 2),
        pod("be-0", group="be"),
        pod("be-1", group="be"),
    )
    assert (await c.run()).bound == 2


async def test_backfill_needs_the_backfill_action(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        conf("enqueue, allocate", ["gang"], ["proportion"]),
        node("n1"),
        podgroup("be", 1),
        pod("be-0", group="be"),
    )
    assert (await c.run(2)).bound == 0
    assert await c.node_of("be-0") == ""


async def test_best_effort_member_completes_a_gang(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="2"),
        podgroup("mix", 2),
        pod("mix-0", group="mix", cpu="2"),
        pod("mix-1", group="mix"),
    )
    assert (await c.run()).bound == 2
    assert await bound(c, "mix-0", "mix-1") == {"mix-0": "n1", "mix-1": "n1"}


async def test_backfill_respects_the_pod_count_of_nodes(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        DEFAULT_CONFIG,
        node("n1", pods="1"),
        podgroup("be", 1),
        pod("be-0", group="be"),
        pod("be-1", group="be"),
    )
    assert (await c.run()).bound == 1


# -- a member that fits nowhere --------------------------------------------------------------------


async def test_elastic_job_places_members_after_one_that_fits_nowhere(tmp_path: Path) -> None:
    # pg-0 is tried first (lower index) and fits no node, though the queue has room for it;
    # minMember 1 can still be met by pg-1.
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("pg", 1),
        pod("pg-0", group="pg", cpu="5"),
        pod("pg-1", group="pg", cpu="1"),
    )
    assert (await c.run()).bound == 1
    assert (await c.node_of("pg-0"), await c.node_of("pg-1")) == ("", "n1")


async def test_full_gang_stops_at_the_first_member_that_fits_nowhere(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("pg", 2),
        pod("pg-0", group="pg", cpu="5"),
        pod("pg-1", group="pg", cpu="1"),
    )
    stats = await c.run()
    assert stats.bound == 0
    assert stats.session is not None
    job = stats.session.jobs["default/pg"]
    # pg-1 was never tried: a gang needing every member cannot be completed.
    assert [t.name for t in job.tasks.values() if t.uid in job.fit_errors] == ["pg-0"]


async def test_role_that_cannot_reach_its_minimum_stops_the_job(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("pg", 2, min_task_member={"ps": 1, "worker": 1}),
        pod("pg-ps-0", group="pg", cpu="5", role="ps"),
        pod("pg-worker-0", group="pg", cpu="1", role="worker"),
        pod("pg-worker-1", group="pg", cpu="1", role="worker"),
    )
    assert (await c.run()).bound == 0


async def test_other_roles_go_on_when_the_failed_role_has_enough(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        node("n2", cpu="8"),
        podgroup("pg", 2, min_task_member={"ps": 1, "worker": 1}),
        pod("pg-ps-0", group="pg", cpu="6", role="ps"),
        pod("pg-ps-1", group="pg", cpu="6", role="ps"),
        pod("pg-worker-5", group="pg", cpu="1", role="worker"),
    )
    # One ps fits (n2), the second fits nowhere; the worker, tried last, still gets placed.
    assert (await c.run()).bound == 2
    assert await c.node_of("pg-worker-5") == "n1"


def _job(min_available: int, roles: list[tuple[str, TaskStatus]], **kw: Any) -> JobInfo:
    tasks = []
    for i, (role, status) in enumerate(roles):
        t = task(f"t-{i}", cpu="1", role=role or None)
        t.status = status
        tasks.append(t)
    return job_info(min_available, tasks, **kw)


P, R = TaskStatus.PENDING, TaskStatus.ALLOCATED


def test_need_continue_stops_when_every_member_is_needed() -> None:
    assert not need_continue(_job(2, [("", P), ("", P)]), {""})


def test_need_continue_without_roles_goes_on() -> None:
    assert need_continue(_job(1, [("", P), ("", P)]), {""})


def test_need_continue_checks_the_failed_roles_minimum() -> None:
    tmm = {"ps": 1, "worker": 1}
    assert not need_continue(
        _job(2, [("ps", P), ("worker", P), ("worker", P)], min_task_member=tmm), {"ps"}
    )
    assert need_continue(
        _job(2, [("ps", R), ("ps", P), ("worker", P)], min_task_member=tmm), {"ps"}
    )


def test_need_continue_counts_what_other_roles_could_add() -> None:
    # minAvailable 2 < 1 + 2: roles are not checked, only whether enough others are left.
    tmm = {"ps": 1, "worker": 2}
    roles = [("ps", P), ("worker", P), ("worker", P)]
    assert need_continue(_job(2, roles, min_task_member=tmm), {"ps"})
    assert not need_continue(_job(2, roles, min_task_member=tmm), {"ps", "worker"})

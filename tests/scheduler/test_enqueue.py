"""enqueue: Pending PodGroups are admitted (phase Inqueue) while the plugins' votes allow
(reference §3.4 enqueue, §3.5 overcommit/proportion)."""

from __future__ import annotations

from pathlib import Path

from stromboli.core.scheduler.actions.enqueue import EnqueueAction
from stromboli.core.scheduler.api.resource import Resource

from .builders import (
    BASIC_CONF,
    Cluster,
    conf,
    make_session,
    node,
    pg_condition,
    pod,
    podgroup,
    priority_class,
    queue,
)

#: enqueue gated by overcommit only (proportion would also cap at the real cluster size).
OVERCOMMIT = conf("enqueue", ["priority", "gang"], ["overcommit"])


def overcommit(factor: float) -> str:
    return conf(
        "enqueue",
        ["priority", "gang"],
        [{"name": "overcommit", "arguments": {"overcommit-factor": factor}}],
    )


async def start(tmp_path: Path, config: str, *objects: dict) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(*objects)
    return c


async def phase(c: Cluster, name: str) -> str:
    return ((await c.pg(name)).get("status") or {}).get("phase", "")


async def test_podgroup_without_min_resources_is_always_admitted(tmp_path: Path) -> None:
    c = await start(tmp_path, OVERCOMMIT, podgroup("pg", 5))
    await c.run()
    assert await phase(c, "pg") == "Inqueue"


async def test_podgroup_that_fits_is_admitted(tmp_path: Path) -> None:
    c = await start(
        tmp_path, OVERCOMMIT, node("n1", cpu="4"), podgroup("pg", 1, min_resources={"cpu": "4"})
    )
    await c.run()
    assert await phase(c, "pg") == "Inqueue"


async def test_default_factor_admits_up_to_120_percent(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        OVERCOMMIT,
        node("n1", cpu="4"),
        podgroup("in", 1, min_resources={"cpu": "4800m"}),
    )
    await c.run()
    assert await phase(c, "in") == "Inqueue"


async def test_podgroup_beyond_the_factor_stays_pending(tmp_path: Path) -> None:
    c = await start(
        tmp_path, OVERCOMMIT, node("n1", cpu="4"), podgroup("big", 1, min_resources={"cpu": "5"})
    )
    await c.run()
    assert await phase(c, "big") == "Pending"
    events = await c.events(reason="Unschedulable", name="big")
    overused = [
        e for e in events if e["message"] == "resource in cluster is overused: overused cpu"
    ]
    assert [(e["type"], e["involvedObject"]["kind"]) for e in overused] == [("Normal", "PodGroup")]


async def test_larger_factor_admits_more(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        overcommit(2.0),
        node("n1", cpu="4"),
        podgroup("big", 1, min_resources={"cpu": "8"}),
    )
    await c.run()
    assert await phase(c, "big") == "Inqueue"


async def test_factor_below_one_means_the_default(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        overcommit(0.5),
        node("n1", cpu="4"),
        podgroup("in", 1, min_resources={"cpu": "4500m"}),
        podgroup("out", 1, min_resources={"cpu": "5"}),
    )
    await c.run()
    assert await phase(c, "in") == "Inqueue"
    assert await phase(c, "out") == "Pending"


async def test_admitted_groups_use_up_the_room(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        OVERCOMMIT,
        node("n1", cpu="4"),
        podgroup("first", 1, min_resources={"cpu": "3"}),
        podgroup("second", 1, min_resources={"cpu": "3"}),
    )
    await c.run()
    # 3 + 3 > 4 × 1.2: the older group is admitted, the other waits.
    assert (await phase(c, "first"), await phase(c, "second")) == ("Inqueue", "Pending")
    # Still waiting while the first is inqueue.
    await c.run()
    assert await phase(c, "second") == "Pending"


async def test_used_resources_reduce_the_room(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        OVERCOMMIT,
        node("n1", cpu="4"),
        pod("hog", cpu="2", node_name="n1", phase="Running", scheduler="default-scheduler"),
        podgroup("pg", 1, min_resources={"cpu": "3"}),
    )
    await c.run()
    # 4 × 1.2 − 2 = 2.8 < 3.
    assert await phase(c, "pg") == "Pending"


async def test_only_requested_dimensions_are_compared(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        OVERCOMMIT,
        node("n1", cpu="4", memory="1Gi"),
        pod("hog", memory="1Gi", node_name="n1", phase="Running", scheduler="default-scheduler"),
        podgroup("pg", 1, min_resources={"cpu": "1"}),
    )
    await c.run()
    assert await phase(c, "pg") == "Inqueue"


async def test_enqueue_marks_inqueue_and_allocate_binds_in_the_same_cycle(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        BASIC_CONF,
        node("n1", cpu="4"),
        podgroup("pg", 2, min_resources={"cpu": "2"}),
        *[pod(f"pg-{i}", group="pg", cpu="1") for i in range(2)],
    )
    assert (await c.run()).bound == 2


async def test_proportion_rejects_beyond_the_real_capability(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        conf("enqueue", ["gang"], ["proportion"]),
        node("n1", cpu="4"),
        podgroup("big", 1, min_resources={"cpu": "4500m"}),
        podgroup("small", 1, min_resources={"cpu": "4"}),
    )
    await c.run()
    assert (await phase(c, "big"), await phase(c, "small")) == ("Pending", "Inqueue")


async def test_proportion_rejects_a_closed_queue(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        conf("enqueue", ["gang"], ["proportion"]),
        node("n1", cpu="4"),
        queue("shut", state="Closed"),
        podgroup("pg", 1, queue="shut", min_resources={"cpu": "1"}),
    )
    await c.run()
    assert await phase(c, "pg") == "Pending"


async def test_proportion_counts_capability(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        conf("enqueue", ["gang"], ["proportion"]),
        node("n1", cpu="8"),
        queue("small", capability={"cpu": "2"}),
        podgroup("a", 1, queue="small", min_resources={"cpu": "2"}),
        podgroup("b", 1, queue="small", min_resources={"cpu": "1"}),
    )
    await c.run()
    assert (await phase(c, "a"), await phase(c, "b")) == ("Inqueue", "Pending")


async def test_already_admitted_groups_are_left_alone(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        OVERCOMMIT,
        node("n1", cpu="1"),
        podgroup("in", 1, phase="Inqueue", min_resources={"cpu": "100"}),
    )
    stats = await c.run()
    assert await phase(c, "in") == "Inqueue"
    assert stats.session is not None
    assert stats.session.enqueued == set()


def test_enqueue_follows_queue_then_job_order() -> None:
    ssn = make_session(
        [
            node("n1", cpu="4"),
            queue("qa", created="1970-01-01T00:00:01Z"),
            queue("qb", created="1970-01-01T00:00:02Z"),
            podgroup("a1", 1, queue="qa", created="1970-01-01T00:00:01Z"),
            podgroup("a2", 1, queue="qa", created="1970-01-01T00:00:02Z"),
            podgroup("b1", 1, queue="qb", created="1970-01-01T00:00:03Z"),
        ],
        conf("enqueue", ["gang"]),
    )
    order: list[str] = []
    ssn.register("job_enqueued", "gang", lambda job: order.append(job.name))
    # Give every group minResources so that the plugins are asked.
    for job in ssn.jobs.values():
        job.min_resources = Resource({"cpu": 1.0})
    EnqueueAction().execute(ssn)
    # One job per queue visit; the queue is then ordered again (here by creation: qa first).
    assert order == ["a1", "a2", "b1"]
    assert ssn.enqueued == {"default/a1", "default/a2", "default/b1"}
    assert all(job.phase == "Inqueue" for job in ssn.jobs.values())


async def test_admission_is_written_without_any_condition_change(tmp_path: Path) -> None:
    # No gang plugin, so no condition changes: the phase alone must still reach the store.
    c = await start(
        tmp_path,
        conf("enqueue", ["overcommit"]),
        node("n1", cpu="2"),
        podgroup("pg", 1, min_resources={"cpu": "1"}),
    )
    await c.run()
    assert await phase(c, "pg") == "Inqueue"


async def test_admission_after_a_refusal_is_written(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        OVERCOMMIT,
        node("n1", cpu="2"),
        pod("hog", cpu="2", node_name="n1", phase="Running", scheduler="default-scheduler"),
        podgroup("pg", 1, min_resources={"cpu": "2"}),
    )
    await c.run()
    assert await phase(c, "pg") == "Pending"
    before = pg_condition(await c.pg("pg"), "Unschedulable")
    await c.store.delete("v1", "Pod", "hog", "default")
    await c.run()
    # Same gang condition as before; the phase change alone is written.
    assert pg_condition(await c.pg("pg"), "Unschedulable") == before
    assert await phase(c, "pg") == "Inqueue"


async def test_higher_priority_group_is_admitted_first(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        OVERCOMMIT,
        node("n1", cpu="4"),
        priority_class("high", 1000),
        podgroup("old", 1, min_resources={"cpu": "3"}),
        podgroup("urgent", 1, priority_class="high", min_resources={"cpu": "3"}),
    )
    await c.run()
    assert (await phase(c, "old"), await phase(c, "urgent")) == ("Pending", "Inqueue")

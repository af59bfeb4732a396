"""gangreclaim through the real scheduler on an in-memory store (reference §3.4; the e2e
checklist's GR-1..GR-7 without HyperNodes).

As in Volcano's e2e configuration for these actions, the queue plugin sits in the first tier,
so its verdict on victims (deserved share, guarantee) is part of the tier that decides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stromboli.core.scheduler.scheduler import CycleStats

from .builders import Cluster, conf, node, pod, podgroup, priority_class, queue

CAPACITY_CONF = conf(
    "enqueue, allocate, gangreclaim, backfill",
    ["priority", "gang", "conformance", "capacity"],
    ["overcommit", {"name": "drf", "enablePreemptable": False}, "predicates"],
)
PROPORTION_CONF = conf(
    "enqueue, allocate, gangreclaim, backfill",
    ["priority", "gang", "conformance", "proportion"],
    ["overcommit", {"name": "drf", "enablePreemptable": False}, "predicates"],
)


def capacity_queue(
    name: str, deserved: str, *, guarantee: str | None = None, **queue_args: Any
) -> dict:
    obj = queue(name, guarantee={"cpu": guarantee} if guarantee else None, **queue_args)
    obj["spec"]["deserved"] = {"cpu": deserved}
    return obj


def gang(name: str, queue_name: str, replicas: int, min_member: int, **pod_args: Any) -> list[dict]:
    pods = [pod(f"{name}-{i}", group=name, cpu="1", **pod_args) for i in range(replicas)]
    return [podgroup(name, min_member, queue=queue_name), *pods]


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


async def cluster(tmp_path: Path, *objects: dict, config: str = CAPACITY_CONF) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(*objects)
    return c


async def running(c: Cluster, *pods: str) -> None:
    await c.run()
    for name in pods:
        assert await c.node_of(name), f"{name} was not bound"
        await c.set_phase(name, "Running")


async def alive(c: Cluster, *pods: str) -> list[str]:
    return [name for name in pods if await c.exists("Pod", name)]


async def placed(c: Cluster, *pods: str) -> bool:
    await c.run()
    return all([await c.node_of(name) for name in pods])


def actions(stats: CycleStats) -> set[str]:
    assert stats.session is not None
    return {e.action for e in stats.session.outcome.evictions}


async def test_safe_bundle_reclaim_keeps_the_victim_gang(tmp_path: Path) -> None:
    """GR-1: the lending queue gives back its gang's surplus; the gang keeps running."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "4"),
        capacity_queue("team", "4"),
        *gang("hog", "batch", 8, 4),
    )
    await running(c, *names("hog", 8))
    await c.add(*gang("train", "team", 4, 4))

    stats = await c.run()
    assert stats.evicted == 4
    assert actions(stats) == {"gangreclaim"}
    assert stats.session is not None
    assert stats.session.eviction_figures["transactions/gangreclaim"] == 1
    assert len(await alive(c, *names("hog", 8))) == 4
    assert await placed(c, *names("train", 4))
    assert (await c.run()).evicted == 0


async def test_whole_bundle_reclaim_breaks_exactly_one_gang(tmp_path: Path) -> None:
    """GR-2: without surplus, one of the lending queue's gangs goes entirely."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "4"),
        capacity_queue("team", "4"),
        *gang("a", "batch", 4, 4),
        *gang("b", "batch", 4, 4),
    )
    await running(c, *names("a", 4), *names("b", 4))
    await c.add(*gang("train", "team", 4, 4))

    assert (await c.run()).evicted == 4
    survivors = [len(await alive(c, *names(g, 4))) for g in ("a", "b")]
    assert sorted(survivors) == [0, 4]
    assert await placed(c, *names("train", 4))


async def test_no_whole_bundle_reclaim_when_not_allowed(tmp_path: Path) -> None:
    config = CAPACITY_CONF + (
        "configurations:\n- name: gangreclaim\n  arguments: {allowWholeBundle: false}\n"
    )
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "4"),
        capacity_queue("team", "4"),
        *gang("a", "batch", 4, 4),
        *gang("b", "batch", 4, 4),
        config=config,
    )
    await running(c, *names("a", 4), *names("b", 4))
    await c.add(*gang("train", "team", 4, 4))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_reclaim_only_from_the_overusing_queue(tmp_path: Path) -> None:
    """GR-3: of two lending queues, only the one above its deserved share gives back."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "2"),
        capacity_queue("fair", "2"),
        capacity_queue("team", "4"),
        *gang("hog", "batch", 6, 2),
        *gang("ok", "fair", 2, 1),
    )
    await running(c, *names("hog", 6), *names("ok", 2))
    await c.add(*gang("train", "team", 4, 4))

    assert (await c.run()).evicted == 4
    assert len(await alive(c, *names("hog", 6))) == 2
    assert await alive(c, *names("ok", 2)) == names("ok", 2)
    assert await placed(c, *names("train", 4))


async def test_no_reclaim_from_queues_within_their_deserved_share(tmp_path: Path) -> None:
    """GR-4."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "4"),
        capacity_queue("fair", "4"),
        capacity_queue("team", "4"),
        *gang("hog", "batch", 4, 1),
        *gang("ok", "fair", 4, 1),
    )
    await running(c, *names("hog", 4), *names("ok", 4))
    await c.add(*gang("train", "team", 2, 2))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert await c.node_of("train-0") == ""


async def test_no_reclaim_from_an_unreclaimable_queue(tmp_path: Path) -> None:
    """GR-5."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "4", reclaimable=False),
        capacity_queue("team", "4"),
        *gang("hog", "batch", 8, 4),
    )
    await running(c, *names("hog", 8))
    await c.add(*gang("train", "team", 4, 4))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert len(await alive(c, *names("hog", 8))) == 8


async def test_reclaim_stops_at_the_guarantee(tmp_path: Path) -> None:
    """GR-6: a queue above its deserved share still keeps its guarantee."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "2", guarantee="6"),
        capacity_queue("team", "6"),
        *gang("hog", "batch", 8, 2),
    )
    await running(c, *names("hog", 8))
    # Four pods would take batch below its guarantee: nothing is taken for them ...
    await c.add(*gang("wide", "team", 4, 4))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    # ... but two fit above it.
    await c.add(*gang("narrow", "team", 2, 2))
    assert (await c.run()).evicted == 2
    assert len(await alive(c, *names("hog", 8))) == 6


async def test_a_queue_above_its_share_does_not_reclaim(tmp_path: Path) -> None:
    """GR-7 (capacity): team already holds more than it deserves, so it may not take from
    batch even though batch holds more than it deserves too."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        capacity_queue("batch", "2"),
        capacity_queue("team", "2"),
        *gang("hog", "batch", 4, 1),
        *gang("mine", "team", 4, 1),
    )
    await running(c, *names("hog", 4), *names("mine", 4))
    await c.add(*gang("more", "team", 2, 2))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_an_overused_queue_is_skipped(tmp_path: Path) -> None:
    """GR-7 (proportion's ``overused``): batch holds its whole share, so its new gang is not a
    reclaimer; team's gang, below its share, is."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        queue("batch"),
        queue("team"),
        *gang("hog", "batch", 8, 4),
        config=PROPORTION_CONF,
    )
    await running(c, *names("hog", 8))
    await c.add(*gang("late", "batch", 2, 2))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    await c.add(*gang("train", "team", 4, 4))
    assert (await c.run()).evicted == 4
    assert len(await alive(c, *names("hog", 8))) == 4


async def test_priority_does_not_protect_from_reclaim(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        priority_class("vip", 100000),
        node("n1", cpu="8"),
        capacity_queue("batch", "4"),
        capacity_queue("team", "4"),
        podgroup("hog", 4, queue="batch", priority_class="vip"),
        *[pod(f"hog-{i}", group="hog", cpu="1", priority=100000) for i in range(8)],
    )
    await running(c, *names("hog", 8))
    await c.add(*gang("train", "team", 2, 2))
    assert (await c.run()).evicted == 2

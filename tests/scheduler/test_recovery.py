"""A gang left half-bound (its scheduler died mid-bind) is finished by the next scheduler in
its first cycle, before a job that arrived meanwhile can take the room."""

from __future__ import annotations

from pathlib import Path

from .builders import Cluster, node, pod, podgroup


async def test_half_bound_gang_is_finished_first(tmp_path: Path) -> None:
    c = await Cluster(tmp_path).start()
    await c.add(node("n1", cpu="4"))
    # What the dead scheduler left: 1 of 4 members bound, the room for the rest still free.
    await c.add(podgroup("gang", 4))
    await c.add(pod("gang-0", group="gang", cpu="1", node_name="n1", phase="Running"))
    # A job created while no scheduler ran, older in the queue than the gang's pending pods'
    # next attempt, and which would fit in the same room.
    await c.add(podgroup("newcomer", 3))
    await c.add(*(pod(f"newcomer-{i}", group="newcomer", cpu="1") for i in range(3)))
    await c.add(*(pod(f"gang-{i}", group="gang", cpu="1") for i in range(1, 4)))
    stats = await c.run()
    assert sorted(t.name for t in stats.bound_tasks) == ["gang-1", "gang-2", "gang-3"]
    assert all([await c.node_of(f"gang-{i}") for i in range(4)])
    assert not any([await c.node_of(f"newcomer-{i}") for i in range(3)])


async def test_partial_gang_order_does_not_override_priority(tmp_path: Path) -> None:
    from .builders import priority_class

    c = await Cluster(tmp_path).start()
    await c.add(node("n1", cpu="3"), priority_class("high", 1000))
    await c.add(podgroup("gang", 3))
    await c.add(pod("gang-0", group="gang", cpu="1", node_name="n1", phase="Running"))
    await c.add(podgroup("urgent", 2, priority_class="high"))
    await c.add(*(pod(f"urgent-{i}", group="urgent", cpu="1") for i in range(2)))
    await c.add(*(pod(f"gang-{i}", group="gang", cpu="1") for i in range(1, 3)))
    stats = await c.run()
    assert sorted(t.name for t in stats.bound_tasks) == ["urgent-0", "urgent-1"]

"""Early cycles: new work seen by the watch starts the next cycle before the period ends, and
nothing else does (the loop on the in-memory store, with a period far longer than the test)."""

from __future__ import annotations

import asyncio

import pytest

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler.arrivals import Arrivals
from stromboli.core.scheduler.server import SchedulerOptions, SchedulerServer
from tests.server.test_scheduler_server import bound, gang, node, wait_for

#: Longer than any of these tests runs: a cycle after the first is an early one.
PERIOD = 600.0


async def started(gap: float) -> tuple[MemoryStore, SchedulerServer, asyncio.Task]:
    store = MemoryStore(SystemClock())
    await store.create(node("n1"))
    options = SchedulerOptions(
        schedule_period=PERIOD, listen_address="", healthz_address="", early_cycle_gap=gap
    )
    server = SchedulerServer(store, options)
    running = asyncio.create_task(server.run())

    async def first_cycle() -> bool:
        return server.cycles >= 1

    await wait_for(first_cycle)
    return store, server, running


async def stopped(server: SchedulerServer, running: asyncio.Task) -> None:
    server.stop()
    await asyncio.wait_for(running, 5)


async def test_a_gang_created_mid_period_is_bound_before_the_period_ends() -> None:
    store, server, running = await started(gap=0.02)
    try:
        for obj in gang("g", 2, "1"):
            await store.create(obj)

        async def placed() -> bool:
            return all((await bound(store)).values())

        await wait_for(placed)  # ten seconds at most, against a 600 s period
        assert server.early_cycles >= 1
    finally:
        await stopped(server, running)


async def test_without_early_cycles_new_work_waits_for_the_period() -> None:
    store, server, running = await started(gap=0.0)
    try:
        for obj in gang("g", 2, "1"):
            await store.create(obj)
        await asyncio.sleep(0.5)
        assert server.cycles == 1 and server.early_cycles == 0
        assert not any((await bound(store)).values())
    finally:
        await stopped(server, running)


async def test_status_changes_of_placed_pods_start_no_cycle() -> None:
    store, server, running = await started(gap=0.02)
    try:
        for obj in gang("g", 2, "1"):
            await store.create(obj)

        async def placed() -> bool:
            return all((await bound(store)).values())

        await wait_for(placed)
        await asyncio.sleep(0.2)  # the binding's own watch events settle
        cycles = server.cycles
        for name in ("g-0", "g-1"):
            pod = await store.get("v1", "Pod", name, "default")
            pod["status"] = {"phase": "Running"}
            await store.update_status(pod)
        await asyncio.sleep(0.3)
        assert server.cycles == cycles
    finally:
        await stopped(server, running)


def pod(name: str, scheduler: str = "volcano", node_name: str = "") -> dict:
    spec: dict = {"schedulerName": scheduler, "containers": []}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("kind", "event_type", "obj", "work"),
    [
        (("v1", "Pod"), "ADDED", pod("p"), True),
        (("v1", "Pod"), "MODIFIED", pod("p"), False),
        (("v1", "Pod"), "DELETED", pod("p"), False),
        (("v1", "Pod"), "ADDED", pod("p", node_name="n1"), False),
        (("v1", "Pod"), "ADDED", pod("p", scheduler="default-scheduler"), False),
        (("v1", "Pod"), "ADDED", {"metadata": {"name": "p"}}, False),  # default-scheduler's
        (("v1", "Pod"), "ADDED", {"metadata": {"name": "p"}, "spec": "junk"}, False),
        (("scheduling.volcano.sh/v1beta1", "PodGroup"), "ADDED", {"metadata": {}}, True),
        (("scheduling.volcano.sh/v1beta1", "PodGroup"), "MODIFIED", {"metadata": {}}, False),
        (("v1", "Node"), "ADDED", {"metadata": {"name": "n"}}, False),
        (("scheduling.volcano.sh/v1beta1", "Queue"), "ADDED", {"metadata": {}}, False),
    ],
)
def test_what_counts_as_new_work(
    kind: tuple[str, str], event_type: str, obj: dict, work: bool
) -> None:
    arrivals = Arrivals({"volcano"})
    arrivals.notice(kind, event_type, obj)
    assert arrivals.is_set() is work
    assert arrivals.seen == int(work)
    arrivals.clear()
    assert not arrivals.is_set()

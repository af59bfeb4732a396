"""Writes pipelined with the next cycle's decisions: a decided binding is held in the cache while
it is written (the next cycle neither places the pod again nor gives its room away), a refused
one leaves the pod pending for the cycle after, and the PodGroup status is still written once."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import InternalError
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.pipeline import release, reserve
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.scheduler.server import SchedulerOptions, SchedulerServer
from tests.server.test_scheduler_server import wait_for

from .builders import node, pod, podgroup
from .test_write_counts import CountingStore, by_kind, gang, started


class SlowStore(CountingStore):
    """Bindings wait at a gate; the pods named in ``refuse`` are refused once each."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.gate: asyncio.Event | None = None
        self.refuse: set[str] = set()
        self.bound: Counter[str] = Counter()

    async def bind(self, namespace: str, pod_name: str, *args: Any, **kwargs: Any) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if pod_name in self.refuse:
            self.refuse.discard(pod_name)
            raise InternalError(f"binding {pod_name} refused")
        await super().bind(namespace, pod_name, *args, **kwargs)
        self.bound[pod_name] += 1


async def slow_started(tmp_path: Path, *objects: dict) -> tuple[SlowStore, Scheduler]:
    store, scheduler = await started(tmp_path, *objects, store_type=SlowStore)
    assert isinstance(store, SlowStore)
    return store, scheduler


def placed(cycle: Any) -> list[str]:
    return sorted(task.name for task, _ in cycle.ssn.outcome.binds)


async def test_a_held_binding_is_not_placed_again_nor_its_room_given_away(tmp_path: Path) -> None:
    # Room for one gang of four: the second may only go once the first is gone.
    store, scheduler = await slow_started(
        tmp_path, node("n1", cpu="4"), *gang("a", 4, "1"), *gang("b", 4, "1")
    )
    store.gate = asyncio.Event()
    first = await scheduler.decide()
    scheduler.reserve(first)
    writing = asyncio.create_task(scheduler.commit(first))
    await asyncio.sleep(0)  # its bindings are in flight, held at the gate
    second = await scheduler.decide()  # decided while the first cycle's writes wait
    assert len(placed(first)) == 4
    assert placed(second) == []
    store.gate.set()
    await writing
    await scheduler.commit(second)
    assert sorted(store.bound.values()) == [1, 1, 1, 1]


async def test_a_refused_binding_leaves_the_pod_pending_for_the_next_cycle(
    tmp_path: Path,
) -> None:
    store, scheduler = await slow_started(tmp_path, node("n1", cpu="8"), *gang("g", 1, "1"))
    store.refuse = {"g-0"}
    first = await scheduler.decide()
    scheduler.reserve(first)
    assert placed(first) == ["g-0"]
    held = await scheduler.decide()  # while the binding is held: not placed again
    assert placed(held) == []
    stats = await scheduler.commit(first)
    assert stats.bound == 0
    retry = await scheduler.decide()
    assert placed(retry) == ["g-0"]  # pending again in the next snapshot
    scheduler.reserve(retry)
    assert (await scheduler.commit(retry)).bound == 1
    assert store.bound == Counter({"g-0": 1})
    pod = await store.get("v1", "Pod", "g-0", "default")
    assert pod["spec"]["nodeName"] == "n1"


async def test_overlapping_cycles_still_write_the_podgroup_and_queues_once(tmp_path: Path) -> None:
    store, scheduler = await slow_started(tmp_path, node("n1", cpu="32"), *gang("g", 20, "1"))
    store.gate = asyncio.Event()
    first = await scheduler.decide()
    scheduler.reserve(first)
    writing = asyncio.create_task(scheduler.commit(first))
    await asyncio.sleep(0)
    second = await scheduler.decide()  # sees the gang held as bound, the group not yet Running
    scheduler.reserve(second)
    store.gate.set()
    await writing
    await scheduler.commit(second)
    assert by_kind(store.writes, "PodGroup") == Counter(update=1)
    # The queue and its parent got their new allocated once each, not again from the stale
    # snapshot of the second cycle.
    assert by_kind(store.writes, "Queue") == Counter(update_status=2)
    assert sum(store.bound.values()) == 20


async def test_a_refusal_reported_after_a_newer_watch_event_changes_nothing(
    tmp_path: Path,
) -> None:
    """The watch showed the pod placed (someone else bound it) before the refusal came back:
    the cache keeps what the watch said."""
    store, scheduler = await slow_started(tmp_path, node("n1", cpu="8"), *gang("g", 1, "1"))
    store.refuse = {"g-0"}
    first = await scheduler.decide()
    scheduler.reserve(first)
    await CountingStore.bind(store, "default", "g-0", "n1")
    await scheduler.informer.pump()
    await scheduler.commit(first)
    again = await scheduler.decide()
    assert placed(again) == []
    assert scheduler.cache.pods[first.ssn.outcome.binds[0][0].uid].task.node_name == "n1"


async def test_the_server_retries_a_refused_binding_and_binds_each_pod_once() -> None:
    store = SlowStore(VirtualClock(1000))
    await store.create(node("n1", cpu="8"))
    for obj in gang("g", 3, "1"):
        await store.create(obj)
    store.refuse = {"g-1"}
    options = SchedulerOptions(schedule_period=0.05, listen_address="", healthz_address="")
    server = SchedulerServer(store, options)
    running = asyncio.create_task(server.run())
    try:

        async def all_bound() -> bool:
            pods = (await store.list("v1", "Pod")).items
            return all(p["spec"].get("nodeName") for p in pods)

        await wait_for(all_bound)
        await asyncio.sleep(0.3)  # more cycles, pipelined: none binds anything again
    finally:
        server.stop()
        await asyncio.wait_for(running, 5)
    assert store.bound == Counter({"g-0": 1, "g-1": 1, "g-2": 1})
    assert not store.refuse  # the refusal happened


def held_cache() -> tuple[SchedulerCache, TaskInfo]:
    cache = SchedulerCache(("volcano",))
    cache.apply(("v1", "Node"), "ADDED", node("n1", cpu="8"))
    cache.apply(("scheduling.volcano.sh/v1beta1", "PodGroup"), "ADDED", podgroup("g"))
    waiting = pod("p", group="g", cpu="2", uid="uid-p")
    waiting["metadata"]["resourceVersion"] = "5"
    cache.apply(("v1", "Pod"), "ADDED", waiting)
    task = cache.pods["uid-p"].task.clone()
    reserve(cache, [(task, "n1")], {"uid-p": {"example.com/device": "card-0"}})
    held = cache.pods["uid-p"].task
    assert held.node_name == "n1"
    assert held.pod["metadata"]["annotations"]["example.com/device"] == "card-0"
    return cache, task


def test_a_released_hold_gives_back_the_pod_as_decided_on() -> None:
    cache, task = held_cache()
    release(cache, task)
    record = cache.pods["uid-p"].task
    assert record.node_name == ""
    assert "example.com/device" not in record.pod["metadata"]["annotations"]
    assert "uid-p" not in cache.assumed
    release(cache, task)  # twice is harmless
    assert cache.pods["uid-p"].task.node_name == ""


def test_a_released_hold_keeps_a_newer_version_from_the_watch() -> None:
    cache, task = held_cache()
    newer_pod = pod("p", group="g", cpu="2", uid="uid-p", labels={"seen": "later"})
    newer_pod["metadata"]["resourceVersion"] = "6"
    cache.apply(("v1", "Pod"), "MODIFIED", newer_pod)
    assert cache.pods["uid-p"].task.node_name == "n1"  # still held
    release(cache, task)
    record = cache.pods["uid-p"].task
    assert record.node_name == "" and record.pod["metadata"]["labels"] == {"seen": "later"}

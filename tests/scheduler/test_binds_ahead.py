"""Bindings started as soon as a cycle is decided (``Scheduler.start_binds``): they do not wait
for the previous cycle's status writes, yet the commits that follow write what sequential
cycles write, a refused binding still leaves its pod pending, and a cycle that evicts binds
only in its commit; the server loop decides and binds behind a commit held in its writes, up
to ``commits_in_flight``."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.store import Obj
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.scheduler.server import SchedulerOptions, SchedulerServer
from tests.server.test_scheduler_server import wait_for

from .builders import node
from .test_pipelined_writes import SlowStore, placed
from .test_write_counts import by_kind, gang, started


class HeldStatusStore(SlowStore):
    """PodGroup writes wait at ``status_gate`` (a commit held in its status writes)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.status_gate: asyncio.Event | None = None

    async def update(self, obj: Obj) -> Obj:
        if obj["kind"] == "PodGroup" and self.status_gate is not None:
            await self.status_gate.wait()
        return await super().update(obj)


async def held_started(tmp_path: Path, *objects: dict) -> tuple[HeldStatusStore, Scheduler]:
    store, scheduler = await started(tmp_path, *objects, store_type=HeldStatusStore)
    assert isinstance(store, HeldStatusStore)
    return store, scheduler


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def two_cycles(tmp_path: Path, ahead: bool) -> tuple[HeldStatusStore, Counter[str]]:
    """Gang ``a`` decided and committed (its PodGroup write held), gang ``b`` arriving and
    decided meanwhile; returns the store and the pods bound before ``a``'s commit ended."""
    store, scheduler = await held_started(tmp_path, node("n1", cpu="16"), *gang("a", 4, "1"))
    store.status_gate = asyncio.Event()
    first = await scheduler.decide()
    scheduler.reserve(first)
    if ahead:
        scheduler.start_binds(first)
    writing = asyncio.create_task(scheduler.commit(first))
    await settle()  # a's bindings written, its PodGroup write held
    for obj in gang("b", 4, "1"):
        await store.create(obj)
    second = await scheduler.decide()
    assert placed(second) == [f"b-{i}" for i in range(4)]
    scheduler.reserve(second)
    if ahead:
        scheduler.start_binds(second)
    await settle()
    early = Counter(store.bound)
    assert not writing.done()
    store.status_gate.set()
    await writing
    await scheduler.commit(second)
    return store, early


async def test_a_cycle_binds_while_the_previous_commit_writes_statuses(tmp_path: Path) -> None:
    store, early = await two_cycles(tmp_path, ahead=True)
    assert {name for name in early if name.startswith("b-")} == {f"b-{i}" for i in range(4)}
    assert sum(store.bound.values()) == 8 and set(store.bound.values()) == {1}


async def test_binds_ahead_write_what_bindings_in_the_commit_write(tmp_path: Path) -> None:
    for name in ("ahead", "inline"):
        (tmp_path / name).mkdir()
    ahead, _ = await two_cycles(tmp_path / "ahead", ahead=True)
    inline, early_inline = await two_cycles(tmp_path / "inline", ahead=False)
    assert not any(name.startswith("b-") for name in early_inline)  # bound in its commit
    assert ahead.writes == inline.writes
    assert by_kind(ahead.writes, "PodGroup") == Counter(create=1, update=2)  # b made here
    for name in [f"{g}-{i}" for g in "ab" for i in range(4)] + ["a", "b"]:
        kind = "Pod" if "-" in name else "PodGroup"
        api = "v1" if kind == "Pod" else "scheduling.volcano.sh/v1beta1"
        mine = await ahead.get(api, kind, name, "default")
        theirs = await inline.get(api, kind, name, "default")
        for obj in (mine, theirs):  # the writes interleave otherwise: versions differ
            for key in ("uid", "creationTimestamp", "resourceVersion"):
                obj["metadata"].pop(key, None)
            for condition in (obj.get("status") or {}).get("conditions") or ():
                condition.pop("transitionID", None)  # a random uuid
        assert mine == theirs


async def test_a_refused_binding_ahead_leaves_the_pod_pending(tmp_path: Path) -> None:
    store, scheduler = await held_started(tmp_path, node("n1", cpu="8"), *gang("g", 1, "1"))
    store.refuse = {"g-0"}
    first = await scheduler.decide()
    scheduler.reserve(first)
    scheduler.start_binds(first)
    assert first.binding is not None
    held = await scheduler.decide()  # while the binding is held: not placed again
    assert placed(held) == []
    assert (await scheduler.commit(first)).bound == 0
    retry = await scheduler.decide()
    assert placed(retry) == ["g-0"]
    scheduler.reserve(retry)
    scheduler.start_binds(retry)
    assert (await scheduler.commit(retry)).bound == 1
    assert store.bound == Counter({"g-0": 1})


async def test_only_a_reserved_cycle_with_bindings_binds_ahead(tmp_path: Path) -> None:
    store, scheduler = await held_started(tmp_path, node("n1", cpu="8"), *gang("g", 1, "1"))
    cycle = await scheduler.decide()
    scheduler.start_binds(cycle)  # not held in the cache: the next snapshot could place it
    assert cycle.binding is None
    scheduler.reserve(cycle)
    scheduler.start_binds(cycle)
    assert cycle.binding is not None
    await scheduler.commit(cycle)
    empty = await scheduler.decide()
    scheduler.reserve(empty)
    scheduler.start_binds(empty)
    assert empty.binding is None
    await scheduler.commit(empty)
    assert store.bound == Counter({"g-0": 1})


async def test_the_server_decides_and_binds_behind_a_held_commit_up_to_its_limit() -> None:
    # Gang a's PodGroup write is held: its commit cannot end. The loop goes on deciding: b
    # and c (decided while a's and b's commits are in flight) are bound meanwhile; then it
    # waits for a's commit, so d waits too. Once released, every group is written once.
    store = HeldStatusStore(VirtualClock(1000))
    await store.create(node("n1", cpu="32"))
    for obj in gang("a", 2, "1"):
        await store.create(obj)
    store.status_gate = asyncio.Event()
    options = SchedulerOptions(schedule_period=0.05, listen_address="", healthz_address="")
    assert options.commits_in_flight == 2
    server = SchedulerServer(store, options)
    running = asyncio.create_task(server.run())

    def bound(group: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return all(store.bound[f"{group}-{i}"] == 1 for i in range(2))

        return check

    try:
        await wait_for(bound("a"))
        for group in "bcd":
            for obj in gang(group, 2, "1"):
                await store.create(obj)
            if group != "d":
                await wait_for(bound(group))
        await asyncio.sleep(0.5)  # many periods: d is not decided behind a's held commit
        assert not any(store.bound[f"d-{i}"] for i in range(2))
        store.status_gate.set()
        await wait_for(bound("d"))
        await asyncio.sleep(0.3)
    finally:
        store.status_gate.set()
        server.stop()
        await asyncio.wait_for(running, 5)
    assert set(store.bound.values()) == {1} and len(store.bound) == 8
    for group in "abcd":
        stored = await store.get("scheduling.volcano.sh/v1beta1", "PodGroup", group, "default")
        assert stored["status"]["phase"] == "Running"

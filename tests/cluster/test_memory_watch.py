"""Watches: commit order, fan-out, namespaces, replay from a resourceVersion, Gone, closing."""

from __future__ import annotations

import asyncio

import pytest

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import BadRequestError, GoneError, NotFoundError
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import WatchEvent, WatchStream

from .objects import configmap, next_event, pod


async def take(watch: WatchStream, count: int, timeout: float = 1.0) -> list[WatchEvent]:
    return [await next_event(watch, timeout) for _ in range(count)]


async def nothing_pending(watch: WatchStream) -> bool:
    try:
        await asyncio.wait_for(anext(watch), 0.01)
    except TimeoutError:
        return True
    return False


def summary(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"]["name"]) for e in events]


async def test_live_events_in_commit_order(store: MemoryStore) -> None:
    async with store.watch("v1", "Pod", resource_version=store.resource_version) as watch:
        created = await store.create(pod("a"))
        await store.create(pod("b"))
        await store.update_status(dict(created, status={"phase": "Running"}))
        await store.delete("v1", "Pod", "b", "default")
        events = await take(watch, 4)
    assert summary(events) == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    versions = [int(e.object["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


async def test_event_objects_carry_their_version(store: MemoryStore) -> None:
    async with store.watch("v1", "Pod") as watch:
        created = await store.create(pod("a"))
        (event,) = await take(watch, 1)
    assert event.object["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_deleted_event_has_new_version_and_last_state(store: MemoryStore) -> None:
    created = await store.create(pod("a", labels={"x": "y"}))
    async with store.watch("v1", "Pod", resource_version=store.resource_version) as watch:
        await store.delete("v1", "Pod", "a", "default")
        (event,) = await take(watch, 1)
    assert event.type == "DELETED"
    assert event.object["metadata"]["labels"] == {"x": "y"}
    assert int(event.object["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )


async def test_every_watcher_sees_every_event(store: MemoryStore) -> None:
    first = store.watch("v1", "Pod", resource_version="0")
    second = store.watch("v1", "Pod", resource_version="0")
    await store.create(pod("a"))
    await store.create(pod("b"))
    assert summary(await take(first, 2)) == summary(await take(second, 2))
    await first.aclose()
    await second.aclose()


async def test_watchers_get_independent_copies(store: MemoryStore) -> None:
    first = store.watch("v1", "Pod", resource_version="0")
    second = store.watch("v1", "Pod", resource_version="0")
    await store.create(pod("a"))
    (one,) = await take(first, 1)
    one.object["metadata"]["name"] = "mangled"
    (two,) = await take(second, 1)
    assert two.object["metadata"]["name"] == "a"
    assert (await store.get("v1", "Pod", "a"))["metadata"]["name"] == "a"


async def test_watch_filters_kind(store: MemoryStore) -> None:
    async with store.watch("v1", "ConfigMap", resource_version=store.resource_version) as watch:
        await store.create(pod("p"))
        await store.create(configmap("c"))
        assert summary(await take(watch, 1)) == [("ADDED", "c")]
        assert await nothing_pending(watch)


async def test_watch_filters_namespace(store: MemoryStore) -> None:
    async with store.watch("v1", "Pod", namespace="two", resource_version="0") as watch:
        await store.create(pod("a", namespace="one"))
        await store.create(pod("b", namespace="two"))
        assert summary(await take(watch, 1)) == [("ADDED", "b")]
        assert await nothing_pending(watch)


async def test_watch_without_version_starts_with_synthetic_adds(store: MemoryStore) -> None:
    await store.create(pod("a"))
    await store.create(pod("b"))
    created = await store.create(pod("c"))
    await store.update_status(dict(created, status={"phase": "Running"}))
    async with store.watch("v1", "Pod") as watch:
        events = await take(watch, 3)
        assert summary(events) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
        assert events[2].object["status"]["phase"] == "Running"
        assert await nothing_pending(watch)
        await store.create(pod("d"))
        assert summary(await take(watch, 1)) == [("ADDED", "d")]


async def test_watch_zero_same_as_none(store: MemoryStore) -> None:
    await store.create(pod("a"))
    async with store.watch("v1", "Pod", resource_version="0") as watch:
        assert summary(await take(watch, 1)) == [("ADDED", "a")]


async def test_replay_from_resource_version(store: MemoryStore) -> None:
    a = await store.create(pod("a"))
    await store.create(pod("b"))
    await store.update_status(dict(a, status={"phase": "Running"}))
    await store.delete("v1", "Pod", "b", "default")
    async with store.watch("v1", "Pod", resource_version=a["metadata"]["resourceVersion"]) as w:
        events = await take(w, 3)
        assert summary(events) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
        assert await nothing_pending(w)


async def test_list_then_watch_misses_nothing(store: MemoryStore) -> None:
    await store.create(pod("a"))
    listed = await store.list("v1", "Pod")
    await store.create(pod("b"))  # happens between the list and the watch
    async with store.watch("v1", "Pod", resource_version=listed.resource_version) as watch:
        assert summary(await take(watch, 1)) == [("ADDED", "b")]


async def test_replay_then_live_without_gap(store: MemoryStore) -> None:
    await store.create(pod("a"))
    async with store.watch("v1", "Pod", resource_version="0") as watch:
        await store.create(pod("b"))
        assert summary(await take(watch, 2)) == [("ADDED", "a"), ("ADDED", "b")]


async def test_replay_filters_namespace(store: MemoryStore) -> None:
    await store.create(pod("a", namespace="one"))
    await store.create(pod("b", namespace="two"))
    async with store.watch("v1", "Pod", namespace="two", resource_version="0") as watch:
        assert summary(await take(watch, 1)) == [("ADDED", "b")]
        assert await nothing_pending(watch)


async def test_future_version_waits_for_it(store: MemoryStore) -> None:
    async with store.watch("v1", "Pod", resource_version="2") as watch:
        await store.create(pod("a"))  # version 1: before the start
        await store.create(pod("b"))  # version 2: the start itself
        await store.create(pod("c"))  # version 3: after
        assert summary(await take(watch, 1)) == [("ADDED", "c")]


async def test_gone_after_compaction(clock: VirtualClock) -> None:
    small = MemoryStore(clock, history_limit=3, seed=1)
    first = await small.create(pod("p0"))
    for index in range(1, 6):
        await small.create(pod(f"p{index}"))
    watch = small.watch("v1", "Pod", resource_version=first["metadata"]["resourceVersion"])
    with pytest.raises(GoneError) as caught:
        await next_event(watch)
    assert caught.value.code == 410
    assert caught.value.reason == "Expired"
    with pytest.raises(StopAsyncIteration):
        await next_event(watch)


async def test_recent_version_still_served_after_compaction(clock: VirtualClock) -> None:
    small = MemoryStore(clock, history_limit=3, seed=1)
    created = [await small.create(pod(f"p{index}")) for index in range(6)]
    start = created[2]["metadata"]["resourceVersion"]  # versions 4..6 are retained
    async with small.watch("v1", "Pod", resource_version=start) as watch:
        assert summary(await take(watch, 3)) == [("ADDED", "p3"), ("ADDED", "p4"), ("ADDED", "p5")]


async def test_history_is_per_kind(clock: VirtualClock) -> None:
    small = MemoryStore(clock, history_limit=2, seed=1)
    config = await small.create(configmap("c"))
    for index in range(5):
        await small.create(pod(f"p{index}"))
    start = str(int(config["metadata"]["resourceVersion"]) - 1)
    async with small.watch("v1", "ConfigMap", resource_version=start) as watch:
        assert summary(await take(watch, 1)) == [("ADDED", "c")]


async def test_bad_version_bad_request(store: MemoryStore) -> None:
    watch = store.watch("v1", "Pod", resource_version="yesterday")
    with pytest.raises(BadRequestError):
        await next_event(watch)


async def test_unknown_kind_fails_at_once(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError):
        store.watch("example.com/v1", "Widget")


async def test_close_ends_iteration(store: MemoryStore) -> None:
    watch = store.watch("v1", "Pod")
    await watch.aclose()
    await store.create(pod("a"))
    with pytest.raises(StopAsyncIteration):
        await next_event(watch)


async def test_close_wakes_a_waiting_consumer(store: MemoryStore) -> None:
    watch = store.watch("v1", "Pod")
    seen: list[WatchEvent] = []

    async def consume() -> None:
        async for event in watch:
            seen.append(event)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    await store.create(pod("a"))
    await asyncio.sleep(0)
    await watch.aclose()
    await asyncio.wait_for(task, 1)
    assert summary(seen) == [("ADDED", "a")]


async def test_store_close_ends_all_watches(store: MemoryStore) -> None:
    watches = [store.watch("v1", "Pod"), store.watch("v1", "ConfigMap")]
    await store.close()
    for watch in watches:
        with pytest.raises(StopAsyncIteration):
            await next_event(watch)


async def test_dropped_watch_is_forgotten(store: MemoryStore) -> None:
    import gc

    watch = store.watch("v1", "Pod")
    history = store._kind("v1", "Pod").history
    assert len(history.watchers) == 1
    del watch
    gc.collect()
    assert len(history.watchers) == 0
    await store.create(pod("a"))  # no dead watcher to deliver to


async def test_consumer_waiting_receives_later_event(store: MemoryStore) -> None:
    watch = store.watch("v1", "Pod", resource_version=store.resource_version)
    pending = asyncio.ensure_future(anext(watch))
    await asyncio.sleep(0)
    assert not pending.done()
    await store.create(pod("late"))
    event = await asyncio.wait_for(pending, 1)
    assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "late")
    await watch.aclose()

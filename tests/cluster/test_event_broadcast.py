"""Events written in the background: repeats folded into one object's ``count`` with one
request each, a record never waiting on the store, a bounded backlog that drops and counts."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import Obj
from stromboli.core.eventbroadcast import EventBroadcaster
from stromboli.core.events import SPAM_BURST, EventRecorder


class CountingStore(MemoryStore):
    """A memory store that counts requests by verb, and can hold creates until released."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.calls: Counter[str] = Counter()
        self.gate: asyncio.Event | None = None

    async def create(self, obj: Obj) -> Obj:
        self.calls["create"] += 1
        if self.gate is not None:
            await self.gate.wait()
        return await super().create(obj)

    async def patch(self, *args: Any, **kwargs: Any) -> Obj:
        self.calls["patch"] += 1
        return await super().patch(*args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Obj:
        self.calls["get"] += 1
        return await super().get(*args, **kwargs)

    async def update(self, obj: Obj) -> Obj:
        self.calls["update"] += 1
        return await super().update(obj)


def ref(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": name, "uid": name}


async def events(store: MemoryStore) -> list[dict]:
    return (await store.list("v1", "Event")).items


async def test_inline_repeats_are_one_patch_each_not_a_read_and_an_update() -> None:
    clock = VirtualClock(0)
    store = CountingStore(clock)
    recorder = EventRecorder(store, clock, "volcano")
    for _ in range(10):
        await recorder.record(ref("p"), "Warning", "FailedScheduling", "no room")
        clock.advance(1)
    (event,) = await events(store)
    assert event["count"] == 10
    assert event["lastTimestamp"] == "1970-01-01T00:00:09Z"
    assert event["firstTimestamp"] == "1970-01-01T00:00:00Z"
    assert store.calls == Counter(create=1, patch=9)


async def test_an_expired_event_is_created_anew() -> None:
    clock = VirtualClock(0)
    store = CountingStore(clock)
    recorder = EventRecorder(store, clock, "volcano")
    await recorder.record(ref("p"), "Normal", "Scheduled", "ok")
    (first,) = await events(store)
    await store.delete("v1", "Event", first["metadata"]["name"], "default")  # the TTL ran out
    await recorder.record(ref("p"), "Normal", "Scheduled", "ok")
    (again,) = await events(store)
    assert again["count"] == 1 and again["metadata"]["name"] != first["metadata"]["name"]


async def test_ten_repeats_in_the_background_are_one_object_with_count_ten() -> None:
    clock = VirtualClock(0)
    store = CountingStore(clock)
    broadcaster = EventBroadcaster(store, clock, "volcano")
    for _ in range(10):
        await broadcaster.record(ref("p"), "Warning", "FailedScheduling", "no room")
    assert await broadcaster.flush(5)
    (event,) = await events(store)
    assert event["count"] == 10
    assert sum(store.calls.values()) < 10  # repeats still queued ride on one write
    await broadcaster.close()


async def test_recording_never_waits_on_the_store_and_a_repeat_waits_for_the_create() -> None:
    clock = VirtualClock(0)
    store = CountingStore(clock)
    store.gate = asyncio.Event()
    broadcaster = EventBroadcaster(store, clock, "volcano", workers=3)
    await broadcaster.record(ref("p"), "Warning", "FailedScheduling", "no room")
    await asyncio.sleep(0)  # a writer takes it and blocks in create
    for _ in range(4):  # returns at once although the store does not answer
        await asyncio.wait_for(
            broadcaster.record(ref("p"), "Warning", "FailedScheduling", "no room"), 0.5
        )
    await asyncio.sleep(0.01)
    assert store.calls["create"] == 1  # no second writer creates a duplicate meanwhile
    assert broadcaster.waiting == 2  # the one being created, and its folded repeats
    store.gate.set()
    assert await broadcaster.flush(5)
    (event,) = await events(store)
    assert event["count"] == 5
    assert store.calls == Counter(create=1, patch=1)
    await broadcaster.close()


async def test_a_full_backlog_drops_new_events_and_counts_them() -> None:
    clock = VirtualClock(0)
    store = CountingStore(clock)
    store.gate = asyncio.Event()
    drops: list[str] = []
    broadcaster = EventBroadcaster(store, clock, "volcano", workers=1, backlog=3)
    broadcaster.on_drop = drops.append
    for i in range(10):
        await broadcaster.record(ref(f"p{i}"), "Normal", "Scheduled", "ok")
        await asyncio.sleep(0)
    # One in the writer's hands, three waiting, the other six dropped.
    assert broadcaster.dropped_by == {"backlog": 6} and drops == ["backlog"] * 6
    store.gate.set()
    assert await broadcaster.flush(5)
    assert len(await events(store)) == 4
    await broadcaster.close()


async def test_close_stops_the_writers_even_when_the_store_hangs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock(0)
    store = CountingStore(clock)
    store.gate = asyncio.Event()
    broadcaster = EventBroadcaster(store, clock, "volcano")
    await broadcaster.record(ref("p"), "Normal", "Scheduled", "ok")
    await asyncio.wait_for(broadcaster.close(timeout=0.05), 2)
    assert "1 events left unwritten" in caplog.text
    assert broadcaster._tasks == [] and await events(store) == []


def test_bad_sizes_are_refused() -> None:
    clock = VirtualClock(0)
    with pytest.raises(ValueError, match="at least 1"):
        EventBroadcaster(MemoryStore(clock), clock, "volcano", workers=0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from("abcd"), st.sampled_from(["Scheduled", "Evict"])),
            st.just(None),  # let the writers run for a moment
        ),
        max_size=60,
    ),
    st.integers(1, 4),
)
def test_every_record_is_counted_once_on_one_object_per_key(
    script: list[tuple[str, str] | None], workers: int
) -> None:
    async def run() -> None:
        clock = VirtualClock(0)
        store = CountingStore(clock)
        broadcaster = EventBroadcaster(store, clock, "volcano", workers=workers)
        expected: Counter[tuple[str, str]] = Counter()
        for step in script:
            if step is None:
                await asyncio.sleep(0)
                continue
            name, reason = step
            await broadcaster.record(ref(name), "Normal", reason, "m")
            expected[step] += 1
        assert await broadcaster.flush(5)
        written = Counter(
            {(e["involvedObject"]["name"], e["reason"]): e["count"] for e in await events(store)}
        )
        allowed = {
            key: min(count, SPAM_BURST) for key, count in expected.items()
        }  # each object has its own spam bucket; both reasons share it
        assert len(await events(store)) == len(expected)
        assert sum(written.values()) + broadcaster.dropped == sum(expected.values())
        assert all(written[key] <= allowed[key] for key in expected)
        await broadcaster.close()

    asyncio.run(run())

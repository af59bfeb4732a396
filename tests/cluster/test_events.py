"""Events as client-go records them: repeats aggregated into ``count``, and a spam filter per
source and object (a burst of 25, then one per 5 minutes) so a failing object costs no writes
beyond what it tells."""

from __future__ import annotations

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.events import SPAM_BURST, SPAM_OBJECTS, SPAM_REFILL_SECONDS, EventRecorder


def ref(name: str, uid: str | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "default",
        "name": name,
        "uid": uid or name,
    }


async def events(store: MemoryStore) -> list[dict]:
    return (await store.list("v1", "Event")).items


async def test_repeats_stop_at_the_burst_then_refill_every_five_minutes() -> None:
    clock = VirtualClock(0)
    store = MemoryStore(clock)
    recorder = EventRecorder(store, clock, "volcano")
    for _ in range(40):
        await recorder.record(ref("p"), "Warning", "FailedScheduling", "no room")
        clock.advance(1)
    (event,) = await events(store)
    assert event["count"] == SPAM_BURST
    assert recorder.dropped == 40 - SPAM_BURST
    clock.advance(SPAM_REFILL_SECONDS)
    await recorder.record(ref("p"), "Warning", "FailedScheduling", "no room")
    await recorder.record(ref("p"), "Warning", "FailedScheduling", "no room")
    (event,) = await events(store)
    assert event["count"] == SPAM_BURST + 1  # one token came back, not two


async def test_the_filter_is_per_object_not_per_reason() -> None:
    clock = VirtualClock(0)
    store = MemoryStore(clock)
    recorder = EventRecorder(store, clock, "volcano")
    for i in range(SPAM_BURST + 5):
        await recorder.record(ref("p"), "Normal", f"Reason{i}", "m")
    await recorder.record(ref("q"), "Normal", "Reason0", "m")
    names = [e["involvedObject"]["name"] for e in await events(store)]
    assert names.count("p") == SPAM_BURST
    assert names.count("q") == 1


async def test_memory_is_bounded_over_many_objects() -> None:
    clock = VirtualClock(0)
    store = MemoryStore(clock)
    recorder = EventRecorder(store, clock, "volcano")
    for i in range(SPAM_OBJECTS + 100):
        await recorder.record(ref(f"p{i}"), "Normal", "Scheduled", "ok")
    assert len(recorder.spam._buckets) <= SPAM_OBJECTS
    assert len(recorder._seen) <= SPAM_OBJECTS

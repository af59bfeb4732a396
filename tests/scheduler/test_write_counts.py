"""What a cycle costs the API server: a PodGroup's status is written once per change, never per
pod; nothing is rewritten while nothing changed; a repeated event is a PATCH of its count."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import Obj
from stromboli.core.scheduler.conf import ConfigSource
from stromboli.core.scheduler.scheduler import Scheduler

from .builders import BASIC_CONF, node, pod, podgroup


class CountingStore(MemoryStore):
    """Counts writes by (verb, kind)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.writes: Counter[tuple[str, str]] = Counter()

    async def create(self, obj: Obj) -> Obj:
        self.writes["create", obj["kind"]] += 1
        return await super().create(obj)

    async def update(self, obj: Obj) -> Obj:
        self.writes["update", obj["kind"]] += 1
        return await super().update(obj)

    async def update_status(self, obj: Obj) -> Obj:
        self.writes["update_status", obj["kind"]] += 1
        return await super().update_status(obj)

    async def patch(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> Obj:
        self.writes["patch", kind] += 1
        return await super().patch(api_version, kind, *args, **kwargs)

    async def bind(self, *args: Any, **kwargs: Any) -> None:
        self.writes["bind", "Pod"] += 1
        await super().bind(*args, **kwargs)

    async def delete(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> None:
        self.writes["delete", kind] += 1
        await super().delete(api_version, kind, *args, **kwargs)


async def started(
    tmp_path: Path, *objects: dict, store_type: type[CountingStore] = CountingStore
) -> tuple[CountingStore, Scheduler]:
    clock = VirtualClock(1000)
    store = store_type(clock)
    conf = tmp_path / "scheduler.conf"
    conf.write_text(BASIC_CONF)
    scheduler = Scheduler(store, clock, ConfigSource(conf))
    await scheduler.start()
    for obj in objects:
        await store.create(obj)
    store.writes.clear()
    return store, scheduler


def gang(name: str, size: int, cpu: str) -> list[dict]:
    return [podgroup(name, size)] + [pod(f"{name}-{i}", group=name, cpu=cpu) for i in range(size)]


def by_kind(writes: Counter[tuple[str, str]], kind: str) -> Counter[str]:
    return Counter({verb: n for (verb, k), n in writes.items() if k == kind})


async def test_a_gang_of_twenty_bound_in_one_cycle_is_one_podgroup_write(tmp_path: Path) -> None:
    store, scheduler = await started(tmp_path, node("n1", cpu="32"), *gang("g", 20, "1"))
    stats = await scheduler.run_once()
    assert stats.bound == 20
    assert by_kind(store.writes, "PodGroup") == Counter(update=1)
    assert store.writes["bind", "Pod"] == 20
    assert store.writes["update_status", "Pod"] == 0  # no pod is left waiting: no conditions
    group = await store.get("scheduling.volcano.sh/v1beta1", "PodGroup", "g", "default")
    assert group["status"]["phase"] == "Running"


async def test_a_cycle_with_nothing_new_writes_no_status(tmp_path: Path) -> None:
    store, scheduler = await started(tmp_path, node("n1", cpu="32"), *gang("g", 20, "1"))
    await scheduler.run_once()
    store.writes.clear()
    await scheduler.run_once()
    assert store.writes == Counter()


async def test_a_gang_that_cannot_fit_costs_one_event_patch_per_cycle_after_the_first(
    tmp_path: Path,
) -> None:
    store, scheduler = await started(tmp_path, node("n1", cpu="4"), *gang("big", 5, "1"))
    await scheduler.run_once()
    first = Counter(store.writes)
    assert first["update", "PodGroup"] <= 1
    assert first["update_status", "Pod"] == 5  # each pod says once why it waits
    store.writes.clear()
    for _ in range(3):
        await scheduler.run_once()
    # The gang's Unschedulable event repeats (a count PATCH); status and conditions are as
    # written, so nothing else is.
    assert store.writes == Counter({("patch", "Event"): 3})
    (event,) = [
        e
        for e in (await store.list("v1", "Event")).items
        if e["reason"] == "Unschedulable" and e["involvedObject"]["kind"] == "PodGroup"
    ]
    assert event["count"] == 4

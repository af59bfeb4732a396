"""The shared Reconciler loop: one key that raises does not stop the others, the hooks a
subclass extends (work waiting, writes counted), and a live loop that ends when cancelled."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from stromboli.core.api.keys import Key
from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.reconciler import Reconciler

CM = ("v1", "ConfigMap")


class Things(Reconciler[Key]):
    noun = "thing"

    def __init__(self, store: MemoryStore, fail: set[str] | None = None) -> None:
        super().__init__(store, SystemClock(), [CM], None, "things")
        self.fail = fail or set()
        self.synced: list[Key] = []
        self.extra: list[str] = []

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self._mark((meta["namespace"], meta["name"]))

    async def _sync(self, key: Key) -> None:
        self.synced.append(key)
        if key[1] in self.fail:
            raise RuntimeError(f"cannot sync {key[1]}")
        self.writes += 1


class WithExtraWork(Things):
    """A subclass with work of its own beside the dirty keys, and writes of a helper."""

    helper_writes = 0

    def _has_work(self) -> bool:
        return bool(self._dirty or self.extra)

    @property
    def write_count(self) -> int:
        return self.writes + self.helper_writes

    async def _process(self) -> None:
        while self.extra:
            self.extra.pop()
            self.helper_writes += 1
        await super()._process()


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}


def memory_store() -> MemoryStore:
    return MemoryStore(SystemClock(), seed=0)


async def test_a_key_that_raises_is_logged_and_the_others_are_reconciled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = memory_store()
    for name in ("a", "b", "c"):
        await store.create(cm(name))
    things = Things(store, fail={"b"})
    with caplog.at_level(logging.ERROR):
        assert await things.step() == 2
    assert sorted(things.synced) == [("ns", "a"), ("ns", "b"), ("ns", "c")]
    failed = [r for r in caplog.records if r.name == __name__]
    assert [r.getMessage() for r in failed] == ["thing ns/b: sync failed"]
    assert await things.step() == 0  # nothing marked: nothing synced again
    assert len(things.synced) == 3


async def test_step_asks_the_subclass_for_work_and_counts_its_writes() -> None:
    store = memory_store()
    things = WithExtraWork(store)
    await things.start()
    things.extra.append("queue")  # no key is dirty, yet there is work
    assert await things.step() == 1
    assert things.helper_writes == 1 and things.synced == []


async def test_a_live_loop_cancelled_as_it_is_woken_ends() -> None:
    store = memory_store()
    things = Things(store)
    running = asyncio.create_task(things.run())
    for _ in range(20):  # let it list, and idle waiting for a wake
        await asyncio.sleep(0)
    assert things._wake is not None and not running.done()
    things._wake.set()  # a wake and a cancellation in the same turn of the loop
    running.cancel()
    done, _ = await asyncio.wait({running}, timeout=2)
    assert done == {running}, "run() went on after it was cancelled"
    assert running.cancelled()

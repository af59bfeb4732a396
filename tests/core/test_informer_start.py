"""An informer's start lists every kind at once (a restart waits on the slowest list, not on
their sum) and still folds the objects in kind by kind, in its own order."""

from __future__ import annotations

import asyncio
from typing import Any

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import ObjectList
from stromboli.core.informer import Informer

NODE = ("v1", "Node")
POD = ("v1", "Pod")
CM = ("v1", "ConfigMap")


class GatedStore(MemoryStore):
    """Each list answers only once every kind's list has been asked for."""

    def __init__(self, kinds: int) -> None:
        super().__init__(VirtualClock(), seed=0)
        self.waiting = 0
        self.kinds = kinds
        self.all_asked = asyncio.Event()
        self.answered: list[str] = []

    async def list(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> ObjectList:
        self.waiting += 1
        if self.waiting == self.kinds:
            self.all_asked.set()
        await self.all_asked.wait()
        if kind == "Node":
            await asyncio.sleep(0.01)  # the first kind answers last
        self.answered.append(kind)
        return await super().list(api_version, kind, *args, **kwargs)


def obj(kind: tuple[str, str], name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if kind != NODE:
        meta["namespace"] = "default"
    return {"apiVersion": kind[0], "kind": kind[1], "metadata": meta}


async def test_start_lists_every_kind_at_once_and_folds_them_in_order() -> None:
    store = GatedStore(kinds=3)
    for kind in (POD, CM, NODE):
        for n in range(2):
            await store.create(obj(kind, f"{kind[1].lower()}-{n}"))
    seen: list[tuple[str, str]] = []
    informer = Informer(store, [NODE, POD, CM], lambda k, t, o: seen.append((k[1], t)))
    await asyncio.wait_for(informer.start(), 5)  # one list at a time would never get answers
    assert store.answered[-1] == "Node"
    assert seen == [("Node", "ADDED")] * 2 + [("Pod", "ADDED")] * 2 + [("ConfigMap", "ADDED")] * 2
    await store.create(obj(POD, "later"))
    assert await informer.pump() == 1
    assert seen[-1] == ("Pod", "ADDED")
    await informer.stop()

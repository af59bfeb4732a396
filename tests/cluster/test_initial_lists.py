"""Which lists may come from the API server's watch cache (``cached``: resourceVersion=0).

A process's first list of a kind may be a little stale (the watch from its version brings it
up to date) and is then one response from the watch cache instead of pages read from etcd;
a list after 410 Gone must not be older than what the process already holds, so it is a
consistent read. Every long-running reader of the scheduler, the controller and the webhook
is held to that here, on a memory store that records how it was asked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import ObjectList, WatchStream
from stromboli.core.controller.kopfdriver import KopfDriver
from stromboli.core.informer import Informer
from stromboli.webhooks.owners import WATCHED, OwnerCache

POD = ("v1", "Pod")
NODE = ("v1", "Node")


class RecordingStore(MemoryStore):
    """A memory store that notes every list's ``cached`` flag and, on request, opens the
    next watch of a kind from a version it no longer keeps (its iteration raises 410 Gone)."""

    def __init__(self) -> None:
        super().__init__(VirtualClock(), history_limit=1, seed=1)
        self.lists: list[tuple[str, bool]] = []
        self.expire: set[str] = set()

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        cached: bool = False,
    ) -> ObjectList:
        self.lists.append((kind, cached))
        return await super().list(
            api_version, kind, namespace, label_selector, field_selector, cached=cached
        )

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> WatchStream:
        if kind in self.expire:
            self.expire.discard(kind)
            resource_version = "1"  # compacted: the store keeps one change, and made several
        return super().watch(api_version, kind, namespace, resource_version)


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "d"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


def replica_set(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "d"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod(name)["spec"]},
        },
    }


async def filled() -> RecordingStore:
    store = RecordingStore()
    for i in range(3):
        await store.create(pod(f"p{i}"))
    return store


async def test_informer_lists_first_from_the_cache_and_after_gone_consistently() -> None:
    store = await filled()
    seen: list[tuple[str, str]] = []
    informer = Informer(
        store, [NODE, POD], lambda kind, t, obj: seen.append((t, obj["metadata"]["name"]))
    )
    store.expire.add("Pod")
    await informer.start()
    assert store.lists == [("Node", True), ("Pod", True)]
    assert sorted(seen) == [("ADDED", f"p{i}") for i in range(3)]
    await informer.pump()  # the pod watch was opened too old: 410, so a list again
    assert store.lists[2:] == [("Pod", False)]
    await store.create(pod("later"))
    await informer.pump()
    assert seen[-1] == ("ADDED", "later")  # and the new watch follows
    await informer.stop()


async def test_kopf_drivers_first_listing_is_cached_and_its_resyncs_are_not() -> None:
    store = await filled()
    informer = Informer(store, [POD], lambda kind, t, obj: None, fed=True)
    driver = KopfDriver(store, [informer])  # type: ignore[arg-type]  # any store will do
    await driver.resync(POD)
    await driver.resync(POD)
    assert store.lists == [("Pod", True), ("Pod", False)]


async def test_webhook_owner_cache_lists_first_from_the_cache_and_after_gone_consistently() -> None:
    store = await filled()
    expired = WATCHED[0][1]
    assert WATCHED[0] == ("apps/v1", "ReplicaSet")
    for i in range(3):  # changes of that kind, so that the store drops all but the last
        await store.create(replica_set(f"rs{i}"))
    store.expire.add(expired)
    cache = OwnerCache(store)
    await cache.start()
    try:
        async with asyncio.timeout(10):
            while len(store.lists) < len(WATCHED) + 1:
                await asyncio.sleep(0.01)
    finally:
        await cache.stop()
    by_kind = {kind: [cached for k, cached in store.lists if k == kind] for _, kind in WATCHED}
    assert by_kind == {kind: [True, False] if kind == expired else [True] for _, kind in WATCHED}
    assert cache.listed == set(WATCHED)

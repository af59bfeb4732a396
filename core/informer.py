"""Feeds store events for several kinds into a handler: list first, then watch.

Two modes share the code: ``pump()`` drains whatever events are queued right now, without
waiting (the simulator calls it between steps, which keeps runs deterministic), while ``run()``
consumes streams as they arrive (long-running processes). A watch that reports its resource
version is too old (410 Gone) is replaced by a fresh list and watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from stromboli.core.cluster.errors import GoneError
from stromboli.core.cluster.store import ClusterStore, WatchStream

log = logging.getLogger(__name__)

Kind = tuple[str, str]
Handler = Callable[[Kind, str, dict], None]


class Informer:
    def __init__(self, store: ClusterStore, kinds: Sequence[Kind], handler: Handler) -> None:
        self.store = store
        self.kinds = list(kinds)
        self.handler = handler
        self.streams: dict[Kind, WatchStream] = {}
        self.known: dict[Kind, dict[tuple[str, str], dict]] = {kind: {} for kind in self.kinds}

    async def start(self) -> None:
        for kind in self.kinds:
            await self._relist(kind)

    async def _relist(self, kind: Kind) -> None:
        """List ``kind``, reconcile with what was known (synthesising deletions), then watch."""
        old = self.streams.pop(kind, None)
        if old is not None:
            await old.aclose()
        listed = await self.store.list(*kind)
        seen: dict[tuple[str, str], dict] = {}
        for obj in listed.items:
            meta = obj["metadata"]
            seen[(meta.get("namespace") or "", meta["name"])] = obj
        for key, obj in self.known[kind].items():
            if key not in seen:
                self._deliver(kind, "DELETED", obj)
        for obj in seen.values():
            self._deliver(kind, "ADDED", obj)
        self.streams[kind] = self.store.watch(*kind, resource_version=listed.resource_version)

    def _deliver(self, kind: Kind, event_type: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name", ""))
        if event_type == "DELETED":
            self.known[kind].pop(key, None)
        elif event_type != "BOOKMARK":
            self.known[kind][key] = obj
        if event_type != "BOOKMARK":
            self.handler(kind, event_type, obj)

    async def pump(self) -> int:
        """Apply every event already queued on the streams; returns how many."""
        applied = 0
        for kind in self.kinds:
            stream = self.streams[kind]
            try:
                events = stream.drain()
            except GoneError:
                await self._relist(kind)
                continue
            for event in events:
                self._deliver(kind, event.type, event.object)
            applied += len(events)
        return applied

    async def run(self) -> None:
        """Consume every stream until cancelled, relisting after 410 Gone."""
        await asyncio.gather(*(self._follow(kind) for kind in self.kinds))

    async def _follow(self, kind: Kind) -> None:
        while True:
            try:
                async for event in self.streams[kind]:
                    self._deliver(kind, event.type, event.object)
            except GoneError:
                log.info("watch of %s expired; listing again", kind[1])
            await self._relist(kind)

    async def stop(self) -> None:
        for stream in self.streams.values():
            await stream.aclose()
        self.streams.clear()

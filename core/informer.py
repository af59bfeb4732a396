"""Feeds store events for several kinds into a handler: list first, then watch.

Two modes share the code: ``pump()`` drains whatever events are queued right now, without
waiting (the simulator calls it between steps, which keeps runs deterministic), while ``run()``
consumes streams as they arrive (long-running processes). A watch that reports its resource
version is too old (410 Gone) is replaced by a fresh list and watch.

A *fed* informer (``fed=True``) opens no streams: another source (the kopf operator of
``stromboli controller``) hands it events through ``feed()`` and full listings through
``resync()``. It drops duplicates and stale versions (two sources may deliver one change twice)
and synthesises the deletions a source missed while its watch was down; ``start()`` waits for
the first listing of every kind, so a controller never acts on half a picture.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from stromboli.core.api.keys import Key, object_key
from stromboli.core.cluster.errors import GoneError
from stromboli.core.cluster.store import ClusterStore, ObjectList, WatchStream
from stromboli.core.quarantine import Quarantine

log = logging.getLogger(__name__)

Kind = tuple[str, str]
Handler = Callable[[Kind, str, dict], None]
#: Uids of deleted objects a fed informer remembers, so that a late or listed copy of one
#: (its events and a listing race) does not bring it back; a uid is never reused.
TOMBSTONES = 10_000


def _uid(obj: dict) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _version(obj: dict) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


class Informer:
    def __init__(
        self,
        store: ClusterStore,
        kinds: Sequence[Kind],
        handler: Handler,
        *,
        fed: bool = False,
        quarantine: Quarantine | None = None,
    ) -> None:
        self.store = store
        #: Where objects the handler cannot read are set aside (the handler's owner publishes
        #: them as events); without one they are logged and counted only.
        self.quarantine = quarantine or Quarantine("informer")
        self.kinds = list(kinds)
        self.handler = handler
        self.fed = fed
        self.streams: dict[Kind, WatchStream] = {}
        self.known: dict[Kind, dict[Key, dict]] = {kind: {} for kind in self.kinds}
        self._listed: set[Kind] = set()
        #: Kinds listed and watched at least once (their next list must be consistent).
        self._watched: set[Kind] = set()
        self._tombstones: dict[str, None] = {}
        self._synced = asyncio.Event()
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        """List and watch every kind; a fed informer waits for its first listings instead."""
        if self.fed:
            await self._synced.wait()
            return
        # Every kind's first list at once: the API server prepares the large ones (a
        # restart's pods) side by side with the rest; the objects are still folded in kind
        # by kind in this informer's order (nodes before pods), as one list at a time did.
        async with asyncio.TaskGroup() as lists:
            pending = [lists.create_task(self._list(kind)) for kind in self.kinds]
        for kind, listed in zip(self.kinds, pending, strict=True):
            self._fold(kind, listed.result())

    async def _relist(self, kind: Kind) -> None:
        """List ``kind``, reconcile with what was known (synthesising deletions), then watch."""
        self._fold(kind, await self._list(kind))

    async def _list(self, kind: Kind) -> ObjectList:
        old = self.streams.pop(kind, None)
        if old is not None:
            await old.aclose()
        # The first list may come from the server's cache; after 410 Gone it must not be
        # older than what this informer already holds, so it is a consistent read.
        listed = await self.store.list(*kind, cached=kind not in self._watched)
        self._watched.add(kind)
        return listed

    def _fold(self, kind: Kind, listed: ObjectList) -> None:
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
        key = object_key(obj)
        if event_type == "DELETED":
            self.known[kind].pop(key, None)
            if self.fed and _uid(obj):
                self._tombstones[_uid(obj)] = None
                if len(self._tombstones) > TOMBSTONES:
                    del self._tombstones[next(iter(self._tombstones))]
        elif event_type != "BOOKMARK":
            self.known[kind][key] = obj
        if event_type == "BOOKMARK":
            return
        if event_type == "DELETED":
            self.quarantine.forget(obj, kind[1])
        try:
            self.handler(kind, event_type, obj)
        except Exception as err:  # crash-only: one unreadable object never stops the process
            log.debug("handler failed on %s", kind[1], exc_info=True)
            self.quarantine.reject(obj, err, kind[1])

    # --- fed from outside ----------------------------------------------------------------------

    def feed(self, kind: Kind, event_type: str, obj: dict) -> bool:
        """Deliver one event from an outside source unless it is old news; returns whether
        the handler saw it. ``ADDED`` of a known object arrives as ``MODIFIED``, and an object
        replaced under the same name (another uid) is first deleted."""
        if kind not in self.known or event_type == "BOOKMARK":
            return False
        known = self.known[kind].get(object_key(obj))
        same = known is not None and _uid(known) == _uid(obj)
        if event_type == "DELETED":
            if not same:
                return False  # never seen, or an older object of that name
            self._deliver(kind, event_type, obj)
            return True
        if _uid(obj) in self._tombstones:
            return False  # a copy of an object already deleted
        if known is not None and not same:
            self._deliver(kind, "DELETED", known)
            known = None
        if known is not None:
            old, new = _version(known), _version(obj)
            if old is not None and new is not None and new <= old:
                return False  # a duplicate, or older than what we hold
            event_type = "MODIFIED"
        else:
            event_type = "ADDED"
        self._deliver(kind, event_type, obj)
        return True

    def snapshot(self, kind: Kind) -> dict[Key, str]:
        """The uid of every object known now; take it before listing for ``resync``."""
        return {key: _uid(obj) for key, obj in self.known[kind].items()}

    def resync(self, kind: Kind, items: Sequence[dict], before: dict[Key, str]) -> int:
        """Fold in a full listing of ``kind`` begun after ``before`` was taken: objects known
        then and absent from the listing were deleted unseen; returns how many deletions that
        made. The first listing of every kind releases ``start()``."""
        listed = {object_key(obj) for obj in items}
        vanished = 0
        for key, uid in before.items():
            current = self.known[kind].get(key)
            if key not in listed and current is not None and _uid(current) == uid:
                self._deliver(kind, "DELETED", current)
                vanished += 1
        for obj in items:
            self.feed(kind, "ADDED", obj)
        self._listed.add(kind)
        if self._listed.issuperset(self.kinds):
            self._synced.set()
        return vanished

    # --- list and watch -----------------------------------------------------------------------

    async def pump(self) -> int:
        """Apply every event already queued on the streams; returns how many."""
        if self.fed:
            return 0  # fed events reach the handler as they are fed
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
        """Consume every stream until cancelled, relisting after 410 Gone; a fed informer
        waits until ``stop()``."""
        if self.fed:
            await self._stopped.wait()
            return
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
        self._stopped.set()
        for stream in self.streams.values():
            await stream.aclose()
        self.streams.clear()

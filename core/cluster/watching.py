"""Per-kind change history and watch streams for the in-memory store.

Each kind keeps a bounded history of serialized changes, so a watch can resume from a
resourceVersion a consumer saw in a list or an earlier event, as informers do after a reconnect.
Events are stored once as JSON bytes and decoded per consumer, which gives every watcher its own
copy without copying for watchers that never read.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Iterator

import orjson

from stromboli.core.cluster.errors import ApiError, GoneError
from stromboli.core.cluster.store import WatchEvent, WatchEventType, WatchStream

Change = tuple[int, WatchEventType, str, bytes]
"""``(resourceVersion, event type, namespace, object as JSON)``."""


class History:
    """The last ``limit`` changes of one kind, and the newest version already dropped."""

    __slots__ = ("changes", "compacted", "watchers")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"history limit must be at least 1, got {limit}")
        self.changes: deque[Change] = deque(maxlen=limit)
        self.compacted = 0
        self.watchers: dict[int, weakref.ref[MemoryWatch]] = {}

    def add(self, watch: MemoryWatch) -> None:
        """Hold ``watch`` weakly: one its consumer dropped unclosed must not queue forever."""
        key = id(watch)
        watchers = self.watchers
        watchers[key] = weakref.ref(watch, lambda _: watchers.pop(key, None))

    def discard(self, watch: MemoryWatch) -> None:
        self.watchers.pop(id(watch), None)

    def record(self, rv: int, event_type: WatchEventType, namespace: str, raw: bytes) -> None:
        """Retain the change and hand it to every open watch of this kind, in commit order."""
        changes = self.changes
        if len(changes) == changes.maxlen:
            self.compacted = changes[0][0]
        changes.append((rv, event_type, namespace, raw))
        if self.watchers:
            for ref in list(self.watchers.values()):
                watch = ref()
                if watch is not None:
                    watch.offer(rv, event_type, namespace, raw)

    def since(self, rv: int, namespace: str | None) -> Iterator[Change]:
        """Retained changes after ``rv``; :class:`GoneError` if some of them were dropped."""
        if rv < self.compacted:
            oldest = self.changes[0][0] if self.changes else self.compacted + 1
            raise GoneError(
                f"too old resource version: {rv} (the oldest retained change is {oldest}); "
                "list again and watch from the list's resourceVersion"
            )
        return (
            change
            for change in self.changes
            if change[0] > rv and (namespace is None or change[2] == namespace)
        )

    def close_all(self) -> None:
        for ref in list(self.watchers.values()):
            watch = ref()
            if watch is not None:
                watch.close()


class MemoryWatch(WatchStream):
    """One consumer's queue of changes; it ends when closed, raises first if it failed to open."""

    def __init__(self, history: History, namespace: str | None, after: int) -> None:
        self._history = history
        self._namespace = namespace
        self._after = after
        self._pending: deque[tuple[WatchEventType, bytes]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._error: ApiError | None = None

    @classmethod
    def failed(cls, history: History, error: ApiError) -> MemoryWatch:
        """A stream whose first iteration raises ``error`` (as a real watch fails on start)."""
        watch = cls(history, None, 0)
        watch._error = error
        return watch

    def open(self) -> None:
        self._history.add(self)

    def push(self, event_type: WatchEventType, raw: bytes) -> None:
        self._pending.append((event_type, raw))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def offer(self, rv: int, event_type: WatchEventType, namespace: str, raw: bytes) -> None:
        """A live change: queue it if it is in this watch's namespace and after its start."""
        if rv > self._after and (self._namespace is None or self._namespace == namespace):
            self.push(event_type, raw)

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._pending:
                event_type, raw = self._pending.popleft()
                return WatchEvent(event_type, orjson.loads(raw))
            if self._error is not None:
                error, self._error = self._error, None
                self._closed = True
                raise error
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def drain(self) -> list[WatchEvent]:
        """Every event queued now, without waiting (raises the open error, if any)."""
        if self._error is not None:
            error, self._error = self._error, None
            self._closed = True
            raise error
        events = [WatchEvent(t, orjson.loads(raw)) for t, raw in self._pending]
        self._pending.clear()
        return events

    def close(self) -> None:
        """End the stream now; queued but unread events are dropped."""
        self._closed = True
        self._pending.clear()
        self._history.discard(self)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def aclose(self) -> None:
        self.close()

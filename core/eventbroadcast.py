"""Events written in the background by a small pool, so that recording one never waits on the
API server (client-go's broadcaster: the recorder hands events to a channel, a watcher goroutine
writes them).

A record is queued and the call returns. Repeats of an event still waiting to be written are
folded into it (one write carries their count), and a key being written is never written by two
workers at once (a repeat waits for the create, then PATCHes the count on the object it made).
At most ``backlog`` distinct events wait; beyond that a new one is dropped and counted
(``backlog``), as client-go drops on a full channel, so a burst costs bounded memory and the
cycle that caused it is not slowed. The bound is ten times client-go's 1,000: one cycle that
binds a few thousand pods records an event per pod and one per PodGroup at once, and these
are the events users read (a waiting event costs a few hundred bytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from stromboli.core.clock import Clock, format_time
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventKey, EventRecorder, Occurrence

log = logging.getLogger(__name__)

#: Writers in flight: each holds at most one client rate-limit reservation, so bindings queued
#: behind events wait for at most this many of them.
EVENT_WORKERS = 8
#: Distinct events waiting to be written before new ones are dropped (client-go: 1,000).
EVENT_BACKLOG = 10_000
#: Seconds ``close`` waits for the backlog to drain before it gives up on the rest.
CLOSE_TIMEOUT = 5.0


class EventBroadcaster(EventRecorder):
    """An ``EventRecorder`` whose ``record`` queues; writers start on the first record."""

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        component: str,
        workers: int = EVENT_WORKERS,
        backlog: int = EVENT_BACKLOG,
    ) -> None:
        super().__init__(store, clock, component)
        if workers < 1 or backlog < 1:
            raise ValueError(f"workers and backlog must be at least 1 (got {workers}, {backlog})")
        self.workers = workers
        self.backlog = backlog
        self._pending: dict[EventKey, Occurrence] = {}
        self._writing: set[EventKey] = set()
        self._ready: asyncio.Queue[EventKey] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def waiting(self) -> int:
        """Events queued or being written."""
        return len(self._pending) + len(self._writing)

    async def record(self, involved: dict, event_type: str, reason: str, message: str) -> None:
        key = self.admit(involved, event_type, reason, message)
        if key is None:
            return
        now = format_time(self.clock.now())
        waiting = self._pending.get(key)
        if waiting is not None:
            waiting.repeats += 1
            waiting.last = now
            return
        if len(self._pending) >= self.backlog:
            self._drop("backlog")
            return
        self._pending[key] = Occurrence(involved, event_type, reason, message, now, now)
        self._idle.clear()
        if key not in self._writing:  # else the writer queues it again when its write ends
            self._ready.put_nowait(key)
        self._start()

    def _start(self) -> None:
        self._tasks = [task for task in self._tasks if not task.done()]
        while len(self._tasks) < self.workers:
            self._tasks.append(asyncio.create_task(self._work(), name="event-writer"))

    async def _work(self) -> None:
        while True:
            key = await self._ready.get()
            event = self._pending.pop(key, None)
            if event is None:
                continue
            self._writing.add(key)
            try:
                await self.write(key, event)  # logs its own failures
            except Exception:  # a writer must outlive any one event
                log.exception("writing event %s failed", event.reason)
            finally:
                self._writing.discard(key)
            if key in self._pending:
                self._ready.put_nowait(key)
            elif not self._pending and not self._writing:
                self._idle.set()

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued event is written; False if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Write what is queued (for up to ``timeout`` seconds), then stop the writers."""
        if not await self.flush(timeout):
            log.warning("%d events left unwritten at shutdown", self.waiting)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

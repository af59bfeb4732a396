"""Watch streams over a real API server: resumable, reconnecting, with bookmarks.

A :class:`KubeWatch` runs one background task that reads the server's line-delimited JSON and
queues events, so a step-driven consumer can :meth:`~KubeWatch.drain` what already arrived and a
long-running one can iterate. The task remembers the resourceVersion of every event, bookmarks
included, and when the server ends the stream (its ``timeoutSeconds`` is up) or the connection
breaks (an API server restart) it reconnects from there, with exponential backoff while the server
is unreachable. The consumer sees one uninterrupted stream; only ``410 Gone`` (the version is
older than what the server retains) reaches it, as :class:`GoneError`, because only a new list
can recover from that.

Without a starting version the stream lists first and sends the items as ``ADDED``, then
watches from the list's version. The server could send those synthetic events itself, but then a
reconnect before the first real event would have no version to resume from and would send them
all again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

import aiohttp

from stromboli.core.cluster import jsondecode
from stromboli.core.cluster.errors import ApiError, GoneError
from stromboli.core.cluster.kubehttp import KubeTransport, error_from_status
from stromboli.core.cluster.kuberesources import Resource
from stromboli.core.cluster.store import ADDED, ObjectList, WatchEvent, WatchStream

log = logging.getLogger(__name__)

EVENT_TYPES: Final = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})
INITIAL_BACKOFF: Final = 0.25
READ_GRACE: Final = 30.0
"""How much longer than ``timeoutSeconds`` a silent connection may stay open before we call it
dead: the server ends the stream itself at its timeout, so silence beyond it means no server."""

Lister = Callable[[], Awaitable[ObjectList]]


def retryable(error: ApiError) -> bool:
    """Server-side trouble that a new connection may not have: 5xx and throttling."""
    return error.code >= 500 or error.code == 429


class KubeWatch(WatchStream):
    """One watch of one kind (in one namespace, or all); see the module docstring."""

    def __init__(
        self,
        transport: KubeTransport,
        resolve: Callable[[], Awaitable[Resource]],
        lister: Lister,
        namespace: str | None,
        resource_version: str | None,
        *,
        timeout_seconds: int,
        max_backoff: float,
        strip_managed_fields: bool = True,
        on_close: Callable[[KubeWatch], None] | None = None,
    ) -> None:
        self._transport = transport
        self._resolve = resolve
        self._lister = lister
        self._namespace = namespace
        self.resource_version = "" if resource_version in (None, "0") else str(resource_version)
        """The newest version seen (events and bookmarks); where a reconnect resumes."""
        self.timeout_seconds = timeout_seconds
        self.max_backoff = max_backoff
        self.strip_managed_fields = strip_managed_fields
        self.connects = 0
        """How many times a stream was opened (1 + reconnects); for tests and metrics."""
        self._on_close = on_close
        self._pending: deque[WatchEvent] = deque()
        self._error: BaseException | None = None
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._start()

    # --- consumer side ----------------------------------------------------------------------

    def _start(self) -> None:
        """Start reading (at once when created inside a running loop, else on first use)."""
        if self._task is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._task = loop.create_task(self._run(), name="stromboli-kube-watch")

    async def __anext__(self) -> WatchEvent:
        self._start()
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._error is not None:
                self._raise()
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def drain(self) -> list[WatchEvent]:
        """Events received so far, without waiting; the stream's error once they are read."""
        self._start()
        if self._pending:
            events = list(self._pending)
            self._pending.clear()
            return events
        if self._error is not None:
            self._raise()
        return []

    def _raise(self) -> None:
        error, self._error = self._error, None
        self.close()
        assert error is not None
        raise error

    def close(self) -> None:
        """Stop now; queued but unread events are dropped."""
        if not self._closed:
            self._closed = True
            if self._on_close is not None:
                self._on_close(self)
        self._pending.clear()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        self._wake()

    async def aclose(self) -> None:
        self.close()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait([task])

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- reader side ------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            resource = await self._resolve()
            if not self.resource_version:
                listed = await self._lister()
                self._pending.extend(WatchEvent(ADDED, obj) for obj in listed.items)
                self.resource_version = listed.resource_version
                self._wake()
            await self._follow_forever(resource)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # handed to the consumer, who decides
            self._error = error
            self._wake()

    async def _follow_forever(self, resource: Resource) -> None:
        namespace = self._namespace if resource.namespaced else None
        path = resource.collection(namespace)
        backoff = INITIAL_BACKOFF
        while not self._closed:
            opened = self.connects
            try:
                await self._follow(path)
                continue  # the server ended the stream at its timeout: resume at once
            except GoneError:
                raise
            except ApiError as error:
                if not retryable(error):
                    raise
                problem: BaseException = error
            except (aiohttp.ClientError, TimeoutError, OSError) as error:
                problem = error
            if self.connects > opened:
                backoff = INITIAL_BACKOFF  # it was up a moment ago; do not wait long
            delay = backoff * random.uniform(0.8, 1.2)
            log.info(
                "watch of %s from version %s interrupted (%r); reconnecting in %.2fs",
                path,
                self.resource_version,
                problem,
                delay,
            )
            await asyncio.sleep(delay)
            backoff = min(backoff * 2, self.max_backoff)

    async def _follow(self, path: str) -> None:
        """One watch request, read until the server ends it."""
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            # Jitter, so that the watches of a process do not all reconnect at one moment.
            "timeoutSeconds": str(int(self.timeout_seconds * random.uniform(1.0, 1.25))),
        }
        async with self._transport.stream(
            path, params, read_timeout=self.timeout_seconds * 1.25 + READ_GRACE
        ) as resp:
            self.connects += 1
            partial: list[bytes] = []
            async for chunk in resp.content.iter_any():
                if b"\n" not in chunk:
                    partial.append(chunk)
                    continue
                if partial:
                    partial.append(chunk)
                    chunk = b"".join(partial)
                    partial.clear()
                *lines, rest = chunk.split(b"\n")
                if rest:
                    partial.append(rest)
                received = False
                for line in lines:
                    if line:
                        received |= self._handle(line)
                if received:
                    self._wake()
            if partial and b"".join(partial).strip():
                log.warning("watch of %s ended inside an event; resuming before it", path)

    def _handle(self, line: bytes) -> bool:
        """Queue one event line; ``True`` if it was an event for the consumer."""
        event = jsondecode.loads(line)
        event_type = event.get("type")
        obj = event.get("object")
        if event_type == "ERROR":
            raise error_from_status(obj if isinstance(obj, dict) else {})
        if event_type not in EVENT_TYPES or not isinstance(obj, dict):
            log.warning("ignoring a watch event of unknown shape: %.200r", line)
            return False
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if version:
            self.resource_version = version
        if self.strip_managed_fields:
            meta.pop("managedFields", None)
        if self._closed:
            return False
        self._pending.append(WatchEvent(event_type, obj))
        return True

"""How the controllers are driven: watch events mark keys dirty, and each key is reconciled
from the cached objects, stepped by the simulator or run live.

The CronJob and JobFlow controllers mark object keys and reconcile one key at a time
(:meth:`Reconciler._sync`); the vcjob controller marks requests about a job and overrides
:meth:`Reconciler._process` and the other hooks to batch them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from stromboli.core.clock import Clock
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventRecorder
from stromboli.core.informer import Informer
from stromboli.core.quarantine import Quarantine

#: What a reconciler marks dirty: an object key, or (the vcjob controller) a request.
K = TypeVar("K", bound=Hashable)
JobMutator = Callable[[dict[str, Any]], dict[str, Any]]
#: Reconcile rounds per ``step``: a round's writes come back as events for the next one.
MAX_ROUNDS = 50
#: Longest live wait between looks at the watches when nothing wakes the loop.
WATCH_CHECK_SECONDS = 5.0


def is_newer(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether ``new`` replaces ``old`` in a cache (another uid, or a later version)."""
    if old is None or new["metadata"].get("uid") != old["metadata"].get("uid"):
        return True
    try:
        return int(new["metadata"].get("resourceVersion") or 0) >= int(
            old["metadata"].get("resourceVersion") or 0
        )
    except ValueError:
        return True


class Reconciler(Generic[K]):
    """Subclasses implement ``_seen`` (fold an event into caches, ``_mark`` keys) and
    ``_sync`` (reconcile one dirty key), or override ``_process`` to take the dirty keys
    otherwise; timers use ``_collect_due``/``next_wakeup``."""

    #: What a key names, in log lines ("cronjob ns/name: sync failed").
    noun: ClassVar[str] = "object"

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        kinds: Sequence[tuple[str, str]],
        recorder: EventRecorder | None,
        component: str,
        mutate_job: JobMutator | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.recorder = recorder or EventRecorder(store, clock, component)
        self.mutate_job = mutate_job
        self.informer = Informer(store, kinds, self._seen, quarantine=Quarantine(component))
        self._dirty: dict[K, None] = {}
        self._wake: asyncio.Event | None = None
        self._started = False
        self.writes = 0

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _sync(self, key: K) -> None:
        raise NotImplementedError

    async def _process(self) -> None:
        """Reconcile the dirty keys one by one; one that raises is logged, the rest go on."""
        while self._dirty:
            key = next(iter(self._dirty))
            del self._dirty[key]
            try:
                await self._sync(key)
            except Exception:  # one bad object must not stop the others
                logging.getLogger(type(self).__module__).exception(
                    "%s %s: sync failed", self.noun, _display(key)
                )

    def _has_work(self) -> bool:
        """Whether ``_process`` has anything to do now."""
        return bool(self._dirty)

    @property
    def write_count(self) -> int:
        """Objects written so far (a subclass adds those of the helpers it owns)."""
        return self.writes

    async def _collect_due(self) -> None:
        """Act on timers that fell due, typically by marking their keys (none by default)."""

    def next_wakeup(self) -> float | None:
        """Monotonic time of the next timer; None when nothing waits on time."""
        return None

    def _mark(self, key: K) -> None:
        self._dirty[key] = None
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """List everything once and start watching; the listed objects arrive as events."""
        await self.informer.start()
        self._started = True

    async def step(self) -> int:
        """Reconcile what changed or fell due; returns how many objects were written."""
        if not self._started:
            await self.start()
        before = self.write_count
        for _ in range(MAX_ROUNDS):
            await self.informer.pump()
            await self._collect_due()
            if not self._has_work():
                break
            await self._process()
        await self.informer.quarantine.publish(self.recorder)
        return self.write_count - before

    async def run(self) -> None:
        """Follow the watches until cancelled (a live cluster)."""
        if not self._started:
            await self.start()
        self._wake = asyncio.Event()
        follow = asyncio.create_task(self.informer.run())
        try:
            while True:
                await self._collect_due()
                await self._process()
                await self.informer.quarantine.publish(self.recorder)
                timeout = WATCH_CHECK_SECONDS
                wakeup = self.next_wakeup()
                if wakeup is not None:
                    timeout = min(max(wakeup - self.clock.monotonic(), 0.0), timeout)
                if not self._has_work():
                    # asyncio.timeout, not wait_for: on Python 3.11, wait_for swallows a
                    # cancellation that arrives as the wake is set, and the loop never ends.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(timeout):
                            await self._wake.wait()
                self._wake.clear()
                if follow.done():
                    follow.result()  # a watch that died: surface its error
                    return
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)
            await self.informer.stop()


def _display(key: Hashable) -> str:
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)

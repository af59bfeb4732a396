"""How the CronJob and JobFlow controllers are driven: watch events mark object keys dirty,
and each key is reconciled from the cached objects, stepped by the simulator or run live."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stromboli.core.clock import Clock
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventRecorder
from stromboli.core.informer import Informer
from stromboli.core.quarantine import Quarantine

Key = tuple[str, str]
JobMutator = Callable[[dict[str, Any]], dict[str, Any]]
#: Reconcile rounds per ``step``: a round's writes come back as events for the next one.
MAX_ROUNDS = 50
#: Longest live wait between looks at the watches when nothing wakes the loop.
WATCH_CHECK_SECONDS = 5.0


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


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


class Reconciler:
    """Subclasses implement ``_seen`` (fold an event into caches, ``_mark`` keys) and
    ``_process`` (reconcile the dirty keys); timers use ``_collect_due``/``next_wakeup``."""

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
        self._dirty: dict[Key, None] = {}
        self._wake: asyncio.Event | None = None
        self._started = False
        self.writes = 0

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _process(self) -> None:
        raise NotImplementedError

    def _collect_due(self) -> None:
        """Mark keys whose timers fell due (none by default)."""

    def next_wakeup(self) -> float | None:
        """Monotonic time of the next timer; None when nothing waits on time."""
        return None

    def _mark(self, key: Key) -> None:
        self._dirty[key] = None
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        await self.informer.start()
        self._started = True

    async def step(self) -> int:
        """Reconcile what changed or fell due; returns how many objects were written."""
        if not self._started:
            await self.start()
        before = self.writes
        for _ in range(MAX_ROUNDS):
            await self.informer.pump()
            self._collect_due()
            if not self._dirty:
                break
            await self._process()
        await self.informer.quarantine.publish(self.recorder)
        return self.writes - before

    async def run(self) -> None:
        """Follow the watches until cancelled (a live cluster)."""
        if not self._started:
            await self.start()
        self._wake = asyncio.Event()
        follow = asyncio.create_task(self.informer.run())
        try:
            while True:
                self._collect_due()
                await self._process()
                await self.informer.quarantine.publish(self.recorder)
                timeout = WATCH_CHECK_SECONDS
                wakeup = self.next_wakeup()
                if wakeup is not None:
                    timeout = min(max(wakeup - self.clock.monotonic(), 0.0), timeout)
                if not self._dirty:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout)
                self._wake.clear()
                if follow.done():
                    follow.result()
                    return
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)
            await self.informer.stop()

"""One list+watch per framework kind, each started and stopped on its own.

A framework kind comes and goes with its CRD, while the controller runs; so its watch is
not one of the process's fixed watches (the kopf driver's are registered once, at start) but
an :class:`~stromboli.core.informer.Informer` of its own. A watch that fails (its CRD being
deleted, discovery not updated yet for a CRD just established, a kind the controller may not
list) is logged and tried again with backoff, never raised: one framework must not stop the
controller, and the CRD watch decides when a kind is dropped for good.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.informer import Handler, Informer, Kind
from stromboli.core.quarantine import Quarantine

log = logging.getLogger(__name__)

RETRY_MIN_SECONDS: Final = 1.0
RETRY_MAX_SECONDS: Final = 60.0


async def keep_following(
    informer: Informer, what: str, *, listed: bool = False, retry_max: float = RETRY_MAX_SECONDS
) -> None:
    """List and watch until cancelled (``listed``: the first list is done already); a
    failure is logged and the list and watch begun again after a backoff (doubling up to
    ``retry_max``, reset by a watch that held that long). The informer's streams are closed
    however this ends."""
    loop = asyncio.get_running_loop()
    delay = RETRY_MIN_SECONDS
    try:
        while True:
            began = loop.time()
            try:
                if not listed:
                    await informer.start()
                listed = False
                await informer.run()
                return
            except Exception as err:
                if loop.time() - began >= retry_max:
                    delay = RETRY_MIN_SECONDS
                level = logging.INFO if isinstance(err, NotFoundError) else logging.WARNING
                log.log(level, "watch of %s failed (%s); listing again in %.0fs", what, err, delay)
            await informer.stop()
            await asyncio.sleep(delay)
            delay = min(delay * 2, retry_max)
    finally:
        await informer.stop()


class KindWatches:
    """The watches of the framework kinds followed now (see the module docstring)."""

    def __init__(self, store: ClusterStore, handler: Handler, quarantine: Quarantine) -> None:
        self.store = store
        self.handler = handler
        self.quarantine = quarantine
        self.informers: dict[Kind, Informer] = {}
        self._tasks: dict[Kind, asyncio.Task[None]] = {}
        self._listed: set[Kind] = set()
        #: Set by :meth:`start_all`: kinds added since start watching at once.
        self.running = False

    def add(self, kind: Kind) -> Informer:
        """Follow ``kind`` (its watch starts now if :meth:`start_all` ran, else there)."""
        informer = self.informers.get(kind)
        if informer is None:
            informer = Informer(self.store, [kind], self.handler, quarantine=self.quarantine)
            self.informers[kind] = informer
            if self.running:
                self._start(kind, informer)
        return informer

    def remove(self, kind: Kind) -> Informer | None:
        """Stop following ``kind``; returns its informer (what it knew) or None."""
        informer = self.informers.pop(kind, None)
        task = self._tasks.pop(kind, None)
        if task is not None:
            task.cancel()  # keep_following closes the streams on its way out
        self._listed.discard(kind)
        return informer

    def _start(self, kind: Kind, informer: Informer) -> None:
        self._tasks[kind] = asyncio.create_task(
            keep_following(informer, kind[1]), name=f"watch {kind[1]}"
        )

    def start_all(self) -> None:
        """Watch every kind added, and from now on each one added (a running process)."""
        self.running = True
        for kind, informer in self.informers.items():
            if kind not in self._tasks:
                self._start(kind, informer)

    async def pump(self) -> int:
        """For callers that step the store: list a kind the first time, then apply what its
        watch queued; returns the events applied."""
        applied = 0
        for kind, informer in list(self.informers.items()):
            if kind not in self._listed:
                await informer.start()
                self._listed.add(kind)
            applied += await informer.pump()
        return applied

    async def close(self) -> None:
        self.running = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for informer in self.informers.values():
            await informer.stop()
        self._listed.clear()


__all__ = ["KindWatches", "keep_following"]

"""Daemon worker threads for the CPU part of an admission: decode, rule, encode.

An AdmissionReview of megabytes takes tens of milliseconds to parse, and a rule may walk a big
object; on the event loop that work would stall every other request, the health check and the
signal handlers. Here it runs on a few threads, and the loop only reads bodies and writes
answers. The threads are daemons, unlike :mod:`concurrent.futures`' (which the interpreter
joins at exit): a job that runs long never keeps a stopped server from exiting.

A job is skipped when its future was cancelled (the request was abandoned or its deadline
passed) before a thread took it, and ``done`` is always called on the loop once a thread is
finished with it, which is what releases the job's share of the in-flight budget.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger(__name__)

DEFAULT_WORKERS: Final = 4

_Job = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any], Callable[[], None]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class Workers:
    """A fixed set of daemon threads taking jobs in arrival order, from :meth:`start` (so
    that an application built but never started leaves no threads behind)."""

    def __init__(self, count: int = DEFAULT_WORKERS, name: str = "admission") -> None:
        if count < 1:
            raise ValueError(f"workers: count must be at least 1, got {count}")
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(count)
        ]
        self.busy = 0

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, job: Callable[[], Any], done: Callable[[], None]) -> asyncio.Future[Any]:
        """Run ``job()`` on a thread; its result or exception arrives in the future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((loop, future, job, done))
        return future

    def _work(self) -> None:
        while (item := self._jobs.get()) is not None:
            loop, future, job, done = item
            ok, value = True, None
            if not future.cancelled():
                self.busy += 1
                try:
                    value = job()
                except BaseException as err:  # handed to the awaiting request, not lost
                    ok, value = False, err
                finally:
                    self.busy -= 1
            try:
                loop.call_soon_threadsafe(_settle, future, ok, value)
                loop.call_soon_threadsafe(done)
            except RuntimeError:
                log.debug("event loop closed before a job's answer")  # server is stopping

    def close(self) -> None:
        """Let each thread finish the job in hand and stop; does not wait for them."""
        for _ in self._threads:
            self._jobs.put(None)

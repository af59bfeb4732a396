"""The queues and namespaces the admission rules read, kept current by a watch.

Every ``/jobs/validate`` and ``/queues/validate`` used to list all queues from the API server:
one request per admission, behind the client's rate limit (qps 50, burst 100 in the chart), so
at 200 admissions a second most of them waited past the API server's deadline. The cache lists
each kind once and then follows its watch (:class:`~stromboli.core.informer.Informer`); a
request reads a :class:`~stromboli.webhooks.services.ClusterSnapshot` taken on the event loop,
rebuilt only after something changed, so the rules on worker threads never see a dict that
is being written.

The watch is supervised: a failure (the API server restarting, a dropped connection) is
logged and the kinds are listed and watched again after a back-off, without stopping the
server. Until the first listing the webhook is not ready.

Pod enrolment also reads namespace labels (``stromboli.dev/enroll``) and the owners of pods,
from :class:`~stromboli.webhooks.owners.OwnerCache`, started and stopped with this cache;
its watches do not hold up readiness (an owner not yet listed is looked up instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from stromboli.core.api import constants as k
from stromboli.core.cluster.store import ClusterStore, Obj
from stromboli.core.informer import Informer, Kind
from stromboli.webhooks.owners import OwnerCache
from stromboli.webhooks.services import ClusterSnapshot

log = logging.getLogger(__name__)

QUEUE: Final[Kind] = (k.SCHEDULING_V1BETA1, "Queue")
NAMESPACE: Final[Kind] = (k.CORE_V1, "Namespace")
RETRY_MIN: Final = 0.5
RETRY_MAX: Final = 30.0


class AdmissionCache:
    """Watch-fed queues and namespace annotations; :meth:`snapshot` for each request."""

    def __init__(self, store: ClusterStore) -> None:
        self.informer = Informer(store, [QUEUE, NAMESPACE], self._seen)
        self._queues: dict[str, Obj] = {}
        self._namespaces: dict[str, dict[str, str]] = {}
        self._labels: dict[str, dict[str, str]] = {}
        self.owners = OwnerCache(store)
        self._snapshot: ClusterSnapshot | None = None
        self.synced = asyncio.Event()
        self.failures = 0
        self._task: asyncio.Task[None] | None = None

    def _seen(self, kind: Kind, event_type: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if kind == QUEUE:
            if event_type == "DELETED":
                self._queues.pop(name, None)
            else:
                self._queues[name] = obj
        elif event_type == "DELETED":
            self._namespaces.pop(name, None)
            self._labels.pop(name, None)
        else:
            annotations = meta.get("annotations") or {}
            self._namespaces[name] = {str(a): str(v) for a, v in annotations.items()}
            self._labels[name] = {str(a): str(v) for a, v in (meta.get("labels") or {}).items()}
        self._snapshot = None

    def snapshot(self) -> ClusterSnapshot:
        """The state now, as an object no later event changes (call on the event loop)."""
        if self._snapshot is None:
            self._snapshot = ClusterSnapshot(
                dict(self._queues),
                dict(self._namespaces),
                dict(self._labels),
                self.owners.lineage,
            )
        return self._snapshot

    async def start(self) -> None:
        """Begin following the watch in the background; returns at once."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name="admission-cache")
            await self.owners.start()

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    async def _supervise(self) -> None:
        delay = RETRY_MIN
        while True:
            try:
                await self.informer.start()
                self.synced.set()
                delay = RETRY_MIN
                await self.informer.run()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any failure of the watch: list and watch again
                self.failures += 1
                log.warning(
                    "watch of queues and namespaces failed (%s); again in %.1fs", err, delay
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.owners.stop()
        await self.informer.stop()

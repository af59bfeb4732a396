"""Enrolment of plain pods into one-pod PodGroups (the pg-controller's job), following pod
events: its own watch on a live cluster, or events fed through ``seen`` (the simulator feeds
each pod as it creates it). The rules themselves are in ``podgroup.py``."""

from __future__ import annotations

import asyncio
import logging

from stromboli.core.api import constants as k
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.podgroup import enrol_pod, needs_podgroup
from stromboli.core.informer import Informer
from stromboli.core.quarantine import EventSink, Quarantine
from stromboli.core.scheduler.api.plaingroup import (
    MEMORY,
    OBJECT,
    PlainPodGroups,
    fallback_group_name,
)

log = logging.getLogger(__name__)
POD = ("v1", "Pod")
COMPONENT = "vc-controller-manager"
#: Pods enrolled at once; each enrolment is a pod patch and then a PodGroup create.
ENROL_CONCURRENCY = 32
#: Groups known to exist, so that later events of a pod the webhook named its group at
#: admission (``needs_podgroup`` stays true for it) cost no create each.
KNOWN_GROUPS = 100_000


class PodEnroller:
    def __init__(
        self,
        store: ClusterStore,
        scheduler_names: set[str],
        events: EventSink | None = None,
        quarantine: Quarantine | None = None,
        plain_pod_groups: PlainPodGroups = OBJECT,
    ) -> None:
        self.store = store
        self.scheduler_names = scheduler_names
        #: ``memory``: the scheduler keeps plain pods' groups itself; nothing is enrolled here.
        self.plain_pod_groups = plain_pod_groups
        #: Where pods that cannot be enrolled (an unreadable request) are reported.
        self.events = events
        self.quarantine = quarantine or Quarantine(COMPONENT)
        self.informer = Informer(store, [POD], self.seen, quarantine=self.quarantine)
        self._waiting: dict[str, dict] = {}
        self._known: dict[tuple[str, str], None] = {}
        self._wake = asyncio.Event()

    def seen(self, _kind: tuple[str, str], event_type: str, pod: dict) -> None:
        """A pod event; call it directly to share another informer's pod watch."""
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        named = (meta.get("annotations") or {}).get(k.GROUP_NAME_ANNOTATION)
        # A new pod always checks its group (it may have been deleted since); later events don't.
        known = (
            event_type != "ADDED"
            and named is not None
            and (meta.get("namespace", ""), named) in self._known
        )
        if (
            event_type != "DELETED"
            and not known
            and self.plain_pod_groups != MEMORY
            and needs_podgroup(pod, self.scheduler_names)
        ):
            self._waiting[uid] = pod
            self._wake.set()
        else:
            self._waiting.pop(uid, None)

    async def enrol_waiting(self) -> int:
        """Enrol every pod waiting now, several at a time (each takes two API calls)."""
        pods = list(self._waiting.values())
        self._waiting.clear()
        gate = asyncio.Semaphore(ENROL_CONCURRENCY)

        async def one(pod: dict) -> bool:
            async with gate:
                # Known before the pod's patch lands: the event of that patch, which may come
                # while the group's create is in flight, asks for no second create.
                key = (pod["metadata"].get("namespace", ""), fallback_group_name(pod) or "")
                fresh = key not in self._known
                self._known[key] = None
                if len(self._known) > KNOWN_GROUPS:
                    del self._known[next(iter(self._known))]
                try:
                    name = await enrol_pod(self.store, pod)
                except ValueError as err:  # the pod cannot be read (a bad quantity): no group
                    self.quarantine.reject(pod, err, "Pod")
                    name = None
                if name is None and fresh:
                    self._known.pop(key, None)  # not made: the pod's next event tries again
                return name is not None

        enrolled = sum(await asyncio.gather(*(one(pod) for pod in pods)))
        if self.events is not None:
            await self.quarantine.publish(self.events)
        return enrolled

    async def run(self, own_watch: bool = True) -> None:
        """Enrol pods as they come; without ``own_watch`` events arrive through ``seen``."""
        if not own_watch:
            while True:
                await self.enrol_waiting()
                self._wake.clear()
                if not self._waiting:
                    await self._wake.wait()
        await self.informer.start()
        follow = asyncio.create_task(self.informer.run())
        try:
            while True:
                await self.enrol_waiting()
                self._wake.clear()
                if not self._waiting:
                    await self._wake.wait()
                if follow.done():
                    follow.result()
                    return
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)
            await self.informer.stop()

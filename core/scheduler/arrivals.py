"""New work seen by the watch, so that the loop may start a cycle before its period ends.

kube-scheduler takes a pod from its queue the moment it arrives; a periodic scheduler would make
each pod wait half a period on average. The loop asks this signal whether work came in since
the last snapshot: a pending pod of ours that belongs to a group the cache knows, newly added or
newly linked to its group (the controller annotates a plain pod after making its PodGroup), or a
PodGroup added while pods of it wait; in each case only once the group has its ``minMember``
pods. What a cycle could do nothing with (a pod whose group does not exist yet, an empty group,
a gang still short of pods) and status changes of pods already placed never wake it: each
needless cycle would also rewrite the gang's status (its counts and condition message).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sized

from stromboli.core.api import constants as k
from stromboli.core.api.keys import object_key
from stromboli.core.scheduler.cache import SchedulerCache

_POD = ("v1", "Pod")
_PODGROUP = (k.SCHEDULING_V1BETA1, "PodGroup")
#: Pending pods remembered as waiting for their group; the oldest are forgotten first, so a
#: flood of pods whose groups never come holds a bounded amount.
UNLINKED_LIMIT = 100_000


def _complete(pg: dict, tasks: Sized) -> bool:
    """Whether the group has as many pods as its ``minMember``: a gang short of pods cannot
    be placed, so the pods before the last one are no reason for a cycle (a group whose
    ``minMember`` cannot be read counts as complete; the cycle sets it aside)."""
    try:
        needed = int((pg.get("spec") or {}).get("minMember") or 1)
    except (TypeError, ValueError, OverflowError):
        return True
    return len(tasks) >= needed


class Arrivals:
    """Set when new work arrives; cleared when a snapshot takes it in. ``notice`` is called
    after the cache has folded the event in, and reads the cache to judge it."""

    def __init__(self, cache: SchedulerCache) -> None:
        self.cache = cache
        self.event = asyncio.Event()
        #: Arrivals noticed since the process started (for tests and benchmarks).
        self.seen = 0
        self._unlinked: dict[str, None] = {}

    def notice(self, kind: tuple[str, str], event_type: str, obj: dict) -> None:
        if kind == _POD:
            work = self._pod(event_type, obj)
        elif kind == _PODGROUP:
            work = event_type == "ADDED" and self._group_has_waiting_pods(obj)
        else:
            work = False
        if work:
            self.seen += 1
            self.event.set()

    def _pod(self, event_type: str, obj: dict) -> bool:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "/".join(object_key(obj)))
        if event_type == "DELETED":
            self._unlinked.pop(uid, None)
            return False
        record = self.cache.pods.get(uid)
        if record is None or record.task.node_name:  # not ours, or placed
            self._unlinked.pop(uid, None)
            return False
        entry = self.cache.jobs.get(record.job_id) if record.job_id is not None else None
        if entry is None or entry.podgroup is None:
            self._unlinked[uid] = None  # work once its group is known
            if len(self._unlinked) > UNLINKED_LIMIT:
                del self._unlinked[next(iter(self._unlinked))]
            return False
        was_unlinked = uid in self._unlinked
        self._unlinked.pop(uid, None)
        return (event_type == "ADDED" or was_unlinked) and _complete(entry.podgroup, entry.tasks)

    def _group_has_waiting_pods(self, pg: dict) -> bool:
        namespace, name = object_key(pg)
        entry = self.cache.jobs.get(f"{namespace}/{name}")
        if entry is None:
            return False
        waiting = [task.uid for task in entry.tasks.values() if not task.node_name]
        for uid in waiting:
            self._unlinked.pop(uid, None)
        return bool(waiting) and _complete(pg, entry.tasks)

    def clear(self) -> None:
        self.event.clear()

    def is_set(self) -> bool:
        return self.event.is_set()

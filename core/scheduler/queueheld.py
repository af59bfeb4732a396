"""What each queue's jobs hold, kept from per-job parts, so a cycle that changed few jobs
sums few: the queue ``status.allocated`` the close writes (``status.py``).

Each job's part is what its pods that hold resources request, plus one ``pods`` each (as
Volcano's task request counts the pod). Parts are added and taken away as jobs change; this is
exact only while every amount is a whole number (a float sums whole numbers below 2**53
exactly, in any order), so a part with a fraction makes ``totals`` answer None and the caller
sums every job afresh, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.resource import PODS, Resource
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS

#: Floats are exact integers below this.
_EXACT = float(2**53)


def job_part(job: JobInfo) -> dict[str, float]:
    """What ``job`` adds to its queue's allocated total (names present as the full sum has
    them: a name any held pod requests, ``pods`` when one is held)."""
    part: dict[str, float] = {}
    held = job.tasks_with(ALLOCATED_STATUS)
    for task in held:
        for name, value in task.resreq.amounts.items():
            part[name] = part.get(name, 0.0) + value
    if held:
        part[PODS] = part.get(PODS, 0.0) + len(held)
    return part


def _whole(part: dict[str, float]) -> bool:
    return all(value.is_integer() and abs(value) < _EXACT for value in part.values())


class HeldByQueue:
    """Per-queue sums of the parts of the jobs last seen."""

    __slots__ = ("_fractions", "_names", "_parts", "_sums")

    def __init__(self) -> None:
        #: Job id → (queue, part, whole).
        self._parts: dict[str, tuple[str, dict[str, float], bool]] = {}
        #: Queue → resource name → sum of the parts.
        self._sums: dict[str, dict[str, float]] = {}
        #: Queue → resource name → parts that name it (a name stays while one does).
        self._names: dict[str, dict[str, int]] = {}
        #: Parts with an amount that is not a whole number.
        self._fractions = 0

    def rebuild(self, jobs: Iterable[JobInfo]) -> None:
        self.__init__()  # type: ignore[misc]
        for job in jobs:
            self.update(job)

    def update(self, job: JobInfo) -> None:
        self.remove(job.uid)
        part = job_part(job)
        whole = _whole(part)
        self._parts[job.uid] = (job.queue, part, whole)
        if not whole:
            self._fractions += 1
        sums = self._sums.setdefault(job.queue, {})
        names = self._names.setdefault(job.queue, {})
        for name, value in part.items():
            sums[name] = sums.get(name, 0.0) + value
            names[name] = names.get(name, 0) + 1

    def remove(self, uid: str) -> None:
        old = self._parts.pop(uid, None)
        if old is None:
            return
        queue, part, whole = old
        if not whole:
            self._fractions -= 1
        sums, names = self._sums[queue], self._names[queue]
        for name, value in part.items():
            sums[name] -= value
            names[name] -= 1
            if not names[name]:
                del names[name], sums[name]

    def totals(self) -> dict[str, Resource] | None:
        """Queue → what its jobs hold, or None when the sums may be inexact."""
        if self._fractions:
            return None
        out: dict[str, Resource] = {}
        for queue, sums in self._sums.items():
            if any(abs(value) >= _EXACT for value in sums.values()):
                return None
            total = Resource()
            total.amounts = dict(sums)
            out[queue] = total
        return out

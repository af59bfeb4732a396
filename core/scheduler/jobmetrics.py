"""The per-job and per-namespace gauges of the scheduler's metrics, kept from cycle to cycle
so that a cycle sets only those of the jobs its close looked at (``framework/closing.py``).

Which series exist and their values are as if every job were set each cycle and the series of
jobs that are gone swept: a job that leaves (or changes queue, hence labels) has its series
removed at once; a job whose values did not change keeps them. A cycle after one this did not
see, a new configuration, or a new cluster total (every job's share) sets every job again.

Namespace shares sum the jobs' allocated amounts; sums kept by adding and taking away parts are
exact while every amount is a whole number below 2**53, and a namespace with a fraction is
summed afresh, in the session's order, as a full pass does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stromboli.core.promtypes import Series
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.framework.closing import CloseSet
from stromboli.core.scheduler.util.share import dominant_share

if TYPE_CHECKING:
    from collections.abc import Callable

    from stromboli.core.scheduler.api.job import JobInfo
    from stromboli.core.scheduler.framework.session import Session

_EXACT = float(2**53)


def _whole(amounts: dict[str, float]) -> bool:
    return all(v.is_integer() and abs(v) < _EXACT for v in amounts.values())


@dataclass(slots=True)
class _Job:
    labels: tuple[str, str, str]
    start: float | None
    share: float | None
    #: The job's allocated amounts, as summed into its namespace's share (drf only).
    part: dict[str, float]
    whole: bool


@dataclass(slots=True)
class _Namespace:
    jobs: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    fractions: int = 0


class JobSeries:
    def __init__(
        self,
        *,
        start: Series,
        duration: Series,
        last: Series,
        share: Series,
        retries: Series,
        namespace_share: Series,
        namespace_weight: Series,
        namespace_weighted_share: Series,
        epoch: Callable[[str], float],
    ) -> None:
        self.start, self.duration, self.last, self.share = start, duration, last, share
        self.retries = retries
        self.namespace_series = (namespace_share, namespace_weight, namespace_weighted_share)
        self.epoch = epoch
        self._jobs: dict[str, _Job] = {}
        self._names: Counter[str] = Counter()
        self._namespaces: dict[str, _Namespace] = {}
        #: The index of the last close seen, and what every job's values depended on.
        self._closed: int | None = None
        self._drf = False
        self._total: dict[str, float] = {}

    def observe(self, ssn: Session, close: CloseSet) -> None:
        drf = "drf" in ssn.plugins
        total = ssn.total_resource
        full = (
            close.full
            or self._closed is None
            or close.index != self._closed + 1
            or drf != self._drf
            or (drf and total.amounts != self._total)
        )
        self._closed = close.index if close.index >= 0 else None
        self._drf, self._total = drf, dict(total.amounts)
        if full:
            self._observe_all(ssn, drf, total)
        else:
            self._observe_closed(ssn, close, drf, total)

    # -- every job -----------------------------------------------------------------------------

    def _observe_all(self, ssn: Session, drf: bool, total: Resource) -> None:
        self._jobs, self._names, self._namespaces = {}, Counter(), {}
        alive: set[tuple[str, str, str]] = set()
        namespaces: dict[str, Resource] = {}
        for job in ssn.jobs.values():
            labels = (job.name, job.queue, job.namespace)
            alive.add(labels)
            start = self.epoch(job.creation) if job.creation else None
            if start is not None:
                self.start.get(*labels).set(start)
            share = None
            if drf:
                share = dominant_share(job.allocated, total)
                self.share.get(job.namespace, job.name).set(share)
                namespaces.setdefault(job.namespace, Resource()).add(job.allocated)
            self._remember(job, labels, start, share, drf)
        names = {labels[0] for labels in alive}
        self.retries.sweep(keep=lambda ls: ls[0] in names)
        self.start.sweep()
        for series in (self.duration, self.last):
            series.sweep(keep=alive.__contains__)
        self.share.sweep()
        for namespace, allocated in namespaces.items():
            self._set_namespace(namespace, dominant_share(allocated, total), get=True)
        for series in self.namespace_series:
            series.sweep()

    # -- the jobs closed -----------------------------------------------------------------------

    def _observe_closed(self, ssn: Session, close: CloseSet, drf: bool, total: Resource) -> None:
        touched: set[str] = set()
        for uid in close.gone:
            self._forget(uid, touched)
        for job in close.jobs:
            labels = (job.name, job.queue, job.namespace)
            old = self._jobs.get(job.uid)
            if old is not None and old.labels != labels:
                self._forget(job.uid, touched, keep_name=True)  # counted again below
                old = None
            start = self.epoch(job.creation) if job.creation else None
            if start is None:
                if old is not None and old.start is not None:
                    self.start.remove(*labels)
            elif old is None or old.start != start:
                self.start.child(*labels).set(start)
            share = None
            if drf:
                share = dominant_share(job.allocated, total)
                if old is None or old.share != share:
                    self.share.child(job.namespace, job.name).set(share)
            if old is not None:
                self._take_part(job.namespace, old)
                del self._jobs[job.uid]
                self._names[job.name] -= 1
            self._remember(job, labels, start, share, drf)
            touched.add(job.namespace)
        # Placed jobs' series were marked seen (``get``); nothing sweeps them here.
        for series in (self.duration, self.last):
            series.seen.clear()
        if drf:
            for namespace in touched:
                self._publish_namespace(ssn, namespace, total)

    def _remember(
        self,
        job: JobInfo,
        labels: tuple[str, str, str],
        start: float | None,
        share: float | None,
        drf: bool,
    ) -> None:
        part = dict(job.allocated.amounts) if drf else {}
        entry = _Job(labels, start, share, part, _whole(part))
        self._jobs[job.uid] = entry
        self._names[job.name] += 1
        namespace = self._namespaces.setdefault(job.namespace, _Namespace())
        namespace.jobs += 1
        for name, value in part.items():
            namespace.sums[name] = namespace.sums.get(name, 0.0) + value
        if not entry.whole:
            namespace.fractions += 1

    def _take_part(self, namespace_name: str, entry: _Job) -> None:
        namespace = self._namespaces[namespace_name]
        namespace.jobs -= 1
        for name, value in entry.part.items():
            namespace.sums[name] -= value
        if not entry.whole:
            namespace.fractions -= 1

    def _forget(self, uid: str, touched: set[str], keep_name: bool = False) -> None:
        entry = self._jobs.pop(uid, None)
        if entry is None:
            return
        name, _queue, namespace = entry.labels
        for series in (self.start, self.duration, self.last):
            series.remove(*entry.labels)
        self.share.remove(namespace, name)
        self._names[name] -= 1
        if not self._names[name]:
            del self._names[name]
            if not keep_name:
                self.retries.remove(name)
        self._take_part(namespace, entry)
        touched.add(namespace)

    def _publish_namespace(self, ssn: Session, name: str, total: Resource) -> None:
        namespace = self._namespaces.get(name)
        if namespace is None or not namespace.jobs:
            self._namespaces.pop(name, None)
            for series in self.namespace_series:
                series.remove(name)
            return
        if namespace.fractions or not _whole(namespace.sums):
            allocated = Resource()
            for job in ssn.jobs.values():  # summed afresh, in the order a full pass sums
                if job.namespace == name:
                    allocated.add(job.allocated)
        else:
            allocated = Resource(namespace.sums)
        self._set_namespace(name, dominant_share(allocated, total), get=False)

    def _set_namespace(self, name: str, share: float, get: bool) -> None:
        # Namespace weights come from quota annotations in Volcano; without one it is 1.
        share_series, weight, weighted = self.namespace_series
        for series, value in ((share_series, share), (weight, 1.0), (weighted, share)):
            (series.get(name) if get else series.child(name)).set(value)

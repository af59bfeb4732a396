"""Timers of the vcjob controller, on the injected clock: delayed actions (a policy's
``timeout``), retries with back-off, and ``ttlSecondsAfterFinished``.

All live in one heap; :meth:`JobTimers.next_wakeup` tells a virtual clock where to jump. A
timer that no longer applies (its delayed action cancelled or replaced, its TTL rescheduled)
stays in the heap and is skipped when it comes up. The controller's ``_collect_due`` fires them.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stromboli.core.api.keys import object_key
from stromboli.core.clock import parse_time
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.controller.job.base import (
    FINISHED,
    JOB,
    JobKey,
    JobState,
    job_phase,
)
from stromboli.core.controller.job.policies import (
    Request,
    Resolution,
    cancelled_by,
    supersedes,
)


@dataclass(slots=True)
class Delayed:
    """An action waiting for its policy timeout; ``serial`` names its timer (a timer whose
    serial is not the waiting one's is stale)."""

    resolution: Resolution
    request: Request
    due: float
    serial: int


@dataclass(order=True, slots=True)
class Timer:
    """One entry of the heap, ordered by when it is due (ties: first set, first fired)."""

    due: float
    serial: int
    kind: str = field(compare=False)  # "delay", "retry" or "ttl"
    key: JobKey = field(compare=False)
    pod_name: str = field(compare=False, default="")
    request: Request | None = field(compare=False, default=None)
    uid: str = field(compare=False, default="")


class JobTimers(JobState):
    """Delayed actions, retry timers and TTL timers of the jobs."""

    def _add_timer(
        self,
        kind: str,
        key: JobKey,
        delay: float,
        *,
        pod_name: str = "",
        request: Request | None = None,
        uid: str = "",
    ) -> Timer:
        self._serial += 1
        timer = Timer(
            self.clock.monotonic() + delay, self._serial, kind, key, pod_name, request, uid
        )
        heapq.heappush(self._timers, timer)
        if self._wake is not None:
            self._wake.set()
        return timer

    def _timer_live(self, timer: Timer) -> bool:
        if timer.kind == "delay":
            delayed = self._delayed.get(timer.key, {}).get(timer.pod_name)
            return delayed is not None and delayed.serial == timer.serial
        if timer.kind == "ttl":
            return self._ttl_timers.get(timer.uid) is timer
        return True

    def next_wakeup(self) -> float | None:
        """When (on the clock's monotonic scale) the next timer is due; None if none is."""
        while self._timers and not self._timer_live(self._timers[0]):
            heapq.heappop(self._timers)
        return self._timers[0].due if self._timers else None

    # --- delayed actions ---------------------------------------------------------------------

    def _delay(self, request: Request, resolution: Resolution) -> None:
        """Run ``resolution`` after its timeout unless something cancels it first; a pod with
        the same action already waiting keeps its original deadline."""
        pods = self._delayed.setdefault(request.job_key, {})
        current = pods.get(request.pod_name)
        if current is not None and current.resolution.action == resolution.action:
            return
        timer = self._add_timer(
            "delay", request.job_key, resolution.delay, pod_name=request.pod_name
        )
        pods[request.pod_name] = Delayed(resolution, request, timer.due, timer.serial)

    def _cancel_moot_delays(self, request: Request) -> None:
        pods = self._delayed.get(request.job_key)
        if not pods:
            return
        delayed = pods.get(request.pod_name)
        if delayed is not None and cancelled_by(delayed.resolution, request):
            del pods[request.pod_name]

    def _cancel_superseded(self, key: JobKey, executed: Resolution) -> None:
        pods = self._delayed.get(key)
        if not pods:
            return
        for pod_name, delayed in list(pods.items()):
            if supersedes(executed, delayed.resolution):
                del pods[pod_name]

    # --- ttlSecondsAfterFinished -------------------------------------------------------------

    def _ttl_left(self, job: Mapping[str, Any]) -> float | None:
        """Seconds until a finished job with a TTL may be deleted; None if it never will."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if (
            ttl is None
            or job["metadata"].get("deletionTimestamp")
            or job_phase(job) not in FINISHED
        ):
            return None
        finished = ((job.get("status") or {}).get("state") or {}).get("lastTransitionTime")
        if not finished:
            return None
        expires = parse_time(finished).timestamp() + float(ttl)
        return expires - self.clock.now().timestamp()

    def _schedule_ttl(self, job: Mapping[str, Any]) -> None:
        left = self._ttl_left(job)
        if left is None:
            return
        uid = str(job["metadata"].get("uid") or "")
        if uid in self._ttl_timers:
            return
        self._ttl_timers[uid] = self._add_timer("ttl", object_key(job), max(left, 0.0), uid=uid)

    async def _collect(self, key: JobKey) -> None:
        """Delete a finished job whose TTL is over (its pods and PodGroup go with it)."""
        job = self.jobs.get(key)
        if job is None:
            return
        left = self._ttl_left(job)
        if left is None:
            return
        if left > 0:
            self._schedule_ttl(job)
            return
        try:
            fresh = await self.store.get(*JOB, key[1], key[0])
        except NotFoundError:
            return
        if (
            fresh["metadata"].get("uid") != job["metadata"].get("uid")
            or self._ttl_left(fresh) is None
        ):
            return
        try:
            await self.store.delete(*JOB, key[1], key[0], propagation="Foreground")
        except NotFoundError:
            return
        self.writes += 1

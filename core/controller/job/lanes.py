"""The vcjob controller's work queue: requests grouped by job, served from two lanes in turn.

A controller started on thousands of vcjobs that it has never synced (a first start, or a
restart) has that whole backlog to work through, two writes or more per job. A job it has
synced already and that moved on (its PodGroup admitted: its pods are due now) must not wait
behind that backlog, so the jobs this controller has synced wait in a lane of their own, and
workers take from the two lanes alternately: either lane gets at least half of the workers'
turns while both hold jobs, and within a lane the order is first come, first served.

As client-go's work queue does, a job is handed to one worker at a time: requests about a job
that is being processed are held, and the job is queued again (in the lane of synced jobs)
once its worker is done, so one sync sees everything that changed meanwhile.
"""

from __future__ import annotations

from stromboli.core.api.keys import Key as JobKey
from stromboli.core.controller.job.policies import Request


class RequestLanes:
    """Requests about jobs, queued by job; see the module docstring."""

    def __init__(self) -> None:
        #: The requests waiting about each job, in arrival order (equal ones once).
        self._requests: dict[JobKey, dict[Request, None]] = {}
        #: Jobs this controller has not synced yet, and those it has, each in arrival order.
        self._new: dict[JobKey, None] = {}
        self._synced_lane: dict[JobKey, None] = {}
        self._synced: set[JobKey] = set()
        self._processing: set[JobKey] = set()
        self._turn_synced = True

    def __len__(self) -> int:
        """Jobs queued (not counting those being processed)."""
        return len(self._new) + len(self._synced_lane)

    def __bool__(self) -> bool:
        return bool(self._new or self._synced_lane)

    def add(self, request: Request) -> None:
        key = request.job_key
        self._requests.setdefault(key, {})[request] = None
        if key in self._processing or key in self._new or key in self._synced_lane:
            return
        (self._synced_lane if key in self._synced else self._new)[key] = None

    def take(self) -> tuple[JobKey, list[Request]] | None:
        """The next job and its requests (now being processed), lanes in turn; None when
        nothing is queued. Call :meth:`done` once it is processed."""
        first, second = (self._synced_lane, self._new)
        if not self._turn_synced:
            first, second = second, first
        lane = first or second
        if not lane:
            return None
        self._turn_synced = lane is not self._synced_lane
        key = next(iter(lane))
        del lane[key]
        self._processing.add(key)
        return key, list(self._requests.pop(key, {}))

    def done(self, key: JobKey) -> None:
        """``key`` processed: it counts as synced, and is queued again if asked about since."""
        self._processing.discard(key)
        self._synced.add(key)
        if key in self._requests:
            self._synced_lane[key] = None

    def forget(self, key: JobKey) -> None:
        """The job is gone: a new job of its name starts in the lane of new jobs."""
        self._synced.discard(key)

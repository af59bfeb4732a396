"""Priority queues ordered by the session's order functions."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Generic, TypeVar

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.framework.session import Session

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("item", "less")

    def __init__(self, item: T, less: Callable[[T, T], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: _Entry[T]) -> bool:
        return self.less(self.item, other.item)


class PriorityQueue(Generic[T]):
    """A heap whose order is a session's ``less`` function (recomputed at each push/pop)."""

    def __init__(self, less: Callable[[T, T], bool], items: list[T] | None = None) -> None:
        self.less = less
        self._heap: list[_Entry[T]] = [_Entry(i, less) for i in items or ()]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        heapq.heappush(self._heap, _Entry(item, self.less))

    def pop(self) -> T:
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)


class QueueJobs:
    """Queues in queue order, each with its jobs in job order: Volcano's two-level visit."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_less)
        self.jobs: dict[str, PriorityQueue[JobInfo]] = {}

    def add(self, job: JobInfo) -> None:
        jobs = self.jobs.get(job.queue)
        if jobs is None:
            jobs = self.jobs[job.queue] = PriorityQueue(self.ssn.job_less)
            self.queues.push(self.ssn.queues[job.queue])
        jobs.push(job)

    def pop_queue(self) -> QueueInfo | None:
        return self.queues.pop() if self.queues else None

    def pop_next(self) -> tuple[QueueInfo, JobInfo] | None:
        """Next (queue, job); queues with no job left are dropped."""
        while self.queues:
            queue = self.queues.pop()
            jobs = self.jobs.get(queue.name)
            if jobs:
                return queue, jobs.pop()
        return None

    def requeue(self, queue: QueueInfo) -> None:
        if self.jobs.get(queue.name):
            self.queues.push(queue)

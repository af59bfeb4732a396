"""Which jobs a session's close looks at.

Closing a session (gang's conditions, PodGroup statuses, pod conditions, events, per-job
metrics) costs time for every job it looks at. A settled job — looked at before with nothing to
write, report or count, and neither changed in the cache nor touched by this session since —
would give that same nothing again, so the scheduler names the jobs that may not be settled
(``scheduler/settled.py``) and the close looks at those alone. A session without a
``CloseSet`` (tests, tools) closes every job, as does a full one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stromboli.core.scheduler.api.job import JobInfo


@dataclass(slots=True)
class CloseSet:
    #: The session's jobs to close, in the session's order.
    jobs: list[JobInfo]
    #: Ids of jobs closed before that the session no longer has (their metrics go).
    gone: set[str] = field(default_factory=set)
    #: Every job of the session is in ``jobs``.
    full: bool = True
    #: Closes counted by the tracker: a reader that missed one looks at every job.
    index: int = 0


def close_set(jobs: Mapping[str, JobInfo], close: CloseSet | None) -> CloseSet:
    """``close``, or a full one over ``jobs`` when there is none."""
    if close is not None:
        return close
    return CloseSet(list(jobs.values()), full=True, index=-1)

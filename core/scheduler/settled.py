"""Which jobs a cycle's close must look at, so that its cost follows the jobs that changed,
not every job the scheduler knows (issue 14: thousands of one-pod jobs Running with nothing
to do made every cycle cost as much as all of them).

A job is *settled* after a close that found nothing to write, report or count for it (see
``status._close_job``): its PodGroup status and pods' conditions as stored, no event due, no
pod waiting, no fit error. Its close depends only on its own PodGroup and pods, what the session
did to it, and a few things shared by all jobs; while none of those change it would give the
same nothing again. So a close looks at:

* the jobs the cache changed since the snapshot of the previous close (a PodGroup or a pod
  event, a binding or eviction held, a status folded in: ``changelog.JobChanges``);
* the jobs the session touched: bound, evicted, enqueued, given annotations or events by a
  plugin, set aside (the cache log or the waiting jobs name these already; listed again at
  little cost, so that a later change to how bindings are held cannot lose one);
* the jobs not settled at their last close (a gang that waits is looked at every cycle: its
  ``Unschedulable`` event is posted every session, as Volcano does);

and at every job when what all jobs share changed: the configuration (plugins and their
arguments, such as capacity's hierarchy), the queues and their parents (which jobs a
snapshot holds, capacity's objections), or the log cannot tell (first cycle, a PriorityClass
changed, a close that was not followed by ``settle``).
"""

from __future__ import annotations

from stromboli.core.scheduler.changelog import JobChanges
from stromboli.core.scheduler.framework.closing import CloseSet
from stromboli.core.scheduler.framework.options import SchedulerConfig
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.queueheld import HeldByQueue
from stromboli.core.scheduler.status import StatusChanges

_World = tuple[SchedulerConfig, tuple[tuple[str, str], ...]]


def touched(ssn: Session) -> set[str]:
    """Ids of the jobs the session changed or spoke about beyond what gang's close decides."""
    outcome = ssn.outcome
    uids = {task.job_id for task, _node in outcome.binds}
    uids.update(eviction.task.job_id for eviction in outcome.evictions)
    uids.update(uid for uid, _kind, _reason, _message in ssn.job_events)
    uids.update(outcome.podgroup_annotations)
    uids.update(ssn.enqueued)
    uids.update(job.uid for job, _error in outcome.set_aside)
    return uids


def _world(ssn: Session) -> _World:
    return ssn.config, tuple((name, queue.parent) for name, queue in ssn.queues.items())


class SettledJobs:
    """Remembers, from close to close, which jobs are settled (see the module docstring).

    ``enabled=False`` closes every job every cycle (the computation before, kept to compare)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        #: Jobs not settled at their last close.
        self.active: set[str] = set()
        #: Jobs closed at least once and still in the sessions.
        self.known: set[str] = set()
        #: What each queue's jobs hold, for the queues' ``status.allocated``.
        self.held = HeldByQueue()
        self.index = 0
        #: The change mark of the snapshot of the last settled close, and what all jobs shared.
        self._mark: int | None = None
        self._world: _World | None = None
        self._pending_world: _World | None = None

    def close_set(self, ssn: Session, changes: JobChanges) -> CloseSet | None:
        """The jobs ``ssn``'s close looks at (None when disabled: all, as before)."""
        if not self.enabled:
            return None
        self.index += 1
        world = self._pending_world = _world(ssn)
        changed = changes.since(self._mark) if self._mark is not None else None
        if changed is None or world != self._world:
            gone = self.known - ssn.jobs.keys()
            return CloseSet(list(ssn.jobs.values()), gone, full=True, index=self.index)
        uids = changed | self.active | touched(ssn)
        jobs = [job for uid, job in ssn.jobs.items() if uid in uids] if uids else []
        gone = {uid for uid in uids if uid not in ssn.jobs and uid in self.known}
        return CloseSet(jobs, gone, full=False, index=self.index)

    @property
    def queue_totals(self) -> HeldByQueue | None:
        return self.held if self.enabled else None

    def settle(
        self,
        close: CloseSet | None,
        status: StatusChanges,
        mark: int | None,
        changes: JobChanges,
    ) -> None:
        """After ``close`` was collected (``status``): remember which of its jobs are settled.
        ``mark`` is the change mark taken before the session's snapshot."""
        if close is None:
            return
        if close.full:
            self.known = {job.uid for job in close.jobs}
            self.active = set(status.unsettled)
        else:
            for job in close.jobs:
                self.known.add(job.uid)
                if job.uid in status.unsettled:
                    self.active.add(job.uid)
                else:
                    self.active.discard(job.uid)
            self.known.difference_update(close.gone)
            self.active.difference_update(close.gone)
        self._mark, self._world = mark, self._pending_world
        if mark is not None:
            changes.forget_before(mark)

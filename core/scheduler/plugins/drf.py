"""drf: dominant resource fairness between jobs, and between queues with ``enableHierarchy``.

A job's share is its largest fraction of any cluster resource; jobs with the smaller dominant
share go first. Shares are kept current through the session's allocate/deallocate events.

With ``enableHierarchy: true`` the plugin also orders queues and picks reclaim victims by
hierarchical DRF over the tree of the ``volcano.sh/hierarchy`` annotations (see ``hdrf``).
"""

from __future__ import annotations

import logging

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, EventHandler, Session
from stromboli.core.scheduler.util.hdrf import (
    HierarchyError,
    HierarchyTree,
    QueuePath,
    parse_hierarchy,
)
from stromboli.core.scheduler.util.share import dominant_share

__all__ = ["SHARE_DELTA", "DrfPlugin", "dominant_share"]

log = logging.getLogger(__name__)

SHARE_DELTA = 1e-6

#: Malformed hierarchy messages already logged, so that each is logged once, not every cycle.
_reported: set[str] = set()


class DrfPlugin(Plugin):
    name = "drf"

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource
        shares: dict[str, float] = {
            uid: dominant_share(job.allocated, total) for uid, job in ssn.jobs.items()
        }
        self.shares = shares
        option = getattr(self, "option", None)
        self.tree: HierarchyTree | None = None
        if option is not None and option.hierarchy:
            self._open_hierarchy(ssn)
        tree = self.tree

        def job_order(left: JobInfo, right: JobInfo) -> int:
            ls, rs = shares.get(left.uid, 0.0), shares.get(right.uid, 0.0)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def refresh(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job_id)
            if job is not None:
                shares[job.uid] = dominant_share(job.allocated, total)
                if tree is not None and job.uid in tree.leaves:
                    tree.set_allocated(job.uid, job.allocated)

        def victims(preemptor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            preemptor_job = ssn.jobs[preemptor.job_id]
            after_add = dominant_share(preemptor_job.allocated + preemptor.resreq, total)
            chosen = []
            for task in candidates:
                job = ssn.jobs.get(task.job_id)
                if job is None:
                    continue
                after_remove = dominant_share(job.allocated - task.resreq, total)
                if after_remove >= after_add - SHARE_DELTA:
                    chosen.append(task)
            return chosen, PERMIT

        ssn.register(ExtensionPoint.JOB_ORDER, self.name, job_order)
        ssn.register(ExtensionPoint.PREEMPTABLE, self.name, victims)
        ssn.add_event_handler(EventHandler(allocate=refresh, deallocate=refresh))

    # -- hierarchy ----------------------------------------------------------------------------

    def _open_hierarchy(self, ssn: Session) -> None:
        self.jobs = ssn.jobs
        self.paths = {name: queue_path(queue) for name, queue in ssn.queues.items()}
        tree = self.tree = HierarchyTree(ssn.total_resource)
        # Sorted so that the first queue naming a level (whose weight counts) is always the same.
        for job in sorted(ssn.jobs.values(), key=lambda j: (j.queue, j.uid)):
            path = self.paths.get(job.queue)
            if path is not None:
                tree.add_job(job.uid, path, job.allocated, job.total_request)
        tree.refresh()
        ssn.register(ExtensionPoint.QUEUE_ORDER, self.name, self.queue_order)
        ssn.register(ExtensionPoint.RECLAIMABLE, self.name, self.reclaimable)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        assert self.tree is not None
        diff = self.tree.compare(self._path(left), self._path(right))
        if diff == 0:
            return 0
        return -1 if diff < 0 else 1

    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        """Victims whose queue, once the victim is gone, still comes strictly later in queue
        order than the reclaimer's queue with the reclaimer placed (a tie protects the victim,
        as in Volcano). Each candidate is weighed on its own against the tree as it is now."""
        tree = self.tree
        assert tree is not None
        ssn_jobs = self.jobs
        job = ssn_jobs.get(reclaimer.job_id)
        if job is None or job.uid not in tree.leaves:
            return [], PERMIT
        own_path = self.paths[job.queue]
        held = tree.leaves[job.uid].allocated.clone()
        chosen: list[TaskInfo] = []
        tree.set_allocated(job.uid, held + reclaimer.resreq)
        try:
            for task in candidates:
                victim_job = ssn_jobs.get(task.job_id)
                if victim_job is None or victim_job.uid not in tree.leaves:
                    continue
                before = tree.leaves[victim_job.uid].allocated.clone()
                tree.set_allocated(victim_job.uid, before - task.resreq)
                verdict = tree.compare(own_path, self.paths[victim_job.queue])
                tree.set_allocated(victim_job.uid, before)
                if verdict < -SHARE_DELTA:
                    chosen.append(task)
        finally:
            tree.set_allocated(job.uid, held)
        return chosen, PERMIT

    def _path(self, queue: QueueInfo) -> QueuePath:
        path = self.paths.get(queue.name)
        if path is None:
            path = self.paths[queue.name] = queue_path(queue)
        return path

    def on_session_close(self, ssn: Session) -> None:
        self.tree = None


def queue_path(queue: QueueInfo) -> QueuePath:
    """The queue's place in the tree; malformed annotations put it right under the root by its
    name (as if it had none), logged once, since the scheduler cannot refuse a stored queue."""
    try:
        return parse_hierarchy(queue.name, queue.annotations)
    except HierarchyError as error:
        message = str(error)
        if message not in _reported:
            _reported.add(message)
            log.warning("drf: %s; placing the queue directly under root", message)
        return QueuePath((queue.name,), (1.0,))

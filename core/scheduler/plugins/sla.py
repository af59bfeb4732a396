"""sla: a job that has waited longer than its service level allows goes first and is let in.

The allowed waiting time comes from the PodGroup annotation ``volcano.sh/sla-waiting-time``
(or the bare ``sla-waiting-time``), else from the plugin argument ``sla-waiting-time``; it is a
Go duration such as ``1h30m``. Jobs with a waiting time are ordered by their deadline (creation
plus waiting time), ahead of jobs without one. Once a job has waited that long, the plugin votes
to admit it (``jobEnqueueable``) and to keep its pipelined placement (``jobPipelined``), so
that the cluster starts reserving resources for it; before that it abstains.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import ClassVar

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import ABSTAIN, PERMIT, Session
from stromboli.core.scheduler.util.durations import creation_time, positive_duration

log = logging.getLogger(__name__)

WAITING_TIME_ARGUMENT = "sla-waiting-time"


class SlaPlugin(Plugin):
    name = "sla"
    known_arguments: ClassVar[dict[str, object]] = {WAITING_TIME_ARGUMENT: ""}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.default_wait: timedelta | None = None
        if WAITING_TIME_ARGUMENT in self.arguments:
            self.default_wait = positive_duration(
                self.arguments.get(WAITING_TIME_ARGUMENT), f"sla: argument {WAITING_TIME_ARGUMENT}"
            )
        self._waits: dict[str, timedelta | None] = {}
        ssn.register(ExtensionPoint.JOB_ORDER, self.name, self.job_order)
        ssn.register(ExtensionPoint.JOB_ENQUEUEABLE, self.name, self.permit_when_overdue)
        ssn.register(ExtensionPoint.JOB_PIPELINED, self.name, self.permit_when_overdue)

    def waiting_time(self, job: JobInfo) -> timedelta | None:
        """The job's own waiting time (annotation), else the plugin's, else None."""
        if job.uid in self._waits:
            return self._waits[job.uid]
        annotations = (job.podgroup.get("metadata") or {}).get("annotations") or {}
        wait: timedelta | None = None
        for key in (k.SLA_WAITING_TIME_KEY, k.SLA_WAITING_TIME_BARE_KEY):
            if key in annotations:
                wait = positive_duration(annotations[key], f"sla: PodGroup {job.uid} {key}")
                if wait is not None:
                    break
        if wait is None:
            wait = self.default_wait
        self._waits[job.uid] = wait
        return wait

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        """Jobs with a deadline first, earlier deadline first."""
        lwait, rwait = self.waiting_time(left), self.waiting_time(right)
        if lwait is None or rwait is None:
            if lwait is None and rwait is None:
                return 0
            return 1 if lwait is None else -1
        lcreated, rcreated = creation_time(left), creation_time(right)
        if lcreated is None or rcreated is None:
            if lcreated is None and rcreated is None:
                return 0
            return -1 if lcreated is None else 1  # unknown creation: treated as long overdue
        ldeadline, rdeadline = lcreated + lwait, rcreated + rwait
        if ldeadline == rdeadline:
            return 0
        return -1 if ldeadline < rdeadline else 1

    def permit_when_overdue(self, job: JobInfo) -> int:
        wait = self.waiting_time(job)
        if wait is None:
            return ABSTAIN
        created = creation_time(job)
        if created is not None and self.ssn.now - created < wait:
            return ABSTAIN
        return PERMIT

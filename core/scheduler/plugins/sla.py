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
import re
from datetime import datetime, timedelta
from typing import ClassVar

from stromboli.core.api import constants as k
from stromboli.core.clock import parse_time
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.framework.plugin import Plugin, register_plugin
from stromboli.core.scheduler.framework.session import ABSTAIN, PERMIT, Session

log = logging.getLogger(__name__)

WAITING_TIME_ARGUMENT = "sla-waiting-time"

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def go_duration(text: str) -> timedelta:
    """A Go ``time.ParseDuration`` string (``90s``, ``1h2m3s``, ``1.5h``, ``-5m``, ``0``)."""
    value = str(text).strip()
    sign = 1.0
    if value[:1] in "+-" and value:
        sign = -1.0 if value[0] == "-" else 1.0
        value = value[1:]
    if value == "0":
        return timedelta(0)
    position, seconds = 0, 0.0
    for match in _PART.finditer(value):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not value or position != len(value):
        raise ValueError(
            f"{text!r} is not a duration (expected a Go duration such as 90s, 10m or 1h30m)"
        )
    return timedelta(seconds=sign * seconds)


def positive_duration(text: object, where: str) -> timedelta | None:
    """A positive duration, or None (logged) when ``text`` is not one."""
    try:
        duration = go_duration(str(text))
    except ValueError as err:
        log.warning("%s: %s", where, err)
        return None
    if duration <= timedelta(0):
        log.warning("%s: waiting time %r must be positive; ignored", where, text)
        return None
    return duration


def creation_time(job: JobInfo) -> datetime | None:
    """When the job's PodGroup was created, or None when it does not say."""
    if not job.creation:
        return None
    try:
        return parse_time(job.creation)
    except ValueError:
        log.warning("job %s: unreadable creationTimestamp %r", job.uid, job.creation)
        return None


@register_plugin
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
        ssn.register("job_order", self.name, self.job_order)
        ssn.register("job_enqueueable", self.name, self.permit_when_overdue)
        ssn.register("job_pipelined", self.name, self.permit_when_overdue)

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

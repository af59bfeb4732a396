"""PodGroup waiting times and creation times, as the time-based plugins (sla, reservation)
read them; the duration syntax itself is ``core/api/durations``."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from stromboli.core.api.durations import go_duration
from stromboli.core.clock import parse_time
from stromboli.core.scheduler.api.job import JobInfo

log = logging.getLogger(__name__)


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

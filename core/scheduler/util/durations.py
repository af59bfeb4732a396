"""Go durations and PodGroup times, as the time-based plugins (sla, tdm, reservation,
extender) read their arguments and annotations."""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta

from stromboli.core.clock import parse_time
from stromboli.core.scheduler.api.job import JobInfo

log = logging.getLogger(__name__)

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
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
#: Go's durations are int64 nanoseconds: about 292 years either way.
MAX_SECONDS = (2**63 - 1) / 1e9


def _shown(text: object) -> str:
    """``text`` quoted for a message, cut short: it may be a user's huge annotation."""
    value = str(text)
    return repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value)} characters)"


def go_duration(text: str) -> timedelta:
    """A Go ``time.ParseDuration`` string (``90s``, ``1h2m3s``, ``1.5h``, ``-5m``, ``0``).

    ASCII digits only, and at most Go's range (an int64 of nanoseconds): anything else is a
    ValueError, never an OverflowError from a user's annotation.
    """
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
            f"{_shown(text)} is not a duration (expected a Go duration such as 90s, 10m or 1h30m)"
        )
    if not seconds <= MAX_SECONDS:
        raise ValueError(
            f"{_shown(text)} is out of range (Go durations are at most about 292 years)"
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

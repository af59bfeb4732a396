"""Volcano's validating admission rule for CronJobs (its ``/cronjobs/validate`` webhook, on
create and update).

The schedule must be one Kubernetes accepts and that fires (:func:`schedule_problem`, which
the CronJob controller applies too), the time zone one the zone database knows, and the name
short enough for the jobs' ``-<minutes>`` suffix. ``validate_cronjob`` returns the reasons to
refuse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

MAX_NAME_LENGTH = 52
_ZONE = re.compile(r"^[A-Za-z0-9_+\-/]+$")


#: Kubernetes' schedule descriptors (robfig/cron's standard parser), and the longest schedule
#: read (a schedule is a few fields; longer is a mistake or an attack on the parser).
DESCRIPTORS: Final = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
MAX_SCHEDULE_LENGTH: Final = 1024
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=ZoneInfo("UTC"))


def schedule_problem(schedule: Any) -> str | None:
    """Why ``schedule`` is not a schedule the API server accepts and this controller can run
    (five fields or a descriptor, and at least one time it fires), as the API server words
    field errors on ``spec.schedule``; None when it is fine.

    Checked before a run, so that a six-field schedule (croniter would read seconds and fire
    every second) or one that never fires (30 February) is refused rather than run.
    """
    path = "spec.schedule"
    if schedule is None or schedule == "":
        return f"{path}: Required value"
    if not isinstance(schedule, str):
        return f"{path}: Invalid value: {schedule!r}: must be a string"
    shown = '"' + schedule[:100].replace('"', '\\"') + ('..."' if len(schedule) > 100 else '"')
    if len(schedule) > MAX_SCHEDULE_LENGTH:
        return f"{path}: Invalid value: {shown}: longer than {MAX_SCHEDULE_LENGTH} characters"
    text = schedule.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        return (
            f"{path}: Invalid value: {shown}: cannot use TZ or CRON_TZ in schedule, use "
            "timeZone field instead"
        )
    if text.startswith("@"):
        if text not in DESCRIPTORS:
            return f"{path}: Invalid value: {shown}: unrecognized descriptor: {text}"
    else:
        fields = text.split()
        if len(fields) != 5:
            return f"{path}: Invalid value: {shown}: expected exactly 5 fields, found {len(fields)}"
        if not text.isascii() or not croniter.is_valid(text):
            return f"{path}: Invalid value: {shown}: unparseable schedule"
    try:
        croniter(text, _EPOCH).get_next(datetime)
    except (CroniterError, ValueError, OverflowError):
        return f"{path}: Invalid value: {shown}: the schedule never fires"
    return None


def timezone_problem(zone: Any) -> str | None:
    """Why ``spec.timeZone`` is unusable; None when unset or known."""
    path = "spec.timeZone"
    if zone is None:
        return None
    if not isinstance(zone, str) or not zone or zone == "Local" or not _ZONE.match(zone):
        return f"{path}: Invalid value: {zone!r}: unknown time zone"
    if len(zone) > 255 or ".." in zone or zone.startswith("/"):
        return f"{path}: Invalid value: {zone!r}: unknown time zone"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{path}: Invalid value: {zone!r}: unknown time zone"
    return None


def validate_cronjob(cronjob: Mapping[str, Any]) -> list[str]:
    """Reasons to refuse ``cronjob`` (create or update)."""
    errors: list[str] = []
    meta = cronjob.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str) and len(name) > MAX_NAME_LENGTH:
        errors.append(
            f"cronJob name must be no more than {MAX_NAME_LENGTH} characters to accommodate "
            "job name suffix (max 63 total)"
        )
    spec = cronjob.get("spec")
    if not isinstance(spec, Mapping):
        return [*errors, "spec: Required value"]
    problem = schedule_problem(spec.get("schedule"))
    if problem:
        errors.append(problem)
    problem = timezone_problem(spec.get("timeZone"))
    if problem:
        errors.append(problem)
    return errors

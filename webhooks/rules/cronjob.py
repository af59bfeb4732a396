"""Volcano's validating admission rule for CronJobs (reference §6, "CronJob CREATE/UPDATE").

The schedule must be one Kubernetes accepts and that fires (see
:func:`~stromboli.core.controller.cronjob.schedule_problem`, which the controller applies
too), the time zone one the zone database knows, and the name short enough for the jobs'
``-<minutes>`` suffix. ``validate_cronjob`` returns the reasons to refuse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from stromboli.core.controller.cronjob import schedule_problem

MAX_NAME_LENGTH = 52
_ZONE = re.compile(r"^[A-Za-z0-9_+\-/]+$")


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

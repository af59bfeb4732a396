"""Volcano's validating admission rule for pods (its ``/pods/validate`` webhook, on create).

Only pods for one of our schedulers are checked: their disruption-budget annotations
``volcano.sh/jdb-min-available`` and ``volcano.sh/jdb-max-unavailable`` must each be a positive
integer or a percentage from 1% to 99%, and at most one may be set.
``validate_pod_create`` returns the reasons to refuse, in Volcano's words.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from stromboli.core.admission import shape
from stromboli.core.api import constants as k

JDB_KEYS = (k.JDB_MIN_AVAILABLE_KEY, k.JDB_MAX_UNAVAILABLE_KEY)

_GO_INT = re.compile(r"^[+-]?\d+$")


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def int_or_percentage_problem(key: str, value: str) -> str | None:
    """Why ``value`` is not a positive integer or a 1%–99% percentage (Go's ``intstr``
    reading: a string that parses as an integer is one, anything else a percentage)."""
    if _GO_INT.match(value):
        if int(value) <= 0:
            return f"invalid value <{_go_quote(value)}> for {key}, it must be a positive integer"
        return None
    digits = value.replace("%", "")
    if not _GO_INT.match(digits):
        return f"invalid value strconv.Atoi: parsing {_go_quote(digits)}: invalid syntax for {key}"
    if not 0 < int(digits) < 100:
        return (
            f"invalid value <{_go_quote(value)}> for {key}, it must be a valid percentage which "
            "between 1% ~ 99%"
        )
    return None


def validate_pod_create(
    pod: Mapping[str, Any], scheduler_names: Collection[str] = (k.DEFAULT_SCHEDULER_NAME,)
) -> list[str]:
    """Reasons Volcano's webhook would refuse to create ``pod`` (see the module docstring)."""
    malformed = shape.problems(pod, shape.POD)
    if malformed:
        return malformed
    scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
    if scheduler not in scheduler_names:
        return []
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    present = 0
    for key in JDB_KEYS:
        if key in annotations:
            present += 1
            problem = int_or_percentage_problem(key, str(annotations[key]))
            if problem:
                return [problem]
    if present > 1:
        return [f"not allow configure multiple annotations <[{' '.join(JDB_KEYS)}]> at same time"]
    return []

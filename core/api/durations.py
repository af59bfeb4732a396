"""Durations, in the two spellings users write them: Go's (``90s``, ``1h30m``, ``1.5h``,
``250ms``, ``-5m``), which Volcano's plugin arguments, annotations and flags use, and the
simulator's and CLI's, which also take a bare number of seconds.

One unit table and one range for both: ASCII digits only (``float`` alone would take ``"１"``,
``"nan"`` and ``"inf"``), and at most Go's range, an int64 of nanoseconds (about 292 years), so
that a user's annotation is a ValueError naming it, never an OverflowError downstream.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # micro sign
    "μs": 1e-6,  # Greek mu; Go accepts both
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)
#: Go's durations are int64 nanoseconds: about 292 years either way.
MAX_SECONDS = (2**63 - 1) / 1e9


def _shown(text: object) -> str:
    """``text`` quoted for a message, cut short: it may be a user's huge annotation."""
    value = str(text)
    return repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value)} characters)"


def _unit_seconds(value: str) -> float | None:
    """Seconds of a sequence of ``<number><unit>`` parts, or None if ``value`` is not one."""
    position, seconds = 0, 0.0
    for match in _PART.finditer(value):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not value or position != len(value):
        return None
    return seconds


def go_duration(text: str) -> timedelta:
    """A Go ``time.ParseDuration`` string (``90s``, ``1h2m3s``, ``1.5h``, ``-5m``, ``0``)."""
    value = str(text).strip()
    sign = 1.0
    if value[:1] in "+-" and value:
        sign = -1.0 if value[0] == "-" else 1.0
        value = value[1:]
    if value == "0":
        return timedelta(0)
    seconds = _unit_seconds(value)
    if seconds is None:
        raise ValueError(
            f"{_shown(text)} is not a duration (expected a Go duration such as 90s, 10m or 1h30m)"
        )
    if not seconds <= MAX_SECONDS:
        raise ValueError(
            f"{_shown(text)} is out of range (Go durations are at most about 292 years)"
        )
    return timedelta(seconds=sign * seconds)


def parse_duration(text: str | int | float, field: str = "duration") -> float:
    """Seconds in ``text``: a bare (finite) number of seconds, or Go's units without a sign;
    ``field`` names the offending path in the error."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not math.isfinite(text) or abs(text) > MAX_SECONDS:
            raise ValueError(f"{field}: {text!r} is not a finite duration")
        return float(text)
    value = str(text).strip()
    if _NUMBER.fullmatch(value):
        seconds = float(value)
        if not math.isfinite(seconds) or abs(seconds) > MAX_SECONDS:
            raise ValueError(f"{field}: {_shown(text)} is not a finite duration")
        return seconds
    total = _unit_seconds(value)
    if total is None:
        raise ValueError(f"{field}: {_shown(text)} is not a duration (examples: 90s, 1m30s, 2h)")
    if not total <= MAX_SECONDS:
        raise ValueError(f"{field}: {_shown(text)} is not a finite duration")
    return total

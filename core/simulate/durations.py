"""Go-style durations (``90s``, ``1m30s``, ``1.5h``, ``250ms``) as used by the simulator's
annotations and Volcano's duration arguments."""

from __future__ import annotations

import math
import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", re.ASCII)
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def parse_duration(text: str | int | float, field: str = "duration") -> float:
    """Seconds in ``text``; a bare number means seconds. ASCII digits only, and finite: Python's
    ``float`` would take ``"１"``, ``"nan"`` and ``"inf"``, none of which is a time."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not math.isfinite(text):
            raise ValueError(f"{field}: {text!r} is not a finite duration")
        return float(text)
    value = str(text).strip()
    if _NUMBER.fullmatch(value):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ValueError(f"{field}: {text!r} is not a finite duration")
        return seconds
    position, total = 0, 0.0
    for match in _PART.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(value) or not value:
        raise ValueError(f"{field}: {text!r} is not a duration (examples: 90s, 1m30s, 2h)")
    if not math.isfinite(total):
        raise ValueError(f"{field}: {text!r} is not a finite duration")
    return total

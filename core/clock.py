"""Time sources, injected everywhere a timestamp is written.

The simulator runs the real scheduler and controller on a virtual clock, so nothing in the core may
call ``datetime.now()`` or ``time.monotonic()`` directly: every creationTimestamp, event time and
timeout reads the :class:`Clock` it was given. ``SystemClock`` serves real clusters.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol, runtime_checkable

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@runtime_checkable
class Clock(Protocol):
    """Wall time for timestamps, monotonic time for durations and timeouts."""

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (only differences are meaningful)."""
        ...


class SystemClock:
    """The machine's clocks, for a real cluster."""

    __slots__ = ()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class VirtualClock:
    """A clock that moves only when told to, so that simulations are reproducible.

    It counts seconds since the Unix epoch (default 0, i.e. 1970-01-01T00:00:00Z), and its
    monotonic reading is the same number, so durations measured either way agree.
    """

    __slots__ = ("_seconds",)

    def __init__(self, start: float = 0.0) -> None:
        self._seconds = float(start)

    @property
    def seconds(self) -> float:
        """Seconds since the epoch."""
        return self._seconds

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self._seconds)

    def monotonic(self) -> float:
        return self._seconds

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds``; going backwards would break every timeout, so refuse."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {seconds} seconds)")
        self._seconds += seconds

    def set(self, seconds_since_epoch: float) -> None:
        """Jump to an absolute time, which must not be earlier than the current one."""
        if seconds_since_epoch < self._seconds:
            raise ValueError(
                f"a clock cannot go backwards (from {self._seconds} to {seconds_since_epoch})"
            )
        self._seconds = float(seconds_since_epoch)


def format_time(dt: datetime) -> str:
    """Kubernetes ``metav1.Time``: RFC 3339, UTC, whole seconds (``1970-01-01T00:00:00Z``)."""
    return _format_seconds(dt)


@lru_cache(maxsize=256)
def _format_seconds(dt: datetime) -> str:
    # Cached: a virtual clock stamps thousands of objects with the same instant.
    return _utc(dt).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(dt: datetime) -> str:
    """Kubernetes ``metav1.MicroTime`` (Event ``eventTime``): microseconds, ``...00.000000Z``."""
    return _utc(dt).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Read an RFC 3339 time as Kubernetes writes it (``Z`` or an offset, optional fraction)."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"time {text!r} has no timezone; Kubernetes times end in Z or an offset")
    return parsed.astimezone(UTC)


def _utc(dt: datetime) -> datetime:
    if dt.tzinfo is None:
        raise ValueError(f"naive datetime {dt!r}: pass a timezone-aware time (clocks give UTC)")
    return dt.astimezone(UTC)

"""The injected clocks and Kubernetes time formatting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from stromboli.core.clock import (
    Clock,
    SystemClock,
    VirtualClock,
    format_micro_time,
    format_time,
    parse_time,
)


def test_virtual_clock_starts_at_epoch() -> None:
    assert VirtualClock().now() == datetime(1970, 1, 1, tzinfo=UTC)


def test_virtual_clock_now_is_utc_aware() -> None:
    assert VirtualClock().now().tzinfo is not None
    assert VirtualClock().now().utcoffset() == timedelta(0)


def test_virtual_clock_custom_start() -> None:
    assert VirtualClock(86400).now() == datetime(1970, 1, 2, tzinfo=UTC)


def test_advance_moves_now_and_monotonic() -> None:
    clock = VirtualClock()
    clock.advance(90)
    assert clock.seconds == 90
    assert clock.monotonic() == 90
    assert format_time(clock.now()) == "1970-01-01T00:01:30Z"


def test_advance_accumulates_fractions() -> None:
    clock = VirtualClock()
    clock.advance(0.25)
    clock.advance(0.5)
    assert clock.seconds == pytest.approx(0.75)


def test_advance_backwards_refused() -> None:
    with pytest.raises(ValueError, match="backwards"):
        VirtualClock().advance(-1)


def test_set_jumps_forward() -> None:
    clock = VirtualClock(10)
    clock.set(3600)
    assert clock.now() == datetime(1970, 1, 1, 1, tzinfo=UTC)


def test_set_backwards_refused() -> None:
    clock = VirtualClock(10)
    with pytest.raises(ValueError, match="backwards"):
        clock.set(5)


def test_set_same_time_allowed() -> None:
    clock = VirtualClock(10)
    clock.set(10)
    assert clock.seconds == 10


def test_system_clock_is_aware_and_recent() -> None:
    now = SystemClock().now()
    assert now.tzinfo is not None
    assert abs((datetime.now(UTC) - now).total_seconds()) < 60


def test_system_clock_monotonic_never_decreases() -> None:
    clock = SystemClock()
    first = clock.monotonic()
    assert clock.monotonic() >= first


def test_both_clocks_satisfy_protocol() -> None:
    assert isinstance(SystemClock(), Clock)
    assert isinstance(VirtualClock(), Clock)


def test_format_time_epoch() -> None:
    assert format_time(datetime(1970, 1, 1, tzinfo=UTC)) == "1970-01-01T00:00:00Z"


def test_format_time_truncates_fraction() -> None:
    assert format_time(datetime(2024, 5, 6, 7, 8, 9, 999999, tzinfo=UTC)) == "2024-05-06T07:08:09Z"


def test_format_time_converts_offsets_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert format_time(datetime(2024, 1, 1, 2, 0, tzinfo=plus_two)) == "2024-01-01T00:00:00Z"


def test_format_time_rejects_naive() -> None:
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2024, 1, 1))


def test_format_micro_time() -> None:
    dt = datetime(1970, 1, 1, 0, 0, 1, 500, tzinfo=UTC)
    assert format_micro_time(dt) == "1970-01-01T00:00:01.000500Z"


def test_parse_time_round_trip() -> None:
    assert parse_time("1970-01-01T00:01:30Z") == datetime(1970, 1, 1, 0, 1, 30, tzinfo=UTC)


def test_parse_time_offset() -> None:
    assert parse_time("2024-01-01T02:00:00+02:00") == datetime(2024, 1, 1, tzinfo=UTC)


def test_parse_time_requires_zone() -> None:
    with pytest.raises(ValueError, match="timezone"):
        parse_time("2024-01-01T00:00:00")

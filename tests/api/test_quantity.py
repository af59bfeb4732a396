"""Exact quantity parsing, the syntax check used by the models, and canonical formatting."""

from __future__ import annotations

from fractions import Fraction

import pytest

from stromboli.core.api.quantity import (
    QuantityError,
    base_value,
    format_bytes,
    format_count,
    format_cpu,
    is_quantity,
    milli_value,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5", Fraction(3, 2)),
        ("500m", Fraction(1, 2)),
        ("2Gi", 2 * 2**30),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1e-2", Fraction(1, 100)),
        ("0.5Gi", 2**29),
        ("128Mi", 128 * 2**20),
        ("1Ki", 1024),
        ("1k", 1000),
        ("1M", 10**6),
        ("2T", 2 * 10**12),
        ("100n", Fraction(1, 10**7)),
        ("3u", Fraction(3, 10**6)),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("+2", 2),
        ("-2", -2),
        ("0", 0),
        (4, 4),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_quantity(text: str | int | float, expected: Fraction | int) -> None:
    assert parse_quantity(text) == expected


def test_parse_quantity_is_exact_not_float() -> None:
    assert parse_quantity("0.1") * 3 == Fraction(3, 10)


@pytest.mark.parametrize(
    "text",
    ["abc", "", "1.5.5", "1Gb", "Gi", "1 Gi", " 1", "1 ", "1\n", "1mi", "1ki", "1e", "--1", "0x10"],
)
def test_invalid_quantity_names_the_field(text: str) -> None:
    with pytest.raises(QuantityError, match=r"^spec\.capability\.cpu: ") as info:
        parse_quantity(text, "spec.capability.cpu")
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}])
def test_non_scalar_quantity_rejected(value: object) -> None:
    with pytest.raises(QuantityError, match="not a valid quantity"):
        parse_quantity(value, "x")  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize("value", ["1.5", "500m", "2Gi", "1e3", "0.5Gi", 3, 2.5, "-1"])
def test_is_quantity_accepts(value: object) -> None:
    assert is_quantity(value)


@pytest.mark.parametrize(
    "value", ["abc", "", "1Gb", "1\n", True, False, None, float("nan"), float("inf"), [1]]
)
def test_is_quantity_rejects(value: object) -> None:
    assert not is_quantity(value)


def test_is_quantity_agrees_with_parse_quantity() -> None:
    for text in ["1", "1.", ".1", "1e9", "1E-9", "7Ei", "9P", "x", "1e1.5", "+.5m", "-", "."]:
        try:
            parse_quantity(text)
        except QuantityError:
            assert not is_quantity(text), text
        else:
            assert is_quantity(text), text


def test_milli_and_base_values_round_up() -> None:
    assert milli_value(parse_quantity("1.0001")) == 1001
    assert milli_value(parse_quantity("250m")) == 250
    assert base_value(parse_quantity("1.2")) == 2
    assert base_value(parse_quantity("1Ki")) == 1024


def test_formatting() -> None:
    assert format_cpu(2000) == "2"
    assert format_cpu(1500) == "1500m"
    assert format_bytes(2 * 2**30) == "2Gi"
    assert format_bytes(1000) == "1000"
    assert format_bytes(0) == "0"
    assert format_count(3) == "3"
    assert format_count(0.5) == "500m"

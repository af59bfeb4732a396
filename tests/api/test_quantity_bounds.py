"""The quantity parser as a guard: bounded work and bounded values for any input text."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api.quantity import (
    MAX_LENGTH,
    MAX_VALUE,
    QuantityError,
    is_quantity,
    parse_quantity,
)

SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "E", "n", "u", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@pytest.mark.parametrize(
    "text",
    ["1e309", "1e100000000", "1E99999999999999999999", "1e17", "10P", "8Ei", "1E", "9.3e15"],
)
def test_values_beyond_int64_milli_units_are_refused(text: str) -> None:
    with pytest.raises(QuantityError, match=r"^spec\.cpu: .* is out of range"):
        parse_quantity(text, "spec.cpu")


def test_huge_exponent_is_never_computed() -> None:
    # 10^(10^8) as a Fraction would take minutes and gigabytes; the bound answers at once.
    for _ in range(1000):
        with pytest.raises(QuantityError):
            parse_quantity("1e100000000")
        assert parse_quantity("1e-100000000") == Fraction(1, 10**9)
        assert parse_quantity("0e100000000") == 0


@pytest.mark.parametrize("text", ["１", "１０0m", "٣", "1٠", "1e٣", "²"])
def test_only_ascii_digits(text: str) -> None:
    with pytest.raises(QuantityError, match="not a valid quantity"):
        parse_quantity(text)


def test_largest_value_is_accepted() -> None:
    assert parse_quantity("9e15") == 9 * 10**15
    assert parse_quantity("7Pi") == 7 * 2**50
    assert parse_quantity(-(9 * 10**15)) == -(9 * 10**15)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.1n", Fraction(1, 10**9)), ("1.0000000001", Fraction(10**9 + 1, 10**9)), ("1e-40", 0)],
)
def test_finer_than_nano_rounds_up(text: str, expected: Fraction | int) -> None:
    # Kubernetes rounds non-zero values up to one nano-unit (1e-40 is below the scan: 1n too).
    assert parse_quantity(text) == (expected or Fraction(1, 10**9))


def test_overlong_text_is_refused() -> None:
    with pytest.raises(QuantityError, match="too long"):
        parse_quantity("1" + "0" * MAX_LENGTH)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, 10**30, True, None, [1]])
def test_non_text_values(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]
    assert not is_quantity(value)


def test_error_message_is_short_for_huge_input() -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity("x" * 50)
    assert len(str(info.value)) < 250


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_any_text_parses_within_bounds_or_is_refused(text: str) -> None:
    try:
        value = parse_quantity(text)
    except QuantityError:
        assert not is_quantity(text)
        return
    assert is_quantity(text)
    assert abs(value) <= MAX_VALUE
    assert (value * 10**9).denominator == 1  # nano precision, as Kubernetes


@settings(max_examples=400, deadline=None)
@given(
    sign=st.sampled_from(["", "+", "-"]),
    whole=st.integers(min_value=0, max_value=10**20),
    frac=st.one_of(st.none(), st.integers(min_value=0, max_value=10**12)),
    exponent=st.one_of(st.none(), st.integers(min_value=-(10**9), max_value=10**9)),
    suffix=st.sampled_from(SUFFIXES),
)
def test_grammar_values_agree_with_exact_arithmetic(
    sign: str, whole: int, frac: int | None, exponent: int | None, suffix: str
) -> None:
    number = str(whole) + ("" if frac is None else f".{frac}")
    text = sign + number + (f"e{exponent}" if exponent is not None else suffix)
    if len(text) > MAX_LENGTH:
        return
    exact: Fraction | None = Fraction(number)
    if exponent is not None:
        if abs(exponent) > 60:
            exact = None  # far beyond the bound (or below a nano-unit): not computed here
        else:
            exact *= Fraction(10) ** exponent
    elif suffix.endswith("i"):
        exact *= 2 ** (10 * (SUFFIXES.index(suffix) - 9))
    else:
        powers = {"": 0, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
        powers |= {"n": -9, "u": -6}
        exact *= Fraction(10) ** powers[suffix]
    try:
        value = parse_quantity(text)
    except QuantityError:
        assert exact is None or exact > MAX_VALUE
        return
    if exact is None:
        if Fraction(number) == 0:
            assert value == 0
        else:
            assert exponent is not None and exponent < 0 and abs(value) == Fraction(1, 10**9)
        return
    rounded = Fraction(-(-exact * 10**9 // 1), 10**9)  # up to a nano-unit
    assert value == (-rounded if sign == "-" else rounded)

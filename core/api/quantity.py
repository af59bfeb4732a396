"""Kubernetes resource quantities, parsed exactly.

A quantity is a signed decimal number with an optional suffix: binary SI (``Ki``..``Ei``),
decimal SI (``n u m k M G T P E``) or a decimal exponent (``e3``, ``E-2``). Values are kept as
``Fraction`` so that ``0.5Gi`` or ``1.5`` never suffer float rounding; the scheduler later turns
them into canonical numbers (cpu in millicores, everything else in base units).
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<decimal>[numkMGTPE]?))\Z"
)


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def parse_quantity(text: str | int | float, field: str = "quantity") -> Fraction:
    """Parse a quantity exactly; ``field`` names the offending path in the error."""
    if isinstance(text, bool):
        raise QuantityError(f"{field}: {text!r} is not a valid quantity")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    if not isinstance(text, str):
        raise QuantityError(f"{field}: {text!r} is not a valid quantity")
    match = _PATTERN.match(text)
    if match is None:
        raise QuantityError(
            f"{field}: {text!r} is not a valid quantity "
            "(expected a number with an optional suffix such as 500m, 2Gi, 1.5 or 1e3)"
        )
    value = Fraction(match["number"])
    if match["binary"]:
        value *= _BINARY[match["binary"]]
    elif match["exp"]:
        value *= Fraction(10) ** int(match["exp"][1:])
    else:
        value *= _DECIMAL[match["decimal"] or ""]
    return -value if match["sign"] == "-" else value


def milli_value(quantity: Fraction) -> int:
    """Millis of a quantity, rounded up as Kubernetes' ``MilliValue`` does."""
    return ceil(quantity * 1000)


def base_value(quantity: Fraction) -> int:
    """Whole units of a quantity, rounded up as Kubernetes' ``Value`` does."""
    return ceil(quantity)


def format_cpu(millis: float) -> str:
    """Canonical cpu text: whole cores as ``2``, otherwise millicores as ``1500m``."""
    millis = round(millis)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(amount: float) -> str:
    """Canonical byte text with the largest binary suffix that divides exactly."""
    amount = round(amount)
    if amount == 0:
        return "0"
    for suffix, factor in reversed(_BINARY.items()):
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)


def format_count(value: float) -> str:
    """Canonical text for plain counts; fractional values keep millis."""
    if abs(value - round(value)) < 1e-9:
        return str(round(value))
    return f"{round(value * 1000)}m"


def is_quantity(value: object) -> bool:
    """Whether ``value`` is a valid quantity, without building a ``Fraction``.

    Validation of thousands of objects at load time only needs the yes/no answer; the exact
    value is computed later, once, where the scheduler needs numbers.
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == value and value not in (float("inf"), float("-inf"))
    return isinstance(value, str) and _PATTERN.match(value) is not None

"""Kubernetes resource quantities, parsed exactly and within bounds.

A quantity is a signed decimal number with an optional suffix: binary SI (``Ki``..``Ei``),
decimal SI (``n u m k M G T P E``) or a decimal exponent (``e3``, ``E-2``). Values are kept as
``Fraction`` so that ``0.5Gi`` or ``1.5`` never suffer float rounding; the scheduler later turns
them into canonical numbers (cpu in millicores, everything else in base units).

The parser is also a guard: the text comes from users, so its length, its digits (ASCII only,
as Kubernetes' grammar) and its exponent are bounded before any arithmetic, and a value that
does not fit int64 milli-units (about 9.2e15, Kubernetes' own ``MilliValue`` range) is refused.
``1e100000000`` therefore costs microseconds, and nothing downstream can overflow a float.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from math import ceil

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_DECIMAL_EXPONENT["E"] = 18
_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))\Z",
    re.ASCII,
)
#: The largest magnitude, in milli-units, a quantity may have (int64, as Kubernetes' MilliValue).
MAX_MILLI = 2**63 - 1
MAX_VALUE = Fraction(MAX_MILLI, 1000)
#: Longest quantity text accepted; Kubernetes' canonical forms are far shorter.
MAX_LENGTH = 64
#: Kubernetes keeps nano precision and rounds anything finer up to 1n.
_NANO = 10**9


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity, or one out of range."""


def _syntax_error(field: str, text: object) -> QuantityError:
    return QuantityError(
        f"{field}: {_shown(text)} is not a valid quantity "
        "(expected a number with an optional suffix such as 500m, 2Gi, 1.5 or 1e3)"
    )


def _range_error(field: str, text: object) -> QuantityError:
    return QuantityError(
        f"{field}: {_shown(text)} is out of range "
        f"(a quantity must fit {MAX_MILLI} milli-units, about 9.2e15)"
    )


def _shown(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 80 else f"{shown[:77]}..."


def parse_quantity(text: object, field: str = "quantity") -> Fraction:
    """Parse a quantity exactly; ``field`` names the offending path in the error. Any value
    is accepted and anything but a string or a finite number is refused, since quantities
    come from users' documents."""
    if isinstance(text, bool):
        raise _syntax_error(field, text)
    if isinstance(text, int):
        value = Fraction(text)
    elif isinstance(text, float):
        if not math.isfinite(text):
            raise _syntax_error(field, text)
        value = Fraction(repr(text))
    elif isinstance(text, str):
        value = _parse_text(text, field)
    else:
        raise _syntax_error(field, text)
    if abs(value) > MAX_VALUE:
        raise _range_error(field, text)
    return value


def _parse_text(text: str, field: str) -> Fraction:
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"{field}: {_shown(text)} is not a valid quantity (too long)")
    match = _PATTERN.match(text)
    if match is None:
        raise _syntax_error(field, text)
    whole, frac = match["int"], match["frac"] or ""
    if not whole and not frac:
        raise _syntax_error(field, text)
    if match["binary"]:
        scale, exponent = _BINARY[match["binary"]], 0
    elif match["exp"] is not None:
        exp_text = match["exp"]
        if len(exp_text.lstrip("+-").lstrip("0")) > 5:
            # |exponent| of 10^5 or more: far outside the bound either way; never computed.
            scale, exponent = 1, -(10**6) if exp_text.startswith("-") else 10**6
        else:
            scale, exponent = 1, int(exp_text)
    else:
        scale, exponent = 1, _DECIMAL_EXPONENT[match["decimal"] or ""]
    if not (whole + frac).strip("0"):
        return Fraction(0)
    # Order of magnitude before any arithmetic: the digits before the point (or the zeros
    # after it), shifted by the exponent. Above 10^17 the value exceeds the bound whatever the
    # suffix; below 10^-30 it rounds up to one nano-unit as Kubernetes does.
    whole_digits = whole.lstrip("0")
    if whole_digits:
        magnitude = len(whole_digits) + exponent
    else:
        magnitude = exponent - (len(frac) - len(frac.lstrip("0")))
    if magnitude > 17:
        raise _range_error(field, text)
    if magnitude < -30:
        return _signed(Fraction(1, _NANO), match["sign"])
    value = Fraction(int(whole + frac), 10 ** len(frac)) * scale
    value *= Fraction(10) ** exponent
    # Kubernetes keeps nine decimals and rounds finer values up, so 0.1n is 1n.
    nanos = value * _NANO
    if nanos.denominator != 1:
        value = Fraction(ceil(nanos), _NANO)
    return _signed(value, match["sign"])


def _signed(value: Fraction, sign: str | None) -> Fraction:
    return -value if sign == "-" else value


def milli_value(quantity: Fraction) -> int:
    """Millis of a quantity, rounded up as Kubernetes' ``MilliValue`` does."""
    return ceil(quantity * 1000)


def base_value(quantity: Fraction) -> int:
    """Whole units of a quantity, rounded up as Kubernetes' ``Value`` does."""
    return ceil(quantity)
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
    """Whether ``value`` is a valid quantity within range (what ``parse_quantity`` accepts)."""
    try:
        parse_quantity(value, "")
    except QuantityError:
        return False
    return True

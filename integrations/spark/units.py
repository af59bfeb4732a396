"""Spark's memory strings, read the way Spark reads them.

Spark sizes (``spark.driver.memory``, ``spec.driver.memory``, ``memoryOverhead``) are JVM
strings: an integer with an optional binary suffix ``k``/``m``/``g``/``t``/``p`` (or ``kb``..
``pb``, ``b``), case-insensitive. A bare number means MiB, the unit of Spark's memory settings
(``ConfigBuilder(...).bytesConf(ByteUnit.MiB)``). The Spark operator instead hands these
strings to Kubernetes' quantity parser, so ``512m`` becomes 512 *milli*-bytes and ``1g`` (not a
quantity) vanishes; ``kubernetes_memory`` reproduces that for the upstream-identical mode.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from stromboli.core.api.quantity import QuantityError, parse_quantity
from stromboli.integrations.common import ConversionError

_JVM = re.compile(r"^([0-9]{1,15})([a-z]{0,2})\Z", re.ASCII)
_SUFFIX = {
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "p": 2**50,
    "pb": 2**50,
}
MIB = 2**20


def jvm_memory(text: Any, field: str) -> int:
    """Bytes of a JVM size string; anything Spark itself would refuse is refused."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise ConversionError(field, "must be a JVM size such as 512m or 2g")
    match = _JVM.match(str(text).strip().lower())
    if match is None:
        raise ConversionError(
            field,
            f"{str(text)[:40]!r} is not a JVM size: an integer with k, m, g or t "
            "(Kubernetes suffixes such as Mi or Gi are not read by Spark)",
        )
    digits, suffix = match.groups()
    if suffix and suffix not in _SUFFIX:
        raise ConversionError(field, f"{suffix!r} is not a JVM size suffix (k, m, g, t or p)")
    return int(digits) * (_SUFFIX[suffix] if suffix else MIB)


def kubernetes_memory(text: Any, field: str) -> Fraction | None:
    """What the Spark operator gets for a memory string: the quantity it parses as, or None
    when it does not parse (the operator then leaves memory out)."""
    try:
        value = parse_quantity(text, field)
    except QuantityError:
        return None
    return value if value >= 0 else None

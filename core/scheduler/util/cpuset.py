"""Linux CPU lists (``0-3,8,10-11``), as Numatopology objects and topology decisions write them.

The text comes from stored objects a user may write, so parsing is bounded: CPU ids above
:data:`MAX_CPU_ID` and lists longer than :data:`MAX_TEXT` are refused with an error naming the
text, never expanded into millions of ids.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Highest CPU id accepted (Linux's own NR_CPUS limit is 8192).
MAX_CPU_ID = 8191
#: Longest CPU list text accepted.
MAX_TEXT = 16_384


class CpuSetError(ValueError):
    """A CPU list that is not one, or names CPUs past :data:`MAX_CPU_ID`."""


def _cpu(text: str, whole: str) -> int:
    if not text.strip().isdigit():
        raise CpuSetError(f"CPU list {whole[:80]!r}: {text[:20]!r} is not a CPU id")
    value = int(text)
    if value > MAX_CPU_ID:
        raise CpuSetError(f"CPU list {whole[:80]!r}: CPU {value} is above {MAX_CPU_ID}")
    return value


def parse_cpuset(text: object) -> frozenset[int]:
    """The CPU ids of ``text``; an empty text is the empty set."""
    if not isinstance(text, str):
        raise CpuSetError(f"CPU list {text!r} is not a string")
    if len(text) > MAX_TEXT:
        raise CpuSetError(f"CPU list of {len(text)} characters is longer than {MAX_TEXT}")
    ids: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        first = _cpu(low, text)
        last = _cpu(high, text) if dash else first
        if last < first:
            raise CpuSetError(f"CPU list {text[:80]!r}: range {part!r} runs backwards")
        ids.update(range(first, last + 1))
    return frozenset(ids)


def format_cpuset(ids: Iterable[int]) -> str:
    """``ids`` as a CPU list, ranges joined: ``{0, 1, 2, 5}`` → ``0-2,5``."""
    parts: list[str] = []
    ordered = sorted(set(ids))
    start = previous = None
    for cpu in ordered:
        if previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)

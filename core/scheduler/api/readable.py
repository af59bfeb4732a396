"""Resource amounts in the units a person reads: ``30 cpu``, ``24Gi memory``, ``2 nvidia.com/gpu``.

The scheduler counts cpu in millicores and memory in bytes; explanations and reports show
cores and binary-suffixed sizes instead, so that ``minResources`` of ``30`` cpu reads as
``30 cpu`` and not ``30000``. One helper, used by ``stromboli explain`` and the simulator's
report alike, so the same amount always reads the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from stromboli.core.scheduler.api.resource import CPU, MEMORY, PODS, Resource

#: Resources counted in bytes.
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")
_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def _trim(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _bytes(amount: float) -> str:
    """``24Gi``, ``1.5Gi``, ``512Mi``, ``100B``: the largest binary unit the amount reaches."""
    magnitude = abs(amount)
    sign = "-" if amount < 0 else ""
    if magnitude < 1024:
        return f"{sign}{_trim(magnitude, 0)}B"
    power = min(int(math.log(magnitude, 1024)), len(_BINARY))
    power = max(power, 1)
    value = magnitude / 1024**power
    # Rounding may carry into the next unit (1023.96Mi reads as 1Gi, not 1024Mi).
    if round(value, 1) >= 1024 and power < len(_BINARY):
        power += 1
        value = magnitude / 1024**power
    return f"{sign}{_trim(value, 1)}{_BINARY[power - 1]}"


def amount_text(name: str, amount: float) -> str:
    """One amount of resource ``name`` (canonical units: cpu in millicores, bytes, counts)."""
    if not math.isfinite(amount):
        return f"{amount} {name}"
    if name == CPU:
        return f"{_trim(amount / 1000, 3)} cpu"
    if name.startswith(_BYTE_RESOURCES):
        return f"{_bytes(amount)} {name}"
    return f"{_trim(amount, 3)} {name}"


def _order(name: str) -> tuple[int, str]:
    return ({CPU: 0, MEMORY: 1}.get(name, 2), name)


def amounts_text(amounts: Mapping[str, float], *, pods: bool = False) -> str:
    """Several amounts, cpu and memory first: ``30 cpu, 24Gi memory``; ``nothing`` if none.

    Pods are left out unless ``pods`` is set: every pod asks for one, so the count only
    matters where a node or queue limits it.
    """
    parts = [
        amount_text(name, amounts[name])
        for name in sorted(amounts, key=_order)
        if amounts[name] and (pods or name != PODS)
    ]
    return ", ".join(parts) if parts else "nothing"


def resource_text(resource: Resource | None, *, pods: bool = False) -> str:
    """A :class:`Resource` as :func:`amounts_text` writes it; ``unlimited`` for None."""
    if resource is None:
        return "unlimited"
    return amounts_text(resource.amounts, pods=pods)


def names_text(names: Iterable[str]) -> str:
    """``cpu and memory``, ``cpu, memory and nvidia.com/gpu``."""
    ordered = sorted(set(names), key=_order)
    if len(ordered) <= 1:
        return "".join(ordered)
    return ", ".join(ordered[:-1]) + " and " + ordered[-1]


def duration_text(seconds: float) -> str:
    """``1h5m``, ``30s``, ``2d3h``: whole seconds, the two largest units that are not zero."""
    if not math.isfinite(seconds):
        return str(seconds)
    whole = round(abs(seconds))
    sign = "-" if seconds < 0 and whole else ""
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count or (parts and len(parts) < 2):
            parts.append(f"{count}{unit}")
        if len(parts) == 2:
            break
    parts = [p for p in parts if not p.startswith("0")]
    return sign + ("".join(parts) or "0s")

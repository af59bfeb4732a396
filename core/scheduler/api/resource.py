"""Resource amounts as the scheduler sees them.

Two shapes of the same numbers: ``Resource`` (a small name → amount mapping, for queue and job
accounting in plugins) and rows of numpy arrays indexed by a ``ResourceIndex`` (for per-node
work on hot paths). Units are canonical: cpu in millicores, every other resource in base units
(bytes, devices, pods), so cpu ``1.5`` is ``1500`` and memory ``1Gi`` is ``1073741824``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from stromboli.core.api.quantity import (
    QuantityError,
    format_bytes,
    format_count,
    format_cpu,
    parse_quantity,
)

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
#: Volcano compares amounts with this tolerance (its ``minResource``).
EPSILON = 0.1
#: Resources counted in bytes, formatted with binary suffixes.
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")
#: Resources that never take part in fit or share computations of jobs.
IGNORED_FOR_SHARE = frozenset({PODS})


def to_amount(name: str, value: Any, field: str = "") -> float:
    """Convert one quantity to the canonical amount for resource ``name``."""
    if isinstance(value, str):
        try:
            return _cached_amount(name, value)
        except QuantityError:
            pass  # re-parse below so the message names the field
    return _amount(name, parse_quantity(value, field or name), field or name, value)


@functools.lru_cache(maxsize=4096)
def _cached_amount(name: str, value: str) -> float:
    """Quantity texts repeat across thousands of pods; parse each one once."""
    return _amount(name, parse_quantity(value, name), name, value)


def _amount(name: str, quantity: Fraction, field: str, text: Any) -> float:
    """The canonical float of a parsed quantity. Requests, capacities and queue bounds are
    never negative (the API server refuses negative requests and capacities with this
    message); the parser's range keeps every amount far inside a float's."""
    if quantity < 0:
        raise QuantityError(f"{field}: Invalid value: {text!r}: must be greater than or equal to 0")
    return float(quantity * 1000) if name == CPU else float(quantity)


def format_amount(name: str, amount: float) -> str:
    """Canonical Kubernetes text for an amount of resource ``name``."""
    if name == CPU:
        return format_cpu(amount)
    if name.startswith(_BYTE_RESOURCES):
        return format_bytes(amount)
    return format_count(amount)


class Resource:
    """A set of resource amounts; missing names mean zero.

    Kept deliberately small: plugins add and compare these for queues and jobs a few thousand
    times per cycle, never per node.
    """

    __slots__ = ("amounts",)

    def __init__(self, amounts: Mapping[str, float] | None = None) -> None:
        self.amounts: dict[str, float] = {k: v for k, v in (amounts or {}).items() if v}

    @classmethod
    def from_list(cls, resources: Mapping[str, Any] | None, field: str = "") -> Resource:
        """Build from a Kubernetes ResourceList (``{"cpu": "2", "memory": "4Gi"}``)."""
        if not resources:
            return cls()
        return cls(
            {
                name: to_amount(name, v, f"{field}.{name}" if field else name)
                for name, v in resources.items()
            }
        )

    def to_list(self) -> dict[str, str]:
        """Kubernetes ResourceList text of these amounts."""
        return {name: format_amount(name, v) for name, v in sorted(self.amounts.items())}

    def clone(self) -> Resource:
        res = Resource.__new__(Resource)
        res.amounts = dict(self.amounts)
        return res

    def get(self, name: str) -> float:
        return self.amounts.get(name, 0.0)

    @property
    def milli_cpu(self) -> float:
        return self.amounts.get(CPU, 0.0)

    @property
    def memory(self) -> float:
        return self.amounts.get(MEMORY, 0.0)

    def names(self) -> Iterable[str]:
        return self.amounts.keys()

    def is_empty(self) -> bool:
        """True when no amount exceeds the tolerance (a best-effort request)."""
        return all(v < EPSILON for name, v in self.amounts.items() if name != PODS)

    def add(self, other: Resource) -> Resource:
        """In-place sum; returns self for chaining."""
        amounts = self.amounts
        for name, v in other.amounts.items():
            amounts[name] = amounts.get(name, 0.0) + v
        return self

    def sub(self, other: Resource) -> Resource:
        """In-place difference, clamped at zero as Volcano's accounting expects."""
        amounts = self.amounts
        for name, v in other.amounts.items():
            left = amounts.get(name, 0.0) - v
            amounts[name] = left if left > 0 else 0.0
        return self

    def multi(self, ratio: float) -> Resource:
        for name in self.amounts:
            self.amounts[name] *= ratio
        return self

    def __add__(self, other: Resource) -> Resource:
        return self.clone().add(other)

    def __sub__(self, other: Resource) -> Resource:
        return self.clone().sub(other)

    def less_equal(self, other: Resource, missing_is_infinite: bool = False) -> bool:
        """Every amount here is at most the one in ``other`` (within tolerance).

        ``missing_is_infinite`` treats a name absent from ``other`` as unlimited, which is how a
        queue capability without that resource behaves.
        """
        for name, v in self.amounts.items():
            if v < EPSILON:
                continue
            if name not in other.amounts:
                if missing_is_infinite:
                    continue
                return False
            if v > other.amounts[name] + EPSILON:
                return False
        return True

    def max_with(self, other: Resource) -> Resource:
        names = set(self.amounts) | set(other.amounts)
        return Resource({n: max(self.get(n), other.get(n)) for n in names})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resource):
            return NotImplemented
        names = set(self.amounts) | set(other.amounts)
        return all(abs(self.get(n) - other.get(n)) < EPSILON for n in names)

    def __repr__(self) -> str:
        return f"Resource({self.to_list()})"


class ResourceIndex:
    """Column numbers of resources in the per-node arrays of one snapshot.

    ``cpu``, ``memory`` and ``pods`` are always columns 0, 1 and 2; extended resources follow
    in the order first seen.
    """

    __slots__ = ("columns", "names")

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names: list[str] = [CPU, MEMORY, PODS]
        self.columns: dict[str, int] = {CPU: 0, MEMORY: 1, PODS: 2}
        for name in names:
            self.add(name)

    def add(self, name: str) -> int:
        column = self.columns.get(name)
        if column is None:
            column = self.columns[name] = len(self.names)
            self.names.append(name)
        return column

    def __len__(self) -> int:
        return len(self.names)

    def vector(self, resource: Resource, pods: float = 0.0) -> np.ndarray:
        """A row for ``resource``; every name must already be indexed (see ``add``)."""
        row = np.zeros(len(self.names))
        columns = self.columns
        for name, v in resource.amounts.items():
            row[columns[name]] = v
        if pods:
            row[2] = pods
        return row

    def resource(self, row: np.ndarray) -> Resource:
        return Resource({name: float(row[i]) for i, name in enumerate(self.names) if i < len(row)})

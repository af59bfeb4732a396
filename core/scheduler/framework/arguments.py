"""Typed access to a plugin's or action's ``arguments`` map from the configuration file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ArgumentError(ValueError):
    """An argument value of the wrong type; names the owner and the key."""


class Arguments:
    """Read arguments with Volcano's lenient typing (``"10"`` and ``10`` are both ints)."""

    def __init__(self, owner: str, values: Mapping[str, Any] | None = None) -> None:
        self.owner = owner
        self.values: dict[str, Any] = dict(values or {})

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def _fail(self, key: str, kind: str) -> ArgumentError:
        return ArgumentError(
            f"{self.owner}: argument {key!r} must be {kind}, got {self.values[key]!r}"
        )

    def get_int(self, key: str, default: int) -> int:
        if key not in self.values:
            return default
        value = self.values[key]
        try:
            return int(value)
        except (TypeError, ValueError):
            try:
                return int(float(value))
            except (TypeError, ValueError):
                raise self._fail(key, "an integer") from None

    def get_float(self, key: str, default: float) -> float:
        if key not in self.values:
            return default
        try:
            return float(self.values[key])
        except (TypeError, ValueError):
            raise self._fail(key, "a number") from None

    def get_bool(self, key: str, default: bool) -> bool:
        if key not in self.values:
            return default
        value = self.values[key]
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise self._fail(key, "true or false")

    def get_str(self, key: str, default: str) -> str:
        value = self.values.get(key, default)
        return str(value) if value is not None else default

"""Built-in plugins; importing this package registers them."""

from stromboli.core.scheduler.plugins import (
    binpack,
    conformance,
    drf,
    gang,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
)

__all__ = [
    "binpack",
    "conformance",
    "drf",
    "gang",
    "nodeorder",
    "overcommit",
    "predicates",
    "priority",
    "proportion",
]

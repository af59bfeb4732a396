"""Built-in plugins; importing this package registers them."""

from stromboli.core.scheduler.plugins import (
    conformance,
    drf,
    gang,
    overcommit,
    priority,
    proportion,
)

__all__ = ["conformance", "drf", "gang", "overcommit", "priority", "proportion"]

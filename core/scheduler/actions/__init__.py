"""Built-in actions; importing this package registers them."""

from stromboli.core.scheduler.actions import allocate, backfill, enqueue

__all__ = ["allocate", "backfill", "enqueue"]

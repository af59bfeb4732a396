"""Built-in actions; importing this package registers them."""

from stromboli.core.scheduler.actions import (
    allocate,
    backfill,
    enqueue,
    gangpreempt,
    gangreclaim,
    preempt,
    reclaim,
    shuffle,
)

__all__ = [
    "allocate",
    "backfill",
    "enqueue",
    "gangpreempt",
    "gangreclaim",
    "preempt",
    "reclaim",
    "shuffle",
]

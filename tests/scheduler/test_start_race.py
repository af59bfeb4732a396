"""The scheduler creates ``root`` and ``default`` at start; when the queue controller writes the
new queue's status first, the scheduler's own status write conflicts. That must not stop it."""

from __future__ import annotations

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import ConflictError
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler.conf import default_config
from stromboli.core.scheduler.scheduler import Scheduler


class RacedStore(MemoryStore):
    """A store where another writer always updates a queue between its create and our write."""

    async def update_status(self, obj: dict) -> dict:
        if obj.get("kind") == "Queue":
            raise ConflictError(
                f"Operation cannot be fulfilled on queues {obj['metadata']['name']!r}"
            )
        return await super().update_status(obj)


async def test_status_conflict_at_start_is_not_fatal() -> None:
    clock = VirtualClock()
    store = RacedStore(clock)
    scheduler = Scheduler(store, clock, default_config())
    await scheduler.start()
    queues = await store.list("scheduling.volcano.sh/v1beta1", "Queue")
    names = {q["metadata"]["name"] for q in queues.items}
    assert {"root", "default"} <= names

"""The scheduler's client pool leaves every binding in flight a connection of its own, beside
one per watch and the event workers: with HTTP/1.1 a request waits for a free connection, and
a pool shared that tightly held a live run's bindings below the rate pods were created at."""

from __future__ import annotations

from stromboli.core.eventbroadcast import EVENT_WORKERS
from stromboli.core.scheduler.cache import WATCHED_KINDS
from stromboli.core.scheduler.server import SchedulerOptions, scheduler_connections


def test_every_binding_in_flight_has_a_connection_beside_the_watches_and_events() -> None:
    for binds in (1, 64, 128, 500):
        options = SchedulerOptions(bind_concurrency=binds)
        others = len(WATCHED_KINDS) + EVENT_WORKERS
        assert scheduler_connections(options) >= binds + others


def test_bindings_in_flight_by_default_exceed_the_old_pool() -> None:
    # The old pool (64) was shared by 64 bindings, the watches and the event workers.
    assert SchedulerOptions().bind_concurrency >= 128

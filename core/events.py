"""Kubernetes Events, recorded through the cluster store as client-go's recorder records them.

Two of its rules, so that ``kubectl describe`` reads as under Volcano and an object that keeps
failing costs no API writes beyond what it tells:

- a repeat of the same (object, type, reason, message) from this component is one request: a
  merge PATCH of ``count`` and ``lastTimestamp`` on the event already written (as client-go's
  ``EventCorrelator`` does), not a new object nor a read-then-update; an event that is gone
  (the API server's event TTL) is created anew;
- a spam filter per source and object: a burst of 25 events, then one per 5 minutes (a token
  bucket, as client-go's ``EventSourceObjectSpamFilter``); events beyond it are dropped, not
  written.

``EventRecorder`` writes inline (the simulator and tests want events in the store when the
call returns); a long-running process uses
:class:`~stromboli.core.eventbroadcast.EventBroadcaster`, which writes in the background.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from stromboli.core.clock import Clock, format_time
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore

log = logging.getLogger(__name__)

#: client-go's spam filter: events an object may get at once, and the refill interval.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
#: Objects whose buckets (and events whose names) are remembered, as client-go's 4,096-entry
#: caches; the oldest go first, so a long-running process holds a bounded amount.
SPAM_OBJECTS = 4096

#: What makes two events repeats of one: (object uid or name, type, reason, message).
EventKey = tuple[str, str, str, str]


@dataclass(slots=True)
class Occurrence:
    """One event to write, standing for ``repeats`` records of it (the last at ``last``)."""

    involved: dict
    type: str
    reason: str
    message: str
    first: str
    last: str
    repeats: int = 1


@dataclass(slots=True)
class _Written:
    """Where an event key's object is, and the count the store has."""

    namespace: str
    name: str
    count: int


class SpamFilter:
    """A token bucket per object: ``SPAM_BURST`` tokens, one more every
    ``SPAM_REFILL_SECONDS``; an event is written only if it takes a token."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._buckets: dict[tuple[str, ...], tuple[float, float]] = {}

    def allow(self, key: tuple[str, ...]) -> bool:
        now = self.clock.now().timestamp()
        tokens, stamp = self._buckets.pop(key, (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - stamp) / SPAM_REFILL_SECONDS)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > SPAM_OBJECTS:
            del self._buckets[next(iter(self._buckets))]
        return allowed


class EventRecorder:
    def __init__(self, store: ClusterStore, clock: Clock, component: str) -> None:
        self.store = store
        self.clock = clock
        self.component = component
        self._seen: dict[EventKey, _Written] = {}
        self._serial = 0
        self.spam = SpamFilter(clock)
        #: Events dropped, by why (``spam``; the broadcaster adds ``backlog``).
        self.dropped_by: dict[str, int] = {}
        #: Called with the reason of each drop (a metric); a failing hook is logged.
        self.on_drop: Callable[[str], None] | None = None

    @property
    def dropped(self) -> int:
        """Events dropped for any reason (for tests and benchmarks)."""
        return sum(self.dropped_by.values())

    def _drop(self, why: str) -> None:
        self.dropped_by[why] = self.dropped_by.get(why, 0) + 1
        if self.on_drop is not None:
            try:
                self.on_drop(why)
            except Exception:  # a metric must never fail the work an event describes
                log.exception("counting a dropped event failed")

    def _name(self, involved: dict) -> str:
        """``<object>.<hex nanoseconds>`` as Kubernetes names events; a serial keeps names
        unique when the (virtual) clock has not moved."""
        self._serial += 1
        nanos = int(self.clock.now().timestamp() * 1e9) + self._serial
        return f"{involved.get('name', 'object')}.{nanos:x}"

    def admit(self, involved: dict, event_type: str, reason: str, message: str) -> EventKey | None:
        """The event's key if the spam filter lets it through, else None (counted)."""
        spam_key = (
            self.component,
            str(involved.get("apiVersion") or ""),
            str(involved.get("kind") or ""),
            involved.get("namespace") or "default",
            str(involved.get("name") or ""),
            str(involved.get("uid") or ""),
        )
        if not self.spam.allow(spam_key):
            self._drop("spam")
            return None
        return (str(involved.get("uid") or involved.get("name", "")), event_type, reason, message)

    async def record(self, involved: dict, event_type: str, reason: str, message: str) -> None:
        """Record an event about ``involved`` (an object reference); failures are logged,
        never raised: an event is never worth failing the work it describes."""
        key = self.admit(involved, event_type, reason, message)
        if key is None:
            return
        now = format_time(self.clock.now())
        await self.write(key, Occurrence(involved, event_type, reason, message, now, now))

    async def write(self, key: EventKey, event: Occurrence) -> None:
        """One request: a PATCH of the count when the key was written before, else a create."""
        try:
            seen = self._seen.get(key)
            if seen is not None:
                count = seen.count + event.repeats
                try:
                    await self.store.patch(
                        "v1",
                        "Event",
                        seen.name,
                        {"count": count, "lastTimestamp": event.last},
                        seen.namespace,
                    )
                    seen.count = count
                    return
                except NotFoundError:
                    del self._seen[key]  # expired (event TTL): a new object, as client-go
            namespace = event.involved.get("namespace") or "default"
            created = await self.store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": self._name(event.involved), "namespace": namespace},
                    "involvedObject": event.involved,
                    "type": event.type,
                    "reason": event.reason,
                    "message": event.message,
                    "source": {"component": self.component},
                    "reportingComponent": self.component,
                    "firstTimestamp": event.first,
                    "lastTimestamp": event.last,
                    "count": event.repeats,
                }
            )
            self._seen[key] = _Written(namespace, created["metadata"]["name"], event.repeats)
            if len(self._seen) > SPAM_OBJECTS:  # as client-go's LRU: forget the oldest
                del self._seen[next(iter(self._seen))]
        except ApiError as err:
            self._seen.pop(key, None)
            log.warning(
                "could not record event %s on %s: %s", event.reason, event.involved.get("name"), err
            )

"""Kubernetes Events, recorded through the cluster store as client-go's recorder records them.

Two of its rules, so that ``kubectl describe`` reads as under Volcano and an object that keeps
failing costs no API writes beyond what it tells:

- a repeat of the same (object, type, reason, message) bumps ``count`` and ``lastTimestamp``
  instead of creating a new object;
- a spam filter per source and object: a burst of 25 events, then one per 5 minutes (a token
  bucket, as client-go's ``EventSourceObjectSpamFilter``); events beyond it are dropped, not
  written.
"""

from __future__ import annotations

import logging

from stromboli.core.clock import Clock, format_time
from stromboli.core.cluster.errors import ApiError
from stromboli.core.cluster.store import ClusterStore

log = logging.getLogger(__name__)

#: client-go's spam filter: events an object may get at once, and the refill interval.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
#: Objects whose buckets (and events whose names) are remembered, as client-go's 4,096-entry
#: caches; the oldest go first, so a long-running process holds a bounded amount.
SPAM_OBJECTS = 4096


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
        self._seen: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        self._serial = 0
        self.spam = SpamFilter(clock)
        #: Events the spam filter dropped (for tests and benchmarks).
        self.dropped = 0

    def _name(self, involved: dict) -> str:
        """``<object>.<hex nanoseconds>`` as Kubernetes names events; a serial keeps names
        unique when the (virtual) clock has not moved."""
        self._serial += 1
        nanos = int(self.clock.now().timestamp() * 1e9) + self._serial
        return f"{involved.get('name', 'object')}.{nanos:x}"

    async def record(self, involved: dict, event_type: str, reason: str, message: str) -> None:
        """Record an event about ``involved`` (an object reference); failures are logged,
        never raised: an event is never worth failing the work it describes."""
        namespace = involved.get("namespace") or "default"
        spam_key = (
            self.component,
            str(involved.get("apiVersion") or ""),
            str(involved.get("kind") or ""),
            namespace,
            str(involved.get("name") or ""),
            str(involved.get("uid") or ""),
        )
        if not self.spam.allow(spam_key):
            self.dropped += 1
            return
        key = (involved.get("uid") or involved.get("name", ""), event_type, reason, message)
        now = format_time(self.clock.now())
        try:
            seen = self._seen.get(key)
            if seen is not None:
                event = await self.store.get("v1", "Event", seen[1], seen[0])
                event["count"] = int(event.get("count") or 1) + 1
                event["lastTimestamp"] = now
                await self.store.update(event)
                return
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": self._name(involved),
                    "namespace": namespace,
                },
                "involvedObject": involved,
                "type": event_type,
                "reason": reason,
                "message": message,
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            created = await self.store.create(event)
            self._seen[key] = (namespace, created["metadata"]["name"])
            if len(self._seen) > SPAM_OBJECTS:  # as client-go's LRU: forget the oldest
                del self._seen[next(iter(self._seen))]
        except ApiError as err:
            self._seen.pop(key, None)
            log.warning("could not record event %s on %s: %s", reason, involved.get("name"), err)

"""Kubernetes Events, recorded through the cluster store and aggregated like the API's
event recorder: a repeat of the same (object, type, reason, message) bumps ``count`` and
``lastTimestamp`` instead of creating a new object."""

from __future__ import annotations

import logging

from stromboli.core.clock import Clock, format_time
from stromboli.core.cluster.errors import ApiError
from stromboli.core.cluster.store import ClusterStore

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, store: ClusterStore, clock: Clock, component: str) -> None:
        self.store = store
        self.clock = clock
        self.component = component
        self._seen: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        self._serial = 0

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
        except ApiError as err:
            self._seen.pop(key, None)
            log.warning("could not record event %s on %s: %s", reason, involved.get("name"), err)

"""Objects a long-running process could not understand, set aside so that the rest goes on.

Anyone who may create a pod, a vcjob or a queue can store something our code cannot read (a
quantity out of range, a list where a mapping belongs). Such an object must never stop the
scheduler, the controller or the webhook, nor make them fail at every start: the place that
reads it reports it here and carries on without it. Each object is reported once per
resourceVersion: one log line, one count in ``stromboli_invalid_objects_total{kind}`` and a
Warning event ``InvalidObject`` on the object itself, naming the field, so that its owner sees
why nothing happens to it (``kubectl describe``). A corrected version is read again as usual.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from stromboli.core.logsafe import log_safe

log = logging.getLogger(__name__)

#: Reason of the Warning event on an object that was set aside.
REASON = "InvalidObject"
#: Versions remembered to report each once; older ones are forgotten first.
REMEMBERED = 10_000
#: Rejections waiting for their event; beyond this they are only logged and counted.
PENDING = 1_000
#: Longest message put in an event or a log line (a hostile object may hold huge strings).
MESSAGE_LIMIT = 1_024


class EventSink(Protocol):
    async def record(self, involved: dict, event_type: str, reason: str, message: str) -> None:
        """Record an event about the object ``involved`` refers to."""


class CounterLike(Protocol):
    def labels(self, *labels: str) -> Any:
        """The child of a labelled prometheus counter."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """One object version that was set aside, and why."""

    reference: dict
    message: str


def reference_of(obj: dict) -> dict:
    """The ``involvedObject`` reference of ``obj``, from whatever of its metadata is usable."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    reference = {
        "apiVersion": obj.get("apiVersion", "") if isinstance(obj, dict) else "",
        "kind": obj.get("kind", "") if isinstance(obj, dict) else "",
    }
    for key in ("namespace", "name", "uid", "resourceVersion"):
        value = meta.get(key)
        if isinstance(value, str) and value:
            reference[key] = value
    return reference


def _identity(kind: str, reference: dict) -> tuple[str, str, str, str]:
    return (
        kind,
        reference.get("namespace", ""),
        reference.get("name", ""),
        reference.get("uid", ""),
    )


class Quarantine:
    """Collects the objects one process set aside; ``publish`` turns them into events."""

    def __init__(self, component: str, counter: CounterLike | None = None) -> None:
        self.component = component
        self.counter = counter
        #: The version last reported of each object, by (kind, namespace, name, uid).
        self._reported: dict[tuple[str, str, str, str], str] = {}
        self._pending: list[Rejection] = []
        #: Rejections seen so far, by kind (what the metric counts).
        self.counts: dict[str, int] = {}

    def reject(self, obj: dict, error: BaseException, kind: str = "") -> bool:
        """Set ``obj`` aside because of ``error``; returns whether this version is new."""
        reference = reference_of(obj)
        kind = kind or reference.get("kind") or "unknown"
        reference.setdefault("kind", kind)
        identity = _identity(kind, reference)
        version = reference.get("resourceVersion", "")
        if identity in self._reported and self._reported[identity] == version:
            return False
        self._reported.pop(identity, None)  # re-inserted last: the newest are kept longest
        self._reported[identity] = version
        if len(self._reported) > REMEMBERED:
            del self._reported[next(iter(self._reported))]
        reason = str(error) or type(error).__name__
        if not isinstance(error, ValueError | TypeError):
            reason = f"{type(error).__name__}: {reason}"
        message = log_safe(
            f"{self.component} cannot read this {kind} and ignores it: {reason}", MESSAGE_LIMIT
        )
        where = "/".join(p for p in (reference.get("namespace"), reference.get("name")) if p)
        log.warning("%s %s set aside: %s", kind, log_safe(where or "(unnamed)", 256), message)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.counter is not None:
            self.counter.labels(kind).inc()
        if reference.get("name") and len(self._pending) < PENDING:
            self._pending.append(Rejection(reference, message))
        return True

    def forget(self, obj: dict, kind: str = "") -> None:
        """``obj`` was deleted: a new object of that name is reported afresh."""
        reference = reference_of(obj)
        self._reported.pop(_identity(kind or reference.get("kind") or "unknown", reference), None)

    def take(self) -> list[Rejection]:
        """The rejections not yet published, oldest first."""
        pending, self._pending = self._pending, []
        return pending

    async def publish(self, events: EventSink) -> int:
        """Post a Warning event for every rejection not yet published; returns how many."""
        pending = self.take()
        for rejection in pending:
            reference = {k: v for k, v in rejection.reference.items() if k != "resourceVersion"}
            await events.record(reference, "Warning", REASON, rejection.message)
        return len(pending)

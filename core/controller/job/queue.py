"""Queue state, as Volcano's queue controller keeps it: ``OpenQueue``/``CloseQueue`` Commands
and the ``Open``/``Closing``/``Closed``/``Unknown`` rules.

A queue closes at once when no PodGroup uses it, else it is ``Closing`` until the last one is
gone. Closing a queue closes its open children too, marking them
``volcano.sh/closed-by-parent: "true"``; opening the parent reopens exactly those; a child
cannot open while its parent is closed. :func:`decide` is the table; :class:`QueueStates`
applies it through the store, fed by the job controller's informer. With metrics it also
publishes how many PodGroups of each queue are in each phase (``volcano_queue_pod_group_*``),
as Volcano's queue controller does on every queue sync.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, QueueState
from stromboli.core.cluster.errors import ApiError, ConflictError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.metrics import ControllerMetrics
from stromboli.core.events import EventRecorder

log = logging.getLogger(__name__)
#: Reads and writes of a queue's state before a conflicting writer is given up on.
STATE_WRITE_ATTEMPTS = 5

CLOSED_STATES = frozenset({QueueState.CLOSED, QueueState.CLOSING})
"""States in which a queue takes no new work."""


@dataclass(frozen=True, slots=True)
class QueueDecision:
    """``op``: ``sync`` (just set the state), ``open`` (also reopen children closed by this
    queue; refused while the parent is closed) or ``close`` (also close open children)."""

    op: str
    state: str | None


def decide(state: str, action: str, has_podgroups: bool) -> QueueDecision:
    """The effect of ``action`` on a queue in ``state``; ``state`` None for an invalid one."""
    closed_or_closing = QueueState.CLOSING if has_podgroups else QueueState.CLOSED
    if state in ("", QueueState.OPEN):
        if action == Action.CLOSE_QUEUE:
            return QueueDecision("close", closed_or_closing)
        return QueueDecision("sync", QueueState.OPEN)
    if state == QueueState.CLOSED:
        if action == Action.OPEN_QUEUE:
            return QueueDecision("open", QueueState.OPEN)
        return QueueDecision("sync", QueueState.CLOSED)
    if state == QueueState.CLOSING:
        if action == Action.OPEN_QUEUE:
            return QueueDecision("open", QueueState.OPEN)
        return QueueDecision("sync", closed_or_closing)
    if state == QueueState.UNKNOWN:
        if action == Action.OPEN_QUEUE:
            return QueueDecision("open", QueueState.OPEN)
        if action == Action.CLOSE_QUEUE:
            return QueueDecision("close", closed_or_closing)
        return QueueDecision("sync", QueueState.UNKNOWN)
    return QueueDecision("sync", None)


def queue_ref(queue: Mapping[str, Any]) -> dict[str, Any]:
    meta = queue.get("metadata") or {}
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "Queue",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "namespace": "default",
    }


def state_of(queue: Mapping[str, Any]) -> str:
    return str((queue.get("status") or {}).get("state") or "")


def parent_of(queue: Mapping[str, Any]) -> str:
    name = (queue.get("metadata") or {}).get("name")
    if name == k.ROOT_QUEUE:
        return ""
    return str((queue.get("spec") or {}).get("parent") or k.ROOT_QUEUE)


class QueueStates:
    """Queue requests and the writes they lead to; see the module docstring.

    ``podgroups_in(queue)`` counts the PodGroups that use a queue (the job controller keeps
    that index from its PodGroup informer, and reports each PodGroup's phase through
    :meth:`podgroup_seen` for the metrics).
    """

    def __init__(
        self,
        store: ClusterStore,
        recorder: EventRecorder,
        podgroups_in: Callable[[str], int],
        *,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.store = store
        self.recorder = recorder
        self.podgroups_in = podgroups_in
        self.metrics = metrics
        #: (queue, phase) of each PodGroup, and PodGroups per queue per phase (metrics only).
        self._pg_phase: dict[tuple[str, str], tuple[str, str]] = {}
        self._phase_counts: dict[str, dict[str, int]] = {}
        self.queues: dict[str, dict[str, Any]] = {}
        self.requests: deque[tuple[str, str]] = deque()
        self.writes = 0

    # --- intake ------------------------------------------------------------------------------

    def seen(self, event_type: str, queue: dict[str, Any]) -> None:
        name = queue["metadata"]["name"]
        if event_type == "DELETED":
            self.queues.pop(name, None)
            if self.metrics is not None:
                self.metrics.forget_queue(name)
            return
        old = self.queues.get(name)
        if old is not None and not newer(queue, old):
            return  # an event older than what this controller itself wrote
        self.queues[name] = queue
        if old is None and self.metrics is not None:
            self._publish(name)
        if old is None or parent_of(old) != parent_of(queue) or state_of(old) != state_of(queue):
            self.enqueue(name, Action.SYNC_QUEUE)
            # Children follow their parent's state.
            if old is not None and state_of(old) != state_of(queue):
                for child, child_queue in self.queues.items():
                    if parent_of(child_queue) == name:
                        self.enqueue(child, Action.SYNC_QUEUE)

    def enqueue(self, name: str, action: str) -> None:
        item = (name, str(action))
        if item not in self.requests:
            self.requests.append(item)

    def podgroup_seen(self, key: tuple[str, str], queue: str, phase: str | None) -> None:
        """A PodGroup (namespace, name) now in ``queue`` and ``phase``; None once deleted.
        Publishes the changed queues' gauges; known queues only, so a deleted queue's series
        stay gone."""
        if self.metrics is None:
            return
        new = None if phase is None else (queue, phase.lower())
        old = self._pg_phase.get(key)
        if old == new:
            return
        if old is not None:
            counts = self._phase_counts[old[0]]
            counts[old[1]] -= 1
            if not counts[old[1]]:
                del counts[old[1]]
        if new is None:
            self._pg_phase.pop(key, None)
        else:
            self._pg_phase[key] = new
            counts = self._phase_counts.setdefault(new[0], {})
            counts[new[1]] = counts.get(new[1], 0) + 1
        for name in {pair[0] for pair in (old, new) if pair is not None}:
            if name in self.queues:
                self._publish(name)

    def _publish(self, name: str) -> None:
        assert self.metrics is not None
        self.metrics.set_queue_podgroups(name, self._phase_counts.get(name, {}))

    # --- processing --------------------------------------------------------------------------

    async def process(self) -> None:
        while self.requests:
            name, action = self.requests.popleft()
            queue = self.queues.get(name)
            if queue is None:
                continue
            await self._handle(queue, action)

    async def _handle(self, queue: dict[str, Any], action: str) -> None:
        name = queue["metadata"]["name"]
        state = state_of(queue)
        decision = decide(state, action, self.podgroups_in(name) > 0)
        if decision.state is None:
            log.warning("queue %s has an invalid state %r; nothing done", name, state)
            return
        if decision.op == "open" and state != QueueState.OPEN:
            parent = self.queues.get(parent_of(queue))
            if parent_of(queue) not in ("", k.ROOT_QUEUE) and (
                parent is None or state_of(parent) in CLOSED_STATES
            ):
                await self.recorder.record(
                    queue_ref(queue),
                    "Warning",
                    Action.OPEN_QUEUE,
                    f"Failed to open queue {name} because its parent queue {parent_of(queue)} "
                    "is closing or closed. Open the parent queue first.",
                )
                return
            for child, child_queue in self.queues.items():
                if parent_of(child_queue) == name and _closed_by_parent(child_queue):
                    self.enqueue(child, Action.OPEN_QUEUE)
        if decision.op == "close" and state not in CLOSED_STATES:
            if name == k.ROOT_QUEUE:
                log.warning("the root queue cannot be closed")
                return
            for child, child_queue in self.queues.items():
                if parent_of(child_queue) == name and state_of(child_queue) not in CLOSED_STATES:
                    await self._annotate(child_queue, "true")
                    self.enqueue(child, Action.CLOSE_QUEUE)
        changed = await self._set_state(queue, decision.state)
        if decision.op == "close" and changed:
            await self.recorder.record(
                queue_ref(queue), "Normal", Action.CLOSE_QUEUE, "Close queue succeed"
            )
        if decision.op == "open":
            await self._annotate(self.queues.get(name, queue), "false")
        if decision.op == "sync":
            await self._follow_parent(self.queues.get(name, queue))

    async def _follow_parent(self, queue: dict[str, Any]) -> None:
        """A child of a closing or closed parent closes (marked closed-by-parent); a child
        closed by its parent reopens when the parent is open."""
        parent = self.queues.get(parent_of(queue))
        if parent is None:
            return
        name = queue["metadata"]["name"]
        state = state_of(queue)
        if state_of(parent) in CLOSED_STATES and state not in CLOSED_STATES:
            await self._annotate(queue, "true")
            self.enqueue(name, Action.CLOSE_QUEUE)
        elif (
            state_of(parent) == QueueState.OPEN
            and state in CLOSED_STATES
            and _closed_by_parent(queue)
        ):
            self.enqueue(name, Action.OPEN_QUEUE)

    async def _set_state(self, queue: dict[str, Any], state: str) -> bool:
        if state_of(queue) == state:
            return False
        name = queue["metadata"]["name"]
        # The scheduler writes the same status (``allocated``) on its own cycle, a new queue's
        # at once: a conflict means "read again", not "give up".
        for _ in range(STATE_WRITE_ATTEMPTS):
            try:
                fresh = await self.store.get(k.SCHEDULING_V1BETA1, "Queue", name)
                # ``reservation`` is always present in Volcano's status (empty unless set).
                status = {"reservation": {}, **(fresh.get("status") or {}), "state": state}
                written = await self.store.update_status({**fresh, "status": status})
            except ConflictError:
                continue
            except NotFoundError:
                return False
            except ApiError as err:
                log.warning("could not set queue %s to %s: %s", name, state, err)
                return False
            self.writes += 1
            self.queues[name] = written
            return True
        log.warning("could not set queue %s to %s: it kept changing under us", name, state)
        return False

    async def _annotate(self, queue: dict[str, Any], value: str) -> None:
        annotations = (queue.get("metadata") or {}).get("annotations") or {}
        if annotations.get(k.CLOSED_BY_PARENT_KEY) == value:
            return
        name = queue["metadata"]["name"]
        try:
            written = await self.store.patch(
                k.SCHEDULING_V1BETA1,
                "Queue",
                name,
                {"metadata": {"annotations": {k.CLOSED_BY_PARENT_KEY: value}}},
            )
        except NotFoundError:
            return
        except ApiError as err:
            log.warning("could not annotate queue %s: %s", name, err)
            return
        self.writes += 1
        self.queues[name] = written


def newer(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether ``new`` is not older than ``old`` by resourceVersion (unordered versions, as a
    real API server may send, always count as newer)."""
    try:
        return int(new["metadata"]["resourceVersion"]) >= int(old["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return True


def _closed_by_parent(queue: Mapping[str, Any]) -> bool:
    annotations = (queue.get("metadata") or {}).get("annotations") or {}
    return annotations.get(k.CLOSED_BY_PARENT_KEY) == "true"

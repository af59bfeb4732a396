"""Writes a session's decisions to the cluster store: bindings, evictions, PodGroup and Queue
status, pod conditions and events.

PodGroups have no status subresource (as in Volcano), so they are updated whole, retrying on
conflict against the latest version. Everything is skipped when unchanged (the session already
compared), and a failure on one object never stops the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from stromboli.core.api import constants as k
from stromboli.core.clock import Clock, format_time
from stromboli.core.cluster.errors import ApiError, ConflictError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventRecorder
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.framework.outcome import Eviction
from stromboli.core.scheduler.status import PodCondition, StatusChanges, object_ref

log = logging.getLogger(__name__)
T = TypeVar("T")
CONFLICT_RETRIES = 5


@dataclass(slots=True)
class WriteReport:
    bound: list[TaskInfo] = field(default_factory=list)
    bind_failures: list[tuple[TaskInfo, str]] = field(default_factory=list)
    evicted: list[TaskInfo] = field(default_factory=list)
    #: Pods as they were after their annotations were written before binding, by uid.
    annotated: dict[str, dict] = field(default_factory=dict)


async def bounded(
    items: Iterable[T],
    work: Callable[[T], Awaitable[None]],
    limit: int,
    gate: asyncio.Semaphore | None = None,
) -> None:
    """Run ``work`` on every item with at most ``limit`` in flight (or as many as ``gate``,
    shared with other calls, lets through)."""
    gate = gate or asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with gate:
            await work(item)

    await asyncio.gather(*(one(item) for item in items))


def _set_condition(
    conditions: list[dict], kind: str, status: str, reason: str, message: str, now: str
) -> list[dict]:
    """Set the pod condition ``kind``; its transition time moves only when its status does."""
    for i, existing in enumerate(conditions):
        if existing.get("type") != kind:
            continue
        since = existing.get("lastTransitionTime") if existing.get("status") == status else None
        conditions[i] = {
            **existing,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since or now,
        }
        return conditions
    conditions.append(
        {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
        }
    )
    return conditions


def _queue_status(queue: dict, allocated: dict[str, str]) -> dict:
    """The queue's status with the new ``allocated``; ``reservation`` is always present (empty
    unless set), as Volcano's scheduler serialises it."""
    return {"reservation": {}, **(queue.get("status") or {}), "allocated": allocated}


def pod_ref(task: TaskInfo) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": task.name,
        "namespace": task.namespace,
        "uid": task.uid,
    }


class StatusWriter:
    def __init__(
        self, store: ClusterStore, clock: Clock, recorder: EventRecorder, concurrency: int = 16
    ) -> None:
        self.store = store
        self.clock = clock
        self.recorder = recorder
        self.concurrency = concurrency
        #: Bindings in flight, over every cycle: two cycles' bindings may be written at once
        #: (see ``Scheduler.start_binds``), and together they keep to ``concurrency``, the
        #: earlier cycle's first. One per event loop (a simulator may run several in turn).
        self._bind_gate: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def _binding_gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._bind_gate is None or self._bind_gate[0] is not loop:
            self._bind_gate = (loop, asyncio.Semaphore(self.concurrency))
        return self._bind_gate[1]

    async def bind(
        self,
        binds: list[tuple[TaskInfo, str]],
        report: WriteReport,
        annotations: Mapping[str, dict[str, str]] | None = None,
    ) -> None:
        """Bind each pod; a pod with ``annotations`` (by uid) gets them patched on first, so
        that whatever acts on the binding (a device plugin) already sees them."""

        async def one(item: tuple[TaskInfo, str]) -> None:
            task, node = item
            notes = (annotations or {}).get(task.uid)
            if notes:
                try:
                    report.annotated[task.uid] = await self.store.patch(
                        "v1", "Pod", task.name, {"metadata": {"annotations": notes}}, task.namespace
                    )
                except ApiError as err:
                    message = f"failed to write device annotations before binding: {err}"
                    report.bind_failures.append((task, message))
                    await self._pod_condition(
                        PodCondition(task.namespace, task.name, "SchedulerError", message)
                    )
                    return
            try:
                await self.store.bind(task.namespace, task.name, node, task.uid)
            except ApiError as err:
                message = f"failed to bind to node {node}: {err}"
                report.bind_failures.append((task, message))
                await self._pod_condition(
                    PodCondition(task.namespace, task.name, "SchedulerError", message)
                )
                return
            report.bound.append(task)
            await self.recorder.record(
                pod_ref(task),
                "Normal",
                "Scheduled",
                f"Successfully assigned {task.namespace}/{task.name} to {node}",
            )

        await bounded(binds, one, self.concurrency, self._binding_gate())

    async def evict(
        self,
        evictions: list[Eviction],
        report: WriteReport,
        jobs: Mapping[str, JobInfo] | None = None,
    ) -> None:
        """Evict pods as Volcano does: a ``Evict`` event on the pod, its ``Ready`` condition
        False (reason ``Evict``) and a ``DisruptionTarget`` condition written, then the pod
        deleted, and an ``Evict`` event on its PodGroup (``jobs`` names the PodGroups)."""

        async def one(eviction: Eviction) -> None:
            task = eviction.task
            message = f"Pod is evicted, because of {eviction.reason}"
            if not await self._mark_evicted(task, message):
                return
            try:
                await self.store.delete("v1", "Pod", task.name, task.namespace)
            except NotFoundError:
                return
            except ApiError as err:
                log.warning("could not evict %s/%s: %s", task.namespace, task.name, err)
                return
            report.evicted.append(task)
            job = (jobs or {}).get(task.job_id)
            if job is not None and not job.in_memory:
                await self.recorder.record(
                    object_ref(job.podgroup), "Normal", "Evict", eviction.reason
                )

        await bounded(evictions, one, self.concurrency)

    async def _mark_evicted(self, task: TaskInfo, message: str) -> bool:
        """Record the pod's ``Evict`` event and write its eviction conditions; False when the
        pod is gone, was re-created, or is being deleted already."""
        recorded = False
        for _ in range(CONFLICT_RETRIES):
            try:
                pod = await self.store.get("v1", "Pod", task.name, task.namespace)
                meta = pod.get("metadata") or {}
                if meta.get("uid") != task.uid or meta.get("deletionTimestamp"):
                    return False
                if not recorded:
                    await self.recorder.record(pod_ref(task), "Warning", "Evict", message)
                    recorded = True
                scheduler = (pod.get("spec") or {}).get("schedulerName") or k.DEFAULT_SCHEDULER_NAME
                status = pod.setdefault("status", {})
                now = format_time(self.clock.now())
                conditions = list(status.get("conditions") or ())
                conditions = _set_condition(conditions, "Ready", "False", "Evict", message, now)
                conditions = _set_condition(
                    conditions,
                    "DisruptionTarget",
                    "True",
                    "PreemptionByScheduler",
                    f"{scheduler}: preempting to accommodate a higher priority pod",
                    now,
                )
                status["conditions"] = conditions
                await self.store.update_status(pod)
                return True
            except ConflictError:
                continue
            except NotFoundError:
                return False
            except ApiError as err:
                log.warning("could not mark %s/%s evicted: %s", task.namespace, task.name, err)
                return True  # the conditions are a courtesy: evict all the same
        log.warning("gave up marking %s/%s evicted after conflicts", task.namespace, task.name)
        return True

    async def write(self, changes: StatusChanges) -> list[dict]:
        """Write the changes; returns the PodGroups and Queues as the store has them after
        their writes (for the cache, ahead of the watch)."""
        written: list[dict] = []

        async def podgroup(key: tuple[str, str]) -> None:
            namespace, name = key
            status = changes.podgroups.get(key)
            notes = changes.podgroup_annotations.get(key)

            def changed(pg: dict) -> dict:
                body = {**pg, "status": status} if status is not None else {**pg}
                if notes:
                    meta = body.get("metadata") or {}
                    annotations = {**(meta.get("annotations") or {}), **notes}
                    body["metadata"] = {**meta, "annotations": annotations}
                return body

            stored = await self._write_latest(
                f"PodGroup {namespace}/{name}",
                changes.podgroup_objects.get(key),
                lambda: self.store.get(k.SCHEDULING_V1BETA1, "PodGroup", name, namespace),
                lambda pg: self.store.update(changed(pg)),
            )
            if stored is not None:
                written.append(stored)

        async def queue(item: tuple[str, dict[str, str]]) -> None:
            name, allocated = item
            stored = await self._write_latest(
                f"Queue {name}",
                changes.queue_objects.get(name),
                lambda: self.store.get(k.SCHEDULING_V1BETA1, "Queue", name),
                lambda q: self.store.update_status({**q, "status": _queue_status(q, allocated)}),
            )
            if stored is not None:
                written.append(stored)

        keys = list(changes.podgroups) + [
            key for key in changes.podgroup_annotations if key not in changes.podgroups
        ]
        await bounded(keys, podgroup, self.concurrency)
        await bounded(changes.queues.items(), queue, self.concurrency)
        await bounded(changes.pod_conditions, self._pod_condition_with_event, self.concurrency)
        for event in changes.events:
            await self.recorder.record(event.involved, event.type, event.reason, event.message)
        return written

    async def _write_latest(
        self,
        what: str,
        cached: dict | None,
        fetch: Callable[[], Awaitable[dict]],
        put: Callable[[dict], Awaitable[dict]],
    ) -> dict | None:
        """Write against the cached object first (one request when it is current), then
        against a fresh read after each conflict; returns what the store answered, or None.
        A vanished object is not an error."""
        current = cached
        for _ in range(CONFLICT_RETRIES):
            try:
                if current is None:
                    current = await fetch()
                return await put(current)
            except ConflictError:
                current = None
            except NotFoundError:
                return None
            except ApiError as err:
                log.warning("could not update %s: %s", what, err)
                return None
        log.warning("gave up updating %s after conflicts", what)
        return None

    async def _pod_condition(self, condition: PodCondition) -> None:
        now = format_time(self.clock.now())

        def with_condition(pod: dict) -> dict:
            status = dict(pod.get("status") or {})
            conditions = [
                c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": condition.reason,
                    "message": condition.message,
                    "lastTransitionTime": now,
                }
            )
            status["conditions"] = conditions
            if condition.nominated_node:
                status["nominatedNodeName"] = condition.nominated_node
            else:
                status.pop("nominatedNodeName", None)
            return {**pod, "status": status}

        await self._write_latest(
            f"pod {condition.namespace}/{condition.name}",
            condition.pod,
            lambda: self.store.get("v1", "Pod", condition.name, condition.namespace),
            lambda pod: self.store.update_status(with_condition(pod)),
        )

    async def _pod_condition_with_event(self, condition: PodCondition) -> None:
        await self._pod_condition(condition)
        # Volcano records the event with every condition change, "Schedulable" ones included.
        ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": condition.name,
            "namespace": condition.namespace,
        }
        await self.recorder.record(ref, "Warning", "FailedScheduling", condition.message)

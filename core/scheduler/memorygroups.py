"""Keeping in-memory groups (``--plain-pod-groups=memory``) out of the cluster's writes.

A session treats a plain pod's in-memory group as any PodGroup, so the status it computes
for one is folded back into the cache instead of written, and the events it would post on the
group are dropped (no such object exists); the pod's own condition and events stay. A plain
pod then costs what it costs under kube-scheduler: its binding and its event.
"""

from __future__ import annotations

from collections.abc import Iterable

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.status import StatusChanges


def keep_in_memory(changes: StatusChanges, jobs: Iterable[JobInfo], cache: SchedulerCache) -> None:
    """Move the PodGroup status and annotations of in-memory groups from ``changes`` into
    ``cache``, and drop the events whose object is one of them (``jobs``: those closed)."""
    memory = {(job.namespace, job.name): job.uid for job in jobs if job.in_memory}
    if not memory:
        return
    for key, job_id in memory.items():
        status = changes.podgroups.pop(key, None)
        notes = changes.podgroup_annotations.pop(key, None)
        changes.podgroup_objects.pop(key, None)
        if status is not None or notes:
            cache.keep_in_memory(job_id, status, notes)
    changes.events = [
        event
        for event in changes.events
        if event.involved.get("kind") != "PodGroup"
        or (event.involved.get("namespace", ""), event.involved.get("name", "")) not in memory
    ]

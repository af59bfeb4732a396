"""What lets a cycle's writes run while the next cycle decides: the cache holds each binding
from the moment it is decided (so the next snapshot neither places the pod again nor gives its
room away), lets go of one the API server refused (the pod is pending again in the following
snapshot), and learns the PodGroup statuses written (so the next cycle compares against what it
wrote, not against what its snapshot saw before, and writes nothing twice); Queues' statuses
likewise.

kube-scheduler does the same with its *assume* step: a pod is assumed on its node when the
decision is made, and forgotten if the binding fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.framework.closing import close_set
from stromboli.core.scheduler.framework.session import Session

_POD = ("v1", "Pod")
_PODGROUP = (k.SCHEDULING_V1BETA1, "PodGroup")
_QUEUE = (k.SCHEDULING_V1BETA1, "Queue")


def _version(obj: dict | None) -> int | None:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


def newer(candidate: dict, current: dict | None) -> bool:
    """Whether ``candidate`` is a later version of the object than ``current`` (resource
    versions compared as numbers, as both backends issue them; unknown: not newer)."""
    if current is None:
        return False
    seen, new = _version(current), _version(candidate)
    if seen is None or new is None:
        return False
    same = (candidate.get("metadata") or {}).get("uid") == (current.get("metadata") or {}).get(
        "uid"
    )
    return same and new > seen


def reserve(
    cache: SchedulerCache,
    binds: Iterable[tuple[TaskInfo, str]],
    annotations: Mapping[str, dict[str, str]],
) -> None:
    """Hold every decided binding in the cache before it is written; a pod with annotations to
    write (device ids) is held with them, so that its devices count as taken too."""
    for task, node in binds:
        notes = annotations.get(task.uid)
        pod = None
        if notes:
            meta = task.pod.get("metadata") or {}
            merged = {**(meta.get("annotations") or {}), **notes}
            pod = {**task.pod, "metadata": {**meta, "annotations": merged}}
        cache.assume_bound(task, node, pod)


def release(cache: SchedulerCache, task: TaskInfo) -> None:
    """Let go of a held binding the API server refused: the pod is pending again, unless the
    watch has shown it placed meanwhile (then the cache already knows better)."""
    if cache.assumed.pop(task.uid, None) is None:
        return
    record = cache.pods.get(task.uid)
    if record is None:
        return
    held = record.task.pod
    if _version(held) == _version(task.pod):
        # No newer version came meanwhile: the pod as decided on, without the node (and the
        # device annotations) the cache was given to hold it.
        cache.apply(_POD, "MODIFIED", task.pod)
        return
    spec = {key: value for key, value in (held.get("spec") or {}).items() if key != "nodeName"}
    cache.apply(_POD, "MODIFIED", {**held, "spec": spec})


def remember_written(cache: SchedulerCache, written: Iterable[dict]) -> None:
    """Fold the PodGroups and Queues just written into the cache ahead of their watch events
    (which then change nothing); a version the watch has already overtaken is left alone."""
    for obj in written:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Queue":
            info = cache.queues.get(str(meta.get("name")))
            if info is not None and newer(obj, info.queue):
                cache.apply(_QUEUE, "MODIFIED", obj)
            continue
        entry = cache.jobs.get(f"{meta.get('namespace', 'default')}/{meta.get('name')}")
        if entry is not None and not entry.in_memory and newer(obj, entry.podgroup):
            cache.apply(_PODGROUP, "MODIFIED", obj)


def refresh_stored(ssn: Session, cache: SchedulerCache) -> None:
    """Point each job the session closes (see ``settled.py``) and each queue at its PodGroup
    or Queue as the cache knows it now, where that is newer than the snapshot's (a write of the
    previous cycle landed meanwhile), so that statuses are compared with what is stored. A
    group the session enqueued that is stored past Pending now was enqueued by that write: its
    phase is compared as stored."""
    for name, info in list(ssn.queues.items()):
        latest = cache.queues.get(name)
        if latest is not None and newer(latest.queue, info.queue):
            ssn.queues[name] = latest
    # Only the jobs the session closes: one whose group the cache has newer is among them
    # (the cache noted the change; see settled.py).
    for job in close_set(ssn.jobs, ssn.closing).jobs:
        entry = cache.jobs.get(job.uid)
        current = entry.podgroup if entry is not None and not entry.in_memory else None
        if current is not None and newer(current, job.podgroup):
            job.podgroup = current
            if job.phase != "Pending":
                ssn.enqueued.discard(job.uid)

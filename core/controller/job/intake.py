"""Intake of the vcjob controller: watch events fold into the caches and become requests
about a job, as Volcano's handlers make them (``PodFailed`` with the exit code,
``TaskCompleted``, ``PodEvicted``, a Command's action, ...).

A change this controller made itself (a pod it deleted, a status it wrote) is not taken for
news: the caches compare resourceVersions and remember the pods they deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, Event, JobEventReason
from stromboli.core.api.keys import object_key
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.controller.job.base import (
    COMMAND,
    JobKey,
    job_phase,
    owner_job,
    pg_phase,
    rv_newer,
    task_of,
)
from stromboli.core.controller.job.policies import (
    Request,
    is_out_of_sync,
    pod_update_event,
    task_completed,
    task_failed,
)
from stromboli.core.controller.job.queue import newer
from stromboli.core.controller.job.timers import JobTimers


class JobIntake(JobTimers):
    """Jobs, pods, PodGroups, Commands, Queues and PriorityClasses into caches and requests."""

    def _seen_job(self, event_type: str, job: dict[str, Any]) -> None:
        key = object_key(job)
        if event_type == "DELETED":
            cached = self.jobs.get(key)
            if cached is not None and cached["metadata"].get("uid") != job["metadata"].get("uid"):
                return  # an older job of the same name
            self.jobs.pop(key, None)
            self.pods.pop(key, None)
            self._lanes.forget(key)
            self._pending_reported.pop(key, None)
            self._looked_ahead.discard(key)
            if self.metrics is not None:
                queue = str((job.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE)
                self.metrics.forget_job(key[0], key[1], queue)
            self._delayed.pop(key, None)
            self._parsed.pop(job["metadata"].get("uid", ""), None)
            return
        old = self.jobs.get(key)
        if not rv_newer(job, old):
            return
        self.jobs[key] = job
        self._schedule_ttl(job)
        if old is not None and old["metadata"].get("uid") == job["metadata"].get("uid"):
            same_spec = old.get("spec") == job.get("spec")
            if same_spec and job_phase(old) == job_phase(job):
                return
            if same_spec and self._status_writing.get(key) == job.get("status"):
                return  # the echo of the status being written: its writer decides what follows
        self._mark(Request(key[0], key[1], event=Event.OUT_OF_SYNC))

    def _cache_job(self, job: dict[str, Any]) -> None:
        key = object_key(job)
        if rv_newer(job, self.jobs.get(key)):
            self.jobs[key] = job
            self._schedule_ttl(job)

    def _pod_request(self, pod: Mapping[str, Any], event: str, code: int = 0) -> Request | None:
        owner = owner_job(pod)
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        job_name = annotations.get(k.JOB_NAME_KEY)
        task = annotations.get(k.TASK_SPEC_KEY)
        version = annotations.get(k.JOB_VERSION_KEY)
        if owner is None or not job_name or task is None or version is None:
            return None
        try:
            job_version = int(version)
        except ValueError:
            return None
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        return Request(
            namespace=str(meta.get("namespace") or "default"),
            job_name=str(job_name),
            event=event,
            job_uid=str(owner.get("uid") or ""),
            task_name=str(task),
            pod_name=str(meta.get("name")),
            pod_uid=str(meta.get("uid") or ""),
            partition_id=str(labels.get(k.PARTITION_ID_KEY) or ""),
            exit_code=code,
            job_version=job_version,
        )

    def _seen_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        request = self._pod_request(pod, "")
        if request is None:
            return
        key = request.job_key
        name = request.pod_name
        pods = self.pods.setdefault(key, {})
        old = pods.get(name)
        uid = pod["metadata"].get("uid")
        if event_type == "DELETED":
            self._deleted.discard(uid)
            if old is not None and old["metadata"].get("uid") != uid:
                return  # the pod was already replaced by a new one of the same name
            known = pods.pop(name, None) is not None
            event = Event.POD_EVICTED if known and not is_out_of_sync(pod) else Event.OUT_OF_SYNC
            self._mark(_with(request, event))
            return
        if uid in self._deleted:
            return  # a change made before this controller deleted it
        if old is not None and old["metadata"].get("uid") == uid and not newer(pod, old):
            return
        pods[name] = pod
        if (
            event_type == "ADDED"
            or old is None
            or old["metadata"].get("uid") != pod["metadata"].get("uid")
        ):
            event = Event.OUT_OF_SYNC if is_out_of_sync(pod) else Event.POD_PENDING
            self._mark(_with(request, event))
            return
        if old.get("metadata", {}).get("resourceVersion") == pod["metadata"].get("resourceVersion"):
            return
        replicas, max_retry = self._task_limits(key, request.task_name)

        def task_pods() -> list[dict[str, Any]]:
            return [p for p in pods.values() if task_of(p) == request.task_name]

        update_event, code = pod_update_event(
            old,
            pod,
            completed=lambda: task_completed(task_pods(), replicas),
            failed=lambda: task_failed(task_pods(), replicas, max_retry),
        )
        self._mark(_with(request, update_event, code))

    def _task_limits(self, key: JobKey, task_name: str) -> tuple[int, int]:
        job = self.jobs.get(key)
        for task in ((job or {}).get("spec") or {}).get("tasks") or ():
            if isinstance(task, Mapping) and task.get("name") == task_name:
                return int(task.get("replicas") or 0), int(task.get("maxRetry") or 0)
        return 0, 0

    def _seen_podgroup(self, event_type: str, pg: dict[str, Any]) -> None:
        key = object_key(pg)
        old = self.podgroups.get(key)
        queue = str((pg.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE)
        if event_type == "DELETED":
            if old is not None and old["metadata"].get("uid") != pg["metadata"].get("uid"):
                return  # already replaced by a new group of the same name
            self.podgroups.pop(key, None)
            self._forget_pg_queue(key)
            self.queues.podgroup_seen(key, queue, None)
            self.queues.enqueue(queue, Action.SYNC_QUEUE)
            return
        if not rv_newer(pg, old):
            return
        self.podgroups[key] = pg
        self.queues.podgroup_seen(key, queue, pg_phase(pg))
        if key not in self._queue_of_pg:
            self._queue_of_pg[key] = queue
            self._pgs_per_queue[queue] = self._pgs_per_queue.get(queue, 0) + 1
            self.queues.enqueue(queue, Action.SYNC_QUEUE)
        if old is None:
            return
        phase = pg_phase(pg)
        if phase == pg_phase(old):
            return
        self.queues.enqueue(queue, Action.SYNC_QUEUE)
        owner = owner_job(pg)
        job_name = str(owner.get("name")) if owner else key[1]
        event = Event.UNKNOWN if phase == k.PodGroupPhase.UNKNOWN else ""
        self._mark(Request(key[0], job_name, event=event))

    def _forget_pg_queue(self, key: JobKey) -> None:
        queue = self._queue_of_pg.pop(key, None)
        if queue is not None:
            left = self._pgs_per_queue.get(queue, 0) - 1
            if left > 0:
                self._pgs_per_queue[queue] = left
            else:
                self._pgs_per_queue.pop(queue, None)

    # --- Commands ----------------------------------------------------------------------------

    async def _consume_command(self, command: Mapping[str, Any]) -> None:
        """Delete the Command (so it runs at most once), then act on its target."""
        target = command.get("target") or {}
        kind = target.get("kind")
        if kind not in ("Job", "Queue"):
            return
        meta = command.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        try:
            await self.store.delete(*COMMAND, str(meta.get("name")), namespace)
        except NotFoundError:
            return  # consumed already
        self.writes += 1
        action = str(command.get("action") or "")
        name = str(target.get("name") or "")
        if kind == "Queue":
            self.queues.enqueue(name, action)
            return
        job = self.jobs.get((namespace, name))
        if job is not None:
            await self._event(
                job,
                "Normal",
                JobEventReason.COMMAND_ISSUED,
                f"Start to execute command {action}, and clean it up to make sure executed not "
                "more than once.",
            )
        self._mark(Request(namespace, name, event=Event.COMMAND_ISSUED, action=action))


# --- small helpers ---------------------------------------------------------------------------


def _with(request: Request, event: str, code: int = 0) -> Request:
    return Request(
        namespace=request.namespace,
        job_name=request.job_name,
        event=event,
        job_uid=request.job_uid,
        task_name=request.task_name,
        pod_name=request.pod_name,
        pod_uid=request.pod_uid,
        partition_id=request.partition_id,
        exit_code=code,
        job_version=request.job_version,
    )

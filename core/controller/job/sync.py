"""One action on one vcjob, as :mod:`.state` plans it for the job's phase.

A sync writes the status, makes the plugin objects, PVCs and the PodGroup and, once the
scheduler has admitted the PodGroup (phase past ``Pending``), the missing pods. A kill deletes
pods (all but the retained phases, or the targets of a RestartTask/Pod/Partition); a full kill
also bumps ``status.version`` (the pods of the past are stale) and deletes the plugin objects
and the PodGroup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, Event, JobEventReason, JobPhase, PodPhase
from stromboli.core.api.keys import object_key
from stromboli.core.clock import format_time
from stromboli.core.cluster.writes import put_status
from stromboli.core.controller.job import build
from stromboli.core.controller.job.base import (
    FINISHED,
    INVALID_SPEC_REASON,
    JOB,
    Parsed,
    SyncFailure,
    pg_phase,
    task_of,
)
from stromboli.core.controller.job.plugins import JobPlugin, JobPluginError
from stromboli.core.controller.job.policies import (
    Request,
    Resolution,
    is_out_of_sync,
    pod_phase,
)
from stromboli.core.controller.job.resources import JobResources
from stromboli.core.controller.job.spec import JobSpecError, JobView, TaskView, parse_job
from stromboli.core.controller.job.state import Op, plan, retained_phases
from stromboli.core.controller.job.status import JobStatus, PodCounts, go_duration


class JobSync(JobResources):
    """Parse a job, and sync or kill it."""

    # --- parsing -----------------------------------------------------------------------------

    def _parse(self, job: Mapping[str, Any]) -> Parsed:
        meta = job["metadata"]
        uid = str(meta.get("uid") or "")
        generation = int(meta.get("generation") or 0)
        cached = self._parsed.get(uid)
        if cached is not None and cached.generation == generation:
            return cached
        try:
            view = parse_job(job)
        except JobSpecError as error:
            parsed = Parsed(generation, None, error)
        else:
            parsed = Parsed(generation, view, None)
            plugins: list[JobPlugin] = []
            for name, arguments in view.plugins.items():
                cls = self.plugin_table.get(name) if name in self.plugin_table else None
                if cls is None:
                    parsed.plugin_error = f"unable to find job plugin: {name}"
                    break
                try:
                    plugins.append(cls(arguments, job))
                except (JobPluginError, ValueError) as err:
                    parsed.plugin_error = f"plugin {name}: {err}"
                    break
            parsed.plugins = plugins
        self._parsed[uid] = parsed
        return parsed

    async def _report_invalid(self, job: dict[str, Any], error: JobSpecError) -> None:
        """A job whose spec cannot be acted on: an Event and a status message naming the
        field; the job stays where it is until its spec is fixed."""
        message = f"invalid job spec: {error}"
        await self._event(job, "Warning", INVALID_SPEC_REASON, message)
        status = JobStatus.from_dict(job.get("status"))
        if not status.phase:
            status.phase = JobPhase.PENDING
            self._transition(job, status)
        status.reason = INVALID_SPEC_REASON
        status.message = message
        await self._write_status(job, status)

    # --- sync --------------------------------------------------------------------------------

    async def _sync_job(
        self,
        job: dict[str, Any],
        parsed: Parsed,
        status: JobStatus,
        update: Callable[[JobStatus, Any], bool] | None,
    ) -> None:
        view = parsed.view
        assert view is not None
        queue = self.queues.queues.get(view.queue)
        if queue is None:
            raise SyncFailure(f"queue {view.queue} of job {view.name} not found")
        forwarding = bool((queue.get("spec") or {}).get("extendClusters"))
        if forwarding:
            job = await self._mark_forwarding(job)
        if status.reason == INVALID_SPEC_REASON:
            status.reason = ""
            status.message = ""
        if status.phase in ("", JobPhase.PENDING):
            job, parsed, status = await self._initiate(job, parsed, status)
            view = parsed.view
            assert view is not None
        else:
            await self._ensure_plugin_objects(job, parsed, status)
        await self._ensure_podgroup(job, view)

        pg = self._podgroup_of(view)
        admitted = pg is not None and pg_phase(pg) not in ("", k.PodGroupPhase.PENDING)
        if pg is not None:
            await self._podgroup_event(job, view, pg)
        if not admitted:
            new = status.copy()
            if update is not None and update(new, view.facts):
                self._transition(job, new)
                if await self._finish(job, parsed, status.phase, new):
                    return
            await self._write_status(job, new)
            return

        pods = self.pods.setdefault(view.key, {})
        counts = PodCounts()
        terminating = 0
        to_create: list[tuple[TaskView, list[int]]] = []
        to_delete: list[dict[str, Any]] = []
        by_task: dict[str, dict[str, dict[str, Any]]] = {}
        for existing in pods.values():
            by_task.setdefault(task_of(existing) or "", {})[existing["metadata"]["name"]] = existing
        for task in view.tasks:
            task_pods = dict(by_task.get(task.name, {}))
            missing: list[int] = []
            for index in range(task.replicas):
                pod = task_pods.pop(build.pod_name(view.name, task.name, index), None)
                if pod is None:
                    missing.append(index)
                    continue
                if pod["metadata"].get("deletionTimestamp"):
                    terminating += 1
                    continue
                if is_out_of_sync(pod):
                    to_delete.append(pod)
                counts.add(task.name, pod_phase(pod))
            if missing:
                to_create.append((task, missing))
            to_delete.extend(task_pods.values())  # beyond the replicas: scaled down

        errors: list[str] = []
        creating = [
            (task, index)
            for task, indices in to_create
            if not (task.depends_on and not self._dependencies_ready(view, task))
            for index in indices
        ]
        results = await asyncio.gather(
            *(self._create_pod(job, parsed, t, i, status, forwarding) for t, i in creating)
        )
        for (task, _index), (created, error) in zip(creating, results, strict=True):
            if error:
                errors.append(error)
            elif created is not None:
                counts.add(task.name, pod_phase(created))
        if errors:
            await self._event(
                job, "Warning", JobEventReason.FAILED_CREATE, f"Error creating pods: {errors}"
            )
            raise SyncFailure(f"failed to create {len(errors)} pods")
        terminating += await self._delete_pods(job, view, to_delete, mark_out_of_sync=False)

        new = status.copy()
        new.set_counts(counts)
        new.terminating = terminating
        new.min_available = view.min_available
        if update is not None and update(new, view.facts):
            self._transition(job, new)
            if await self._finish(job, parsed, status.phase, new):
                return
        await self._write_status(job, new)

    async def _initiate(
        self, job: dict[str, Any], parsed: Parsed, status: JobStatus
    ) -> tuple[dict[str, Any], Parsed, JobStatus]:
        """First syncs (phase "" or Pending): status, plugin objects, PVCs."""
        view = parsed.view
        assert view is not None
        if not status.phase:
            status.phase = JobPhase.PENDING
            self._transition(job, status)
        if not status.min_available:
            status.min_available = view.min_available
        job = await self._write_status(job, status)
        await self._ensure_plugin_objects(job, parsed, status)
        job = await self._ensure_volumes(job, view, status)
        parsed = self._parse(job)
        if parsed.view is None:
            assert parsed.error is not None
            raise SyncFailure(str(parsed.error))
        return job, parsed, status

    async def _mark_forwarding(self, job: dict[str, Any]) -> dict[str, Any]:
        annotations = job["metadata"].get("annotations") or {}
        if annotations.get(k.JOB_FORWARDING_KEY) == "true":
            return job
        ns, name = object_key(job)
        written = await self.store.patch(
            *JOB,
            name,
            {"metadata": {"annotations": {k.JOB_FORWARDING_KEY: "true"}}},
            namespace=ns,
        )
        self.writes += 1
        self._cache_job(written)
        return written

    def _dependencies_ready(self, view: JobView, task: TaskView) -> bool:
        """``dependsOn``: all named tasks ready, or any one with ``iteration: any``."""
        ready = (self._task_ready(view, name) for name in task.depends_on)
        if len(task.depends_on) > 1 and task.depends_on_any:
            return any(ready)
        return all(ready)

    def _task_ready(self, view: JobView, name: str) -> bool:
        """A task is ready when at least its minAvailable pods are running with every
        container ready, or have succeeded."""
        task = view.task(name)
        if task is None:
            return True
        pods = self.pods.get(view.key, {})
        ready = 0
        for index in range(task.replicas):
            pod = pods.get(build.pod_name(view.name, name, index))
            if pod is None:
                continue
            ready += _ready(pod)
        return task.min_available is None or ready >= task.min_available

    # --- kill --------------------------------------------------------------------------------

    async def _kill_job(
        self,
        job: dict[str, Any],
        parsed: Parsed,
        status: JobStatus,
        retain: frozenset[str],
        target: Resolution | None,
        update: Callable[[JobStatus, Any], bool] | None,
        *,
        look_again: bool = True,
    ) -> None:
        """Delete the pods (of ``target``, or all but the ``retain`` phases and a version
        bump), apply ``update``; ``look_again=False``: the status write is the last step of
        the phase change it records (see :meth:`_write_status`)."""
        view = parsed.view
        assert view is not None
        pods = list(self.pods.get(view.key, {}).values())
        victims: list[dict[str, Any]] = []
        counts = PodCounts()
        terminating = 0
        victim_names: set[str] = set()
        keep = retained_phases(retain, status.retry_count, view.max_retry)
        if target is not None:
            chosen = _targeted(pods, target)
            if chosen is None:
                return  # no such partition: nothing to restart
            victim_names = {p["metadata"]["name"] for p in chosen}
        else:
            status.version += 1  # only a full kill makes the pods of the past stale
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                terminating += 1
                continue
            if target is not None:
                kill = pod["metadata"]["name"] in victim_names
            else:
                kill = pod_phase(pod) not in keep
            if kill:
                victims.append(pod)
            else:
                counts.add(task_of(pod), pod_phase(pod))
        terminating += await self._delete_pods(job, view, victims, mark_out_of_sync=True)
        new = status.copy()
        new.set_counts(counts)
        new.terminating = terminating
        if update is not None and update(new, view.facts):
            self._transition(job, new)
            if await self._finish(job, parsed, status.phase, new):
                return
        elif new.last_transition_time:
            new.running_duration = go_duration(self._since_created(job, new.last_transition_time))
        if target is None:
            await self._delete_plugin_objects(job, parsed, new)
        await self._write_status(job, new, look_again=look_again)
        if target is None:
            await self._delete_podgroups(view)

    async def _finish(
        self, job: dict[str, Any], parsed: Parsed, old_phase: str, new: JobStatus
    ) -> bool:
        """A job that ``new`` moves into a finished phase: do now, in place of writing
        ``new``, what the next look at the job would do (the kill every action on a finished
        job is: its version bump, its PodGroup deleted), so that the status is written once,
        as that kill leaves it; True when done. Volcano writes the finished phase, sees it in
        its watch and kills: the same objects at the end, one status write more."""
        follow = plan(new.phase, Action.SYNC_JOB)
        if (
            not self.finish_in_one_write
            or new.phase not in FINISHED
            or new.phase == old_phase
            or follow.op is not Op.KILL_JOB
            or follow.update is not None
        ):
            return False
        view = parsed.view
        assert view is not None
        keep = retained_phases(follow.retain, new.retry_count, view.max_retry)
        for pod in self.pods.get(view.key, {}).values():
            if not pod["metadata"].get("deletionTimestamp") and pod_phase(pod) not in keep:
                # That kill deletes pods: the requests their deletion brings would meet the
                # job in another order than Volcano's, so the kill follows on the next look.
                return False
        await self._kill_job(job, parsed, new, follow.retain, None, None, look_again=False)
        # The look that the phase change asks for is queued as Volcano's watch would queue
        # it, so that the same requests coalesce into it; it was taken already.
        key = object_key(job)
        self._looked_ahead.add(key)
        self._mark(Request(key[0], key[1], event=Event.OUT_OF_SYNC))
        return True

    # --- status ------------------------------------------------------------------------------

    def _transition(self, job: Mapping[str, Any], status: JobStatus) -> None:
        now = format_time(self.clock.now())
        status.transition(now, "", self._since_created(job, now))

    async def _write_status(
        self, job: dict[str, Any], status: JobStatus, *, look_again: bool = True
    ) -> dict[str, Any]:
        """Write ``status`` unless it is what the job already has; returns the job. A phase
        change makes the job looked at again (as its watch event would), unless
        ``look_again`` is False: the caller did already what that look would do."""
        old = JobStatus.from_dict(job.get("status"))
        wanted = status.to_dict()
        if wanted == old.to_dict():
            return job
        key = object_key(job)
        self._status_writing[key] = wanted
        try:
            written = await put_status(self.store, job, lambda _current: wanted)
        finally:
            self._status_writing.pop(key, None)
        if written is None:
            return job
        self.writes += 1
        self._cache_job(written)
        if status.phase != old.phase:
            if self.metrics is not None:
                queue = str((job.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE)
                self.metrics.job_finished(*object_key(written), queue, status.phase)
            if look_again:  # as a watch would report the phase change
                self._mark(Request(key[0], key[1], event=Event.OUT_OF_SYNC))
        return written


# --- small helpers ---------------------------------------------------------------------------


def _ready(pod: Mapping[str, Any]) -> int:
    """1 for a pod that has succeeded or runs with every container ready, else 0."""
    phase = pod_phase(pod)
    if phase == PodPhase.SUCCEEDED:
        return 1
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    return int(phase == PodPhase.RUNNING and all(c.get("ready") for c in statuses))


def _targeted(pods: Iterable[dict[str, Any]], target: Resolution) -> list[dict[str, Any]] | None:
    """The pods a RestartTask / RestartPod / RestartPartition acts on (None: no such
    partition)."""
    task_pods = [p for p in pods if task_of(p) == target.task_name]
    if target.action == Action.RESTART_TASK:
        return task_pods
    if target.action == Action.RESTART_POD:
        return [p for p in task_pods if p["metadata"]["name"] == target.pod_name]
    partition = [
        p
        for p in task_pods
        if ((p["metadata"].get("labels") or {}).get(k.PARTITION_ID_KEY)) == target.partition_id
        and target.partition_id
    ]
    return partition or None

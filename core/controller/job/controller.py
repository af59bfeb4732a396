"""The vcjob reconciler: Jobs, their pods and PodGroup, Commands, queue state, TTL clean-up.

It watches Jobs, Pods, PodGroups, Commands, Queues and PriorityClasses through one
:class:`~stromboli.core.informer.Informer`. Every change becomes a :class:`Request` about a job
(as Volcano's handlers make them: ``PodFailed`` with the exit code, ``TaskCompleted``,
``PodEvicted``, a Command's action, ...). Requests are resolved by the job's lifecycle policies
into actions, and actions run through the state machine of :mod:`.state`: a sync creates the
PodGroup and, once the scheduler has admitted it (phase past ``Pending``), the missing pods;
a kill deletes pods and the PodGroup and bumps ``status.version``.

Two ways to drive it, one code path: :meth:`JobController.step` drains what is queued now and
returns how many writes it made (the simulator calls it every tick), and
:meth:`JobController.run` follows the watches for a live cluster. Delayed actions (policy
timeouts), retries with back-off and ``ttlSecondsAfterFinished`` are timers on the injected
clock; :meth:`JobController.next_wakeup` tells a virtual clock where to jump.

Reconciling is idempotent: objects are created by name (an existing one is left alone), so
replaying events, or starting a second controller on the same store, creates nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, Event, JobEventReason, JobPhase, PodPhase
from stromboli.core.clock import Clock, format_time, parse_time
from stromboli.core.cluster.errors import (
    AlreadyExistsError,
    ApiError,
    NotFoundError,
)
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.cluster.writes import put_status
from stromboli.core.controller.job import build
from stromboli.core.controller.job.plugins import JOB_PLUGINS, JobPlugin, JobPluginError
from stromboli.core.controller.job.policies import (
    INTERNAL_ACTIONS,
    Request,
    Resolution,
    cancelled_by,
    is_out_of_sync,
    pod_phase,
    pod_update_event,
    resolve,
    supersedes,
    task_completed,
    task_failed,
)
from stromboli.core.controller.job.queue import QueueStates, newer
from stromboli.core.controller.job.spec import JobSpecError, JobView, TaskView, parse_job
from stromboli.core.controller.job.state import Op, plan, retained_phases
from stromboli.core.controller.job.status import JobStatus, PodCounts, go_duration
from stromboli.core.controller.metrics import ControllerMetrics
from stromboli.core.events import EventRecorder
from stromboli.core.informer import Informer
from stromboli.core.quarantine import Quarantine

log = logging.getLogger(__name__)

JOB: Final = (k.BATCH_V1ALPHA1, "Job")
POD: Final = (k.CORE_V1, "Pod")
PODGROUP: Final = (k.SCHEDULING_V1BETA1, "PodGroup")
COMMAND: Final = (k.BUS_V1ALPHA1, "Command")
QUEUE: Final = (k.SCHEDULING_V1BETA1, "Queue")
PRIORITY_CLASS: Final = (k.K8S_SCHEDULING_V1, "PriorityClass")
PVC: Final = (k.CORE_V1, "PersistentVolumeClaim")
WATCHED: Final = (JOB, POD, PODGROUP, COMMAND, QUEUE, PRIORITY_CLASS)

COMPONENT: Final = "vc-controller-manager"
DEFAULT_MAX_REQUEUE: Final = 15
#: Back-off of a failed request: 5 ms doubling up to 1000 s (client-go's default limiter).
BACKOFF_BASE: Final = 0.005
BACKOFF_MAX: Final = 1000.0
#: Rounds of (watch → reconcile) one :meth:`JobController.step` runs at most.
MAX_ROUNDS: Final = 50
INVALID_SPEC_REASON: Final = "InvalidSpec"
FINISHED: Final = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED})

JobKey = tuple[str, str]
PodMutator = Callable[[dict[str, Any]], dict[str, Any]]


class SyncFailure(Exception):
    """A step of a sync that failed and is worth retrying (with back-off) later."""


@dataclass(slots=True)
class _Parsed:
    generation: int
    view: JobView | None
    error: JobSpecError | None
    plugins: list[JobPlugin] = field(default_factory=list)
    plugin_error: str = ""


@dataclass(slots=True)
class _Delayed:
    resolution: Resolution
    request: Request
    due: float
    serial: int


@dataclass(order=True, slots=True)
class _Timer:
    due: float
    serial: int
    kind: str = field(compare=False)  # "delay", "retry" or "ttl"
    key: JobKey = field(compare=False)
    pod_name: str = field(compare=False, default="")
    request: Request | None = field(compare=False, default=None)
    uid: str = field(compare=False, default="")


def _rv_newer(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    return old is None or newer(new, old)


def _owner_job(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller ownerReference of ``obj`` when it is a vcjob."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (
            ref.get("controller")
            and ref.get("kind") == "Job"
            and ref.get("apiVersion") == k.BATCH_V1ALPHA1
        ):
            return ref
    return None


def _key(obj: Mapping[str, Any]) -> JobKey:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


def _ref(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", "default"),
        "uid": meta.get("uid", ""),
    }


class JobController:
    """See the module docstring.

    ``plugins`` replaces the job-plugin table (tests); ``mutate_pod`` is applied to each pod
    before it is created (the simulator passes its admission, which resolves priorities as the
    API server would); ``max_requeue`` failed attempts of one request terminate the job;
    ``metrics`` records Volcano's controller metrics (pod creation latency, finished jobs,
    PodGroups per queue and phase).
    """

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        recorder: EventRecorder | None = None,
        *,
        plugins: Mapping[str, type[JobPlugin]] | None = None,
        mutate_pod: PodMutator | None = None,
        max_requeue: int = DEFAULT_MAX_REQUEUE,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.recorder = recorder or EventRecorder(store, clock, COMPONENT)
        self.plugin_table: Mapping[str, type[JobPlugin]] = (
            plugins if plugins is not None else JOB_PLUGINS
        )
        self.mutate_pod = mutate_pod
        self.max_requeue = max_requeue
        self.informer = Informer(store, WATCHED, self._seen, quarantine=Quarantine(COMPONENT))
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        #: Pods of each job by name (the job's by its ``volcano.sh/job-name`` annotation).
        self.pods: dict[JobKey, dict[str, dict[str, Any]]] = {}
        self.podgroups: dict[JobKey, dict[str, Any]] = {}
        self.priority_classes: dict[str, int] = {}
        self._queue_of_pg: dict[JobKey, str] = {}
        self._pgs_per_queue: dict[str, int] = {}
        self.queues = QueueStates(
            store, self.recorder, lambda q: self._pgs_per_queue.get(q, 0), metrics=metrics
        )
        self._requests: dict[Request, None] = {}
        self._commands: list[dict[str, Any]] = []
        self._parsed: dict[str, _Parsed] = {}
        self._delayed: dict[JobKey, dict[str, _Delayed]] = {}
        self._timers: list[_Timer] = []
        self._serial = 0
        self._attempts: dict[Request, int] = {}
        self._ttl_timers: dict[str, _Timer] = {}
        #: Uids of pods this controller deleted; their last updates are not news.
        self._deleted: set[str] = set()
        self._updated_generation: dict[str, int] = {}
        self._wake: asyncio.Event | None = None
        self._started = False
        self.writes = 0

    # --- driving -----------------------------------------------------------------------------

    async def start(self) -> None:
        """List everything once and start watching; the listed objects become requests."""
        await self.informer.start()
        self._started = True

    async def step(self) -> int:
        """Handle whatever is queued now (events, due timers, Commands), until quiet; returns
        how many objects were written."""
        if not self._started:
            await self.start()
        before = self.writes + self.queues.writes
        for _ in range(MAX_ROUNDS):
            await self.informer.pump()
            await self._fire_timers()
            if not (self._requests or self._commands or self.queues.requests):
                break
            await self._process()
        await self.informer.quarantine.publish(self.recorder)
        return self.writes + self.queues.writes - before

    def next_wakeup(self) -> float | None:
        """When (on the clock's monotonic scale) the next timer is due; None if none is."""
        while self._timers and not self._timer_live(self._timers[0]):
            heapq.heappop(self._timers)
        return self._timers[0].due if self._timers else None

    async def run(self) -> None:
        """Follow the watches until cancelled (a live cluster)."""
        if not self._started:
            await self.start()
        self._wake = asyncio.Event()
        follow = asyncio.create_task(self.informer.run())
        try:
            while True:
                await self._fire_timers()
                await self._process()
                await self.informer.quarantine.publish(self.recorder)
                wakeup = self.next_wakeup()
                timeout = None if wakeup is None else max(wakeup - self.clock.monotonic(), 0.0)
                if not (self._requests or self._commands or self.queues.requests):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout)
                self._wake.clear()
                if follow.done():
                    follow.result()  # a watch that died: surface its error
                    return
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)
            await self.informer.stop()

    # --- intake: store events → caches and requests --------------------------------------

    def _enqueue(self, request: Request) -> None:
        self._requests[request] = None
        if self._wake is not None:
            self._wake.set()

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        if kind == POD:
            self._seen_pod(event_type, obj)
        elif kind == JOB:
            self._seen_job(event_type, obj)
        elif kind == PODGROUP:
            self._seen_podgroup(event_type, obj)
        elif kind == COMMAND:
            if event_type == "ADDED":
                self._commands.append(obj)
        elif kind == QUEUE:
            self.queues.seen(event_type, obj)
        elif kind == PRIORITY_CLASS:
            name = obj["metadata"]["name"]
            if event_type == "DELETED":
                self.priority_classes.pop(name, None)
            else:
                self.priority_classes[name] = int(obj.get("value") or 0)
        if self._wake is not None:
            self._wake.set()

    def _seen_job(self, event_type: str, job: dict[str, Any]) -> None:
        key = _key(job)
        if event_type == "DELETED":
            cached = self.jobs.get(key)
            if cached is not None and cached["metadata"].get("uid") != job["metadata"].get("uid"):
                return  # an older job of the same name
            self.jobs.pop(key, None)
            self.pods.pop(key, None)
            if self.metrics is not None:
                queue = str((job.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE)
                self.metrics.forget_job(key[0], key[1], queue)
            self._delayed.pop(key, None)
            self._parsed.pop(job["metadata"].get("uid", ""), None)
            return
        old = self.jobs.get(key)
        if not _rv_newer(job, old):
            return
        self.jobs[key] = job
        self._schedule_ttl(job)
        if old is not None and old["metadata"].get("uid") == job["metadata"].get("uid"):
            same_spec = old.get("spec") == job.get("spec")
            if same_spec and _phase(old) == _phase(job):
                return
        self._enqueue(Request(key[0], key[1], event=Event.OUT_OF_SYNC))

    def _pod_request(self, pod: Mapping[str, Any], event: str, code: int = 0) -> Request | None:
        owner = _owner_job(pod)
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
            self._enqueue(_with(request, event))
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
            self._enqueue(_with(request, event))
            return
        if old.get("metadata", {}).get("resourceVersion") == pod["metadata"].get("resourceVersion"):
            return
        replicas, max_retry = self._task_limits(key, request.task_name)

        def task_pods() -> list[dict[str, Any]]:
            return [p for p in pods.values() if _task_of(p) == request.task_name]

        event, code = pod_update_event(
            old,
            pod,
            completed=lambda: task_completed(task_pods(), replicas),
            failed=lambda: task_failed(task_pods(), replicas, max_retry),
        )
        self._enqueue(_with(request, event, code))

    def _task_limits(self, key: JobKey, task_name: str) -> tuple[int, int]:
        job = self.jobs.get(key)
        for task in ((job or {}).get("spec") or {}).get("tasks") or ():
            if isinstance(task, Mapping) and task.get("name") == task_name:
                return int(task.get("replicas") or 0), int(task.get("maxRetry") or 0)
        return 0, 0

    def _seen_podgroup(self, event_type: str, pg: dict[str, Any]) -> None:
        key = _key(pg)
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
        if not _rv_newer(pg, old):
            return
        self.podgroups[key] = pg
        self.queues.podgroup_seen(key, queue, _pg_phase(pg))
        if key not in self._queue_of_pg:
            self._queue_of_pg[key] = queue
            self._pgs_per_queue[queue] = self._pgs_per_queue.get(queue, 0) + 1
            self.queues.enqueue(queue, Action.SYNC_QUEUE)
        if old is None:
            return
        phase = _pg_phase(pg)
        if phase == _pg_phase(old):
            return
        self.queues.enqueue(queue, Action.SYNC_QUEUE)
        owner = _owner_job(pg)
        job_name = str(owner.get("name")) if owner else key[1]
        event = Event.UNKNOWN if phase == k.PodGroupPhase.UNKNOWN else ""
        self._enqueue(Request(key[0], job_name, event=event))

    def _forget_pg_queue(self, key: JobKey) -> None:
        queue = self._queue_of_pg.pop(key, None)
        if queue is not None:
            left = self._pgs_per_queue.get(queue, 0) - 1
            if left > 0:
                self._pgs_per_queue[queue] = left
            else:
                self._pgs_per_queue.pop(queue, None)

    # --- processing --------------------------------------------------------------------------

    async def _process(self) -> None:
        commands, self._commands = self._commands, []
        for command in commands:
            await self._consume_command(command)
        await self.queues.process()
        batch = list(self._requests)
        self._requests.clear()
        syncs: dict[JobKey, Request] = {}
        for request in batch:
            self._cancel_moot_delays(request)
            job = self.jobs.get(request.job_key)
            if job is None:
                continue
            status = JobStatus.from_dict(job.get("status"))
            try:
                resolution = resolve(job, request, status.version)
            except ValueError as err:  # an unreadable policy timeout
                await self._report_invalid(job, JobSpecError("spec.policies", str(err)))
                continue
            if resolution.delay > 0:
                await self._event(
                    job,
                    "Normal",
                    JobEventReason.EXECUTE_ACTION,
                    f"Execute action {resolution.action} after {go_duration(resolution.delay)}",
                )
                self._delay(request, resolution)
                continue
            if resolution.action == Action.SYNC_JOB:
                # Syncs of one job coalesce: one sync sees every change made so far.
                syncs.setdefault(request.job_key, request)
                continue
            pending = syncs.pop(request.job_key, None)
            if pending is not None:
                await self._run(pending, Resolution(Action.SYNC_JOB))
            await self._run(request, resolution)
        gate = asyncio.Semaphore(32)

        async def one(request: Request) -> None:
            async with gate:
                await self._run(request, Resolution(Action.SYNC_JOB))

        await asyncio.gather(*(one(r) for r in syncs.values()))

    async def _run(self, request: Request, resolution: Resolution) -> None:
        job = self.jobs.get(request.job_key)
        if job is None:
            return
        if resolution.action != Action.SYNC_JOB:
            await self._event(
                job,
                "Normal",
                JobEventReason.EXECUTE_ACTION,
                f"Start to execute action {resolution.action} ",
            )
        try:
            await self._execute(request.job_key, resolution)
        except (SyncFailure, ApiError) as err:
            await self._retry_later(request, resolution, err)
            return
        except Exception as err:  # crash-only: a job we cannot process waits, the rest go on
            self.informer.quarantine.reject(job, err, "Job")
            return
        self._attempts.pop(request, None)
        if resolution.action not in INTERNAL_ACTIONS:
            self._cancel_superseded(request.job_key, resolution)

    async def _retry_later(self, request: Request, resolution: Resolution, err: Exception) -> None:
        attempts = self._attempts.get(request, 0) + 1
        log.info("job %s/%s: %s failed: %s", *request.job_key, resolution.action, err)
        if self.max_requeue < 0 or attempts <= self.max_requeue:
            self._attempts[request] = attempts
            delay = min(BACKOFF_BASE * 2 ** (attempts - 1), BACKOFF_MAX)
            self._add_timer("retry", request.job_key, delay, request=request)
            return
        self._attempts.pop(request, None)
        job = self.jobs.get(request.job_key)
        if job is None:
            return
        await self._event(
            job,
            "Normal",
            JobEventReason.EXECUTE_ACTION,
            f"Job failed on action {resolution.action} for retry limit reached",
        )
        try:
            await self._execute(request.job_key, Resolution(Action.TERMINATE_JOB))
        except (SyncFailure, ApiError) as error:
            log.warning("job %s/%s: could not terminate: %s", *request.job_key, error)

    async def _execute(self, key: JobKey, resolution: Resolution) -> None:
        """Run ``resolution`` through the state machine for the job's current phase."""
        job = self.jobs.get(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        parsed = self._parse(job)
        if parsed.view is None:
            assert parsed.error is not None
            await self._report_invalid(job, parsed.error)
            return
        status = JobStatus.from_dict(job.get("status"))
        step = plan(status.phase, resolution.action)
        if step.op is Op.SYNC:
            await self._sync(job, parsed, status, step.update)
        elif step.op is Op.KILL_JOB:
            await self._kill(job, parsed, status, step.retain, None, step.update)
        else:
            await self._kill(job, parsed, status, step.retain, resolution, step.update)

    # --- parsing -----------------------------------------------------------------------------

    def _parse(self, job: Mapping[str, Any]) -> _Parsed:
        meta = job["metadata"]
        uid = str(meta.get("uid") or "")
        generation = int(meta.get("generation") or 0)
        cached = self._parsed.get(uid)
        if cached is not None and cached.generation == generation:
            return cached
        try:
            view = parse_job(job)
        except JobSpecError as error:
            parsed = _Parsed(generation, None, error)
        else:
            parsed = _Parsed(generation, view, None)
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

    async def _sync(
        self,
        job: dict[str, Any],
        parsed: _Parsed,
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
        admitted = pg is not None and _pg_phase(pg) not in ("", k.PodGroupPhase.PENDING)
        if pg is not None:
            await self._podgroup_event(job, view, pg)
        if not admitted:
            new = status.copy()
            if update is not None and update(new, view.facts):
                self._transition(job, new)
            await self._write_status(job, new)
            return

        pods = self.pods.setdefault(view.key, {})
        counts = PodCounts()
        terminating = 0
        to_create: list[tuple[TaskView, list[int]]] = []
        to_delete: list[dict[str, Any]] = []
        by_task: dict[str, dict[str, dict[str, Any]]] = {}
        for pod in pods.values():
            by_task.setdefault(_task_of(pod) or "", {})[pod["metadata"]["name"]] = pod
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
        for pod in to_delete:
            error = await self._delete_pod(view, pod)
            if error:
                errors.append(error)
            else:
                terminating += 1
        if errors:
            await self._event(
                job, "Warning", JobEventReason.FAILED_DELETE, f"Error deleting pods: {errors}"
            )
            raise SyncFailure(f"failed to delete {len(errors)} pods")

        new = status.copy()
        new.set_counts(counts)
        new.terminating = terminating
        new.min_available = view.min_available
        if update is not None and update(new, view.facts):
            self._transition(job, new)
        await self._write_status(job, new)

    async def _initiate(
        self, job: dict[str, Any], parsed: _Parsed, status: JobStatus
    ) -> tuple[dict[str, Any], _Parsed, JobStatus]:
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
        ns, name = _key(job)
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

    async def _create_pod(
        self,
        job: dict[str, Any],
        parsed: _Parsed,
        task: TaskView,
        index: int,
        status: JobStatus,
        forwarding: bool,
    ) -> tuple[dict[str, Any] | None, str]:
        """Create one pod; returns (the created pod or None if it existed, an error text)."""
        view = parsed.view
        assert view is not None
        pod = build.build_pod(
            job,
            view,
            task,
            index,
            version=status.version,
            retry_count=status.retry_count,
            forwarding=forwarding,
        )
        name = pod["metadata"]["name"]
        try:
            for plugin in parsed.plugins:
                plugin.on_pod_create(pod, task.name, index)
            if self.mutate_pod is not None:
                pod = self.mutate_pod(pod)
        except (JobPluginError, ValueError) as err:
            return None, f"pod {name}: {err}"
        try:
            created = await self.store.create(pod)
        except AlreadyExistsError:
            return None, ""
        except ApiError as err:
            return None, f"pod {name}: {err}"
        self.writes += 1
        self.pods.setdefault(view.key, {})[name] = created
        if self.metrics is not None:
            self._observe_creation(job, created)
        return created, ""

    async def _delete_pod(self, view: JobView, pod: Mapping[str, Any]) -> str:
        name = pod["metadata"]["name"]
        try:
            await self.store.delete(*POD, name, view.namespace)
        except NotFoundError:
            pass
        except ApiError as err:
            return f"pod {name}: {err}"
        else:
            self.writes += 1
            self._deleted.add(pod["metadata"].get("uid"))
        self.pods.get(view.key, {}).pop(name, None)
        return ""

    # --- kill --------------------------------------------------------------------------------

    async def _kill(
        self,
        job: dict[str, Any],
        parsed: _Parsed,
        status: JobStatus,
        retain: frozenset[str],
        target: Resolution | None,
        update: Callable[[JobStatus, Any], bool] | None,
    ) -> None:
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
                counts.add(_task_of(pod), pod_phase(pod))
        errors: list[str] = []
        for pod in victims:
            error = await self._mark_out_of_sync(view, pod)
            if not error:
                error = await self._delete_pod(view, pod)
            if error:
                errors.append(error)
                counts.add(_task_of(pod), pod_phase(pod))
            else:
                terminating += 1
        if errors:
            await self._event(
                job, "Warning", JobEventReason.FAILED_DELETE, f"Error deleting pods: {errors}"
            )
            raise SyncFailure(f"failed to kill {len(errors)} of {len(victims)} pods")
        new = status.copy()
        new.set_counts(counts)
        new.terminating = terminating
        if update is not None and update(new, view.facts):
            self._transition(job, new)
        elif new.last_transition_time:
            new.running_duration = go_duration(self._since_created(job, new.last_transition_time))
        if target is None:
            await self._delete_plugin_objects(job, parsed, new)
        await self._write_status(job, new)
        if target is None:
            for name in (build.podgroup_name(view.name, view.uid), view.name):
                if (view.namespace, name) not in self.podgroups:
                    continue
                try:
                    await self.store.delete(*PODGROUP, name, view.namespace)
                except NotFoundError:
                    continue
                self.writes += 1
                self.podgroups.pop((view.namespace, name), None)
                self._forget_pg_queue((view.namespace, name))
                self.queues.enqueue(view.queue, Action.SYNC_QUEUE)

    async def _mark_out_of_sync(self, view: JobView, pod: Mapping[str, Any]) -> str:
        """Annotate the pod before deleting it, so that its deletion is not taken for an
        eviction (by this or another controller replica)."""
        if is_out_of_sync(pod):
            return ""
        name = pod["metadata"]["name"]
        try:
            patched = await self.store.patch(
                *POD,
                name,
                {"metadata": {"annotations": {k.CONTROLLER_OUT_OF_SYNC_KEY: "true"}}},
                namespace=view.namespace,
            )
        except NotFoundError:
            return ""
        except ApiError as err:
            return f"pod {name}: {err}"
        self.writes += 1
        self.pods.setdefault(view.key, {})[name] = patched
        return ""

    # --- PodGroup, plugins, volumes ----------------------------------------------------------

    def _podgroup_of(self, view: JobView) -> dict[str, Any] | None:
        pg = self.podgroups.get((view.namespace, build.podgroup_name(view.name, view.uid)))
        if pg is None:
            pg = self.podgroups.get((view.namespace, view.name))  # legacy name
        return pg

    def _priority_of(self, name: str) -> int | None:
        return self.priority_classes.get(name)

    async def _ensure_podgroup(self, job: dict[str, Any], view: JobView) -> None:
        existing = self._podgroup_of(view)
        if existing is None:
            pg = build.build_podgroup(job, view, self._priority_of)
            try:
                created = await self.store.create(pg)
            except AlreadyExistsError:
                return
            except ApiError as err:
                await self._event(
                    job,
                    "Warning",
                    JobEventReason.POD_GROUP_ERROR,
                    f"Failed to create PodGroup, err: {err}",
                )
                raise SyncFailure(f"PodGroup: {err}") from None
            self.writes += 1
            self._seen_podgroup("ADDED", created)
            return
        wanted = build.podgroup_spec(view, self._priority_of)
        patch = build.podgroup_drift(existing.get("spec") or {}, wanted)
        if not patch:
            return
        ns, name = _key(existing)
        try:
            written = await self.store.patch(*PODGROUP, name, {"spec": patch}, namespace=ns)
        except NotFoundError:
            return
        except ApiError as err:
            await self._event(
                job,
                "Warning",
                JobEventReason.POD_GROUP_ERROR,
                f"Failed to update PodGroup, err: {err}",
            )
            raise SyncFailure(f"PodGroup: {err}") from None
        self.writes += 1
        self.podgroups[(ns, name)] = written

    async def _podgroup_event(
        self, job: dict[str, Any], view: JobView, pg: Mapping[str, Any]
    ) -> None:
        """Warn while the latest true condition of the PodGroup is not ``Scheduled``."""
        latest: Mapping[str, Any] | None = None
        for condition in (pg.get("status") or {}).get("conditions") or ():
            if condition.get("status") != "True":
                continue
            if latest is None or str(condition.get("lastTransitionTime") or "") > str(
                latest.get("lastTransitionTime") or ""
            ):
                latest = condition
        if latest is not None and latest.get("type") != k.PodGroupConditionType.SCHEDULED:
            await self._event(
                job,
                "Warning",
                JobEventReason.POD_GROUP_PENDING,
                f"PodGroup {view.namespace}:{view.name} {str(latest.get('type')).lower()}, "
                f"reason: {latest.get('message') or ''}",
            )

    async def _ensure_plugin_objects(
        self, job: dict[str, Any], parsed: _Parsed, status: JobStatus
    ) -> None:
        """Objects of the job's plugins: created when the plugin has none recorded in
        ``status.controlledResources``, refreshed when the job's spec changed."""
        if parsed.plugin_error:
            await self._event(
                job,
                "Warning",
                JobEventReason.PLUGIN_ERROR,
                f"Execute plugin when job add failed, err: {parsed.plugin_error}",
            )
            raise SyncFailure(parsed.plugin_error)
        uid = str(job["metadata"].get("uid") or "")
        refresh = self._updated_generation.get(uid) != parsed.generation
        try:
            for plugin in parsed.plugins:
                key = plugin.controlled_resource_key
                if status.controlled_resources.get(key) != plugin.name:
                    for obj in plugin.on_job_add():
                        await self._apply(job, obj, replace=False)
                    status.controlled_resources[key] = plugin.name
                if refresh:
                    for obj in plugin.on_job_update():
                        await self._apply(job, obj, replace=True)
        except (JobPluginError, ValueError, ApiError) as err:
            await self._event(
                job,
                "Warning",
                JobEventReason.PLUGIN_ERROR,
                f"Execute plugin when job add failed, err: {err}",
            )
            raise SyncFailure(str(err)) from None
        self._updated_generation[uid] = parsed.generation

    async def _apply(self, job: Mapping[str, Any], obj: dict[str, Any], *, replace: bool) -> None:
        """Create ``obj`` (owned by the job); with ``replace``, also bring an existing one's
        content (everything but metadata and status) up to date."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", job["metadata"].get("namespace", "default"))
        if not meta.get("ownerReferences"):
            meta["ownerReferences"] = [build.controller_ref(job)]
        try:
            await self.store.create(obj)
        except AlreadyExistsError:
            if not replace:
                return
        else:
            self.writes += 1
            return
        current = await self.store.get(
            obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"]
        )
        if not _controlled_by(current, job):
            # Someone else's object under the plugin's name: never overwrite it.
            raise JobPluginError(
                f"{obj['kind']} {meta['namespace']}/{meta['name']} exists and is not controlled "
                f"by job {job['metadata'].get('name')}; delete or rename it"
            )
        content = {key: v for key, v in obj.items() if key not in ("metadata", "status")}
        if all(current.get(key) == v for key, v in content.items()):
            return
        await self.store.update({**current, **content})
        self.writes += 1

    async def _delete_plugin_objects(
        self, job: Mapping[str, Any], parsed: _Parsed, status: JobStatus
    ) -> None:
        namespace = str(job["metadata"].get("namespace") or "default")
        for plugin in parsed.plugins:
            key = plugin.controlled_resource_key
            if status.controlled_resources.get(key) != plugin.name:
                continue
            for api_version, kind, name in plugin.on_job_delete():
                try:
                    await self.store.delete(api_version, kind, name, namespace)
                except NotFoundError:
                    continue
                except ApiError as err:
                    if err.code != 403:
                        raise
                    # Refused (deploy/rbac.yaml's admission policy lets the controller delete
                    # only objects of vcjobs): someone else's object under the plugin's name
                    # stays, and the job is not held up by it.
                    await self._event(
                        job,
                        "Warning",
                        JobEventReason.PLUGIN_ERROR,
                        f"{kind} {namespace}/{name} of plugin {plugin.name} not deleted: {err}",
                    )
                    continue
                self.writes += 1
            del status.controlled_resources[key]

    async def _ensure_volumes(
        self, job: dict[str, Any], view: JobView, status: JobStatus
    ) -> dict[str, Any]:
        """PVCs of ``spec.volumes``: a volume with only a claim spec gets a PVC
        ``<job>-pvc-<12>`` (its name written back to the spec); a named claim must exist."""
        volumes = [dict(v) for v in (job.get("spec") or {}).get("volumes") or ()]
        changed = False
        for index, volume in enumerate(volumes):
            claim = str(volume.get("volumeClaimName") or "")
            if not claim:
                claim = await self._new_claim(job, view, index, volume.get("volumeClaim"))
                volume["volumeClaimName"] = claim
                changed = True
            elif not await self._claim_exists(view.namespace, claim):
                message = (
                    f"pvc {claim} is not found, the job will be in the Pending state until "
                    "the PVC is created"
                )
                await self._event(
                    job,
                    "Warning",
                    JobEventReason.PVC_ERROR,
                    f"Failed to create PVC, err: {message}",
                )
                raise SyncFailure(message)
            status.controlled_resources[f"volume-pvc-{claim}"] = claim
        if not changed:
            return job
        updated = {**job, "spec": {**job["spec"], "volumes": volumes}}
        written = await self.store.update(updated)
        self.writes += 1
        self._cache_job(written)
        return written

    async def _claim_exists(self, namespace: str, name: str) -> bool:
        try:
            await self.store.get(*PVC, name, namespace)
        except NotFoundError:
            return False
        return True

    async def _new_claim(
        self, job: Mapping[str, Any], view: JobView, index: int, claim_spec: Any
    ) -> str:
        for attempt in range(16):
            name = build.pvc_name(view.name, view.uid, index, attempt)
            try:
                existing = await self.store.get(*PVC, name, view.namespace)
            except NotFoundError:
                break
            owners = (existing.get("metadata") or {}).get("ownerReferences") or ()
            if any(ref.get("uid") == view.uid for ref in owners):
                return name  # created by an earlier attempt of this controller
        else:
            raise SyncFailure(f"no free PVC name for job {view.name} volume {index}")
        if isinstance(claim_spec, Mapping):
            pvc = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": name,
                    "namespace": view.namespace,
                    "ownerReferences": [build.controller_ref(job)],
                },
                "spec": dict(claim_spec),
            }
            try:
                await self.store.create(pvc)
            except ApiError as err:
                await self._event(
                    job, "Warning", JobEventReason.PVC_ERROR, f"Failed to create PVC, err: {err}"
                )
                raise SyncFailure(f"PVC {name}: {err}") from None
            self.writes += 1
        return name

    # --- status ------------------------------------------------------------------------------

    def _since_created(self, job: Mapping[str, Any], when: str) -> float:
        created = job["metadata"].get("creationTimestamp")
        if not created or not when:
            return 0.0
        return (parse_time(when) - parse_time(created)).total_seconds()

    def _observe_creation(self, job: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
        """Job-to-pod latency as Volcano measures it: the pod's creationTimestamp minus the
        job's (both stamped by the API server, so whole seconds on a real cluster)."""
        assert self.metrics is not None
        created = pod["metadata"].get("creationTimestamp")
        if not created:
            return
        self.metrics.observe_pod_creation(1000.0 * self._since_created(job, created))

    def _transition(self, job: Mapping[str, Any], status: JobStatus) -> None:
        now = format_time(self.clock.now())
        status.transition(now, "", self._since_created(job, now))

    async def _write_status(self, job: dict[str, Any], status: JobStatus) -> dict[str, Any]:
        """Write ``status`` unless it is what the job already has; returns the job."""
        old = JobStatus.from_dict(job.get("status"))
        wanted = status.to_dict()
        if wanted == old.to_dict():
            return job
        written = await put_status(self.store, job, lambda _current: wanted)
        if written is None:
            return job
        self.writes += 1
        self._cache_job(written)
        if status.phase != old.phase:
            if self.metrics is not None:
                queue = str((job.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE)
                self.metrics.job_finished(*_key(written), queue, status.phase)
            # As a watch would report the phase change: look at the job again.
            key = _key(written)
            self._enqueue(Request(key[0], key[1], event=Event.OUT_OF_SYNC))
        return written

    def _cache_job(self, job: dict[str, Any]) -> None:
        key = _key(job)
        if _rv_newer(job, self.jobs.get(key)):
            self.jobs[key] = job
            self._schedule_ttl(job)

    async def _event(self, job: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        await self.recorder.record(_ref(job), kind, str(reason), message)

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
        self._enqueue(Request(namespace, name, event=Event.COMMAND_ISSUED, action=action))

    # --- delayed actions and timers ----------------------------------------------------------

    def _add_timer(
        self,
        kind: str,
        key: JobKey,
        delay: float,
        *,
        pod_name: str = "",
        request: Request | None = None,
        uid: str = "",
    ) -> _Timer:
        self._serial += 1
        timer = _Timer(
            self.clock.monotonic() + delay, self._serial, kind, key, pod_name, request, uid
        )
        heapq.heappush(self._timers, timer)
        if self._wake is not None:
            self._wake.set()
        return timer

    def _timer_live(self, timer: _Timer) -> bool:
        if timer.kind == "delay":
            delayed = self._delayed.get(timer.key, {}).get(timer.pod_name)
            return delayed is not None and delayed.serial == timer.serial
        if timer.kind == "ttl":
            return self._ttl_timers.get(timer.uid) is timer
        return True

    def _delay(self, request: Request, resolution: Resolution) -> None:
        """Run ``resolution`` after its timeout unless something cancels it first; a pod with
        the same action already waiting keeps its original deadline."""
        pods = self._delayed.setdefault(request.job_key, {})
        current = pods.get(request.pod_name)
        if current is not None and current.resolution.action == resolution.action:
            return
        timer = self._add_timer(
            "delay", request.job_key, resolution.delay, pod_name=request.pod_name
        )
        pods[request.pod_name] = _Delayed(resolution, request, timer.due, timer.serial)

    def _cancel_moot_delays(self, request: Request) -> None:
        pods = self._delayed.get(request.job_key)
        if not pods:
            return
        delayed = pods.get(request.pod_name)
        if delayed is not None and cancelled_by(delayed.resolution, request):
            del pods[request.pod_name]

    def _cancel_superseded(self, key: JobKey, executed: Resolution) -> None:
        pods = self._delayed.get(key)
        if not pods:
            return
        for pod_name, delayed in list(pods.items()):
            if supersedes(executed, delayed.resolution):
                del pods[pod_name]

    async def _fire_timers(self) -> None:
        now = self.clock.monotonic()
        while self._timers and self._timers[0].due <= now:
            timer = heapq.heappop(self._timers)
            if not self._timer_live(timer):
                continue
            if timer.kind == "retry" and timer.request is not None:
                self._enqueue(timer.request)
            elif timer.kind == "ttl":
                del self._ttl_timers[timer.uid]
                await self._collect(timer.key)
            elif timer.kind == "delay":
                delayed = self._delayed[timer.key].pop(timer.pod_name)
                await self._fire_delayed(timer.key, delayed)

    async def _fire_delayed(self, key: JobKey, delayed: _Delayed) -> None:
        try:
            await self._execute(key, delayed.resolution)
        except (SyncFailure, ApiError) as err:
            await self._retry_later(delayed.request, delayed.resolution, err)
        self._cancel_superseded(key, delayed.resolution)

    # --- ttlSecondsAfterFinished ---------------------------------------------------------------

    def _ttl_left(self, job: Mapping[str, Any]) -> float | None:
        """Seconds until a finished job with a TTL may be deleted; None if it never will."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None or job["metadata"].get("deletionTimestamp") or _phase(job) not in FINISHED:
            return None
        finished = ((job.get("status") or {}).get("state") or {}).get("lastTransitionTime")
        if not finished:
            return None
        expires = parse_time(finished).timestamp() + float(ttl)
        return expires - self.clock.now().timestamp()

    def _schedule_ttl(self, job: Mapping[str, Any]) -> None:
        left = self._ttl_left(job)
        if left is None:
            return
        uid = str(job["metadata"].get("uid") or "")
        if uid in self._ttl_timers:
            return
        self._ttl_timers[uid] = self._add_timer("ttl", _key(job), max(left, 0.0), uid=uid)

    async def _collect(self, key: JobKey) -> None:
        """Delete a finished job whose TTL is over (its pods and PodGroup go with it)."""
        job = self.jobs.get(key)
        if job is None:
            return
        left = self._ttl_left(job)
        if left is None:
            return
        if left > 0:
            self._schedule_ttl(job)
            return
        try:
            fresh = await self.store.get(*JOB, key[1], key[0])
        except NotFoundError:
            return
        if (
            fresh["metadata"].get("uid") != job["metadata"].get("uid")
            or self._ttl_left(fresh) is None
        ):
            return
        try:
            await self.store.delete(*JOB, key[1], key[0], propagation="Foreground")
        except NotFoundError:
            return
        self.writes += 1


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


def _controlled_by(obj: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is controlled by a vcjob of ``job``'s name: this one, or an earlier one
    of that name whose objects the garbage collector has not removed yet."""
    name = job["metadata"].get("name")
    return any(
        ref.get("controller")
        and ref.get("kind") == "Job"
        and str(ref.get("apiVersion") or "").startswith(f"{k.BATCH_GROUP}/")
        and ref.get("name") == name
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    )


def _phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def _pg_phase(pg: Mapping[str, Any]) -> str:
    return str((pg.get("status") or {}).get("phase") or "")


def _task_of(pod: Mapping[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(k.TASK_SPEC_KEY)


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
    task_pods = [p for p in pods if _task_of(p) == target.task_name]
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


__all__ = ["JobController", "SyncFailure"]

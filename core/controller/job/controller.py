"""The vcjob reconciler: Jobs, their pods and PodGroup, Commands, queue state, TTL clean-up.

It watches Jobs, Pods, PodGroups, Commands, Queues and PriorityClasses through one
:class:`~stromboli.core.informer.Informer`. Every change becomes a :class:`Request` about a job
(:mod:`.intake`). Requests are resolved by the job's lifecycle policies into actions, and
actions run through the state machine of :mod:`.state` (:mod:`.sync`): a sync creates the
PodGroup and, once the scheduler has admitted it (phase past ``Pending``), the missing pods
(:mod:`.pods`); a kill deletes pods and the PodGroup and bumps ``status.version``.

It is a :class:`~stromboli.core.controller.reconciler.Reconciler`, driven as the others are:
:meth:`JobController.step` drains what is queued now and returns how many writes it made (the
simulator calls it every tick), and :meth:`JobController.run` follows the watches for a live
cluster. Delayed actions (policy timeouts), retries with back-off and
``ttlSecondsAfterFinished`` are timers on the injected clock (:mod:`.timers`);
:meth:`JobController.next_wakeup` tells a virtual clock where to jump.

Reconciling is idempotent: objects are created by name (an existing one is left alone), so
replaying events, or starting a second controller on the same store, creates nothing twice.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Mapping
from typing import Any

from stromboli.core.api.constants import Action, JobEventReason
from stromboli.core.clock import Clock
from stromboli.core.cluster.errors import ApiError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.job.base import (
    BACKOFF_BASE,
    BACKOFF_MAX,
    COMMAND,
    COMPONENT,
    DEFAULT_MAX_REQUEUE,
    JOB,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    QUEUE,
    WATCHED,
    JobKey,
    PodMutator,
    SyncFailure,
)
from stromboli.core.controller.job.lanes import RequestLanes
from stromboli.core.controller.job.plugins import JOB_PLUGINS, JobPlugin
from stromboli.core.controller.job.policies import (
    INTERNAL_ACTIONS,
    Request,
    Resolution,
    resolve,
)
from stromboli.core.controller.job.queue import QueueStates
from stromboli.core.controller.job.spec import JobSpecError
from stromboli.core.controller.job.state import Op, plan
from stromboli.core.controller.job.status import JobStatus, go_duration
from stromboli.core.controller.job.sync import JobSync
from stromboli.core.controller.job.timers import Delayed
from stromboli.core.controller.metrics import ControllerMetrics
from stromboli.core.events import EventRecorder

log = logging.getLogger(__name__)
#: Jobs synced at once: their writes overlap while the API server answers.
CONCURRENCY = 32
#: Jobs a live pass takes at most before Commands, queue requests and timers are looked at.
PASS_LIMIT = 256


class JobController(JobSync):
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
        super().__init__(store, clock, WATCHED, recorder, COMPONENT)
        self.metrics = metrics
        self.plugin_table = plugins if plugins is not None else JOB_PLUGINS
        self.mutate_pod = mutate_pod
        self.max_requeue = max_requeue
        self.jobs = {}
        self.pods = {}
        self.podgroups = {}
        self.priority_classes = {}
        self._queue_of_pg = {}
        self._pgs_per_queue = {}
        self.queues = QueueStates(
            store, self.recorder, lambda q: self._pgs_per_queue.get(q, 0), metrics=metrics
        )
        self._commands = []
        self._parsed = {}
        self._delayed = {}
        self._timers = []
        self._serial = 0
        self._attempts = {}
        self._ttl_timers = {}
        self._deleted = set()
        self._updated_generation = {}
        self._lanes = RequestLanes()
        self.finish_in_one_write = True
        self._pending_reported = {}
        self._looked_ahead = set()
        self._status_writing = {}
        #: Jobs processed at once, and (live) at most per pass; see :meth:`_process`.
        self.concurrency = CONCURRENCY
        self.pass_limit = PASS_LIMIT
        self.live = False

    # --- driving: the hooks of Reconciler ----------------------------------------------------

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

    def _has_work(self) -> bool:
        """Requests, Commands or queue requests wait."""
        return bool(self._lanes or self._commands or self.queues.requests)

    def _mark(self, key: Request) -> None:
        self._lanes.add(key)
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        self.live = True
        await super().run()

    @property
    def write_count(self) -> int:
        """The controller's writes and its queue controller's."""
        return self.writes + self.queues.writes

    async def _collect_due(self) -> None:
        """Fire the timers that fell due: a retry queues its request again, a TTL deletes its
        job, a delayed action runs now."""
        now = self.clock.monotonic()
        while self._timers and self._timers[0].due <= now:
            timer = heapq.heappop(self._timers)
            if not self._timer_live(timer):
                continue
            if timer.kind == "retry" and timer.request is not None:
                self._mark(timer.request)
            elif timer.kind == "ttl":
                del self._ttl_timers[timer.uid]
                await self._collect(timer.key)
            elif timer.kind == "delay":
                delayed = self._delayed[timer.key].pop(timer.pod_name)
                await self._fire_delayed(timer.key, delayed)

    async def _fire_delayed(self, key: JobKey, delayed: Delayed) -> None:
        try:
            await self._execute(key, delayed.resolution)
        except (SyncFailure, ApiError) as err:
            await self._retry_later(delayed.request, delayed.resolution, err)
        self._cancel_superseded(key, delayed.resolution)

    # --- processing --------------------------------------------------------------------------

    async def _process(self) -> None:
        commands, self._commands = self._commands, []
        for command in commands:
            await self._consume_command(command)
        await self.queues.process()
        # Stepped (the simulator), a pass takes the jobs queued now, as one round; live, at
        # most ``pass_limit``, taking new requests as they come, so that Commands, queue
        # requests and timers are looked at between passes however large the backlog.
        budget = self.pass_limit if self.live else len(self._lanes)
        taken = 0

        async def worker() -> None:
            nonlocal taken
            while taken < budget:
                item = self._lanes.take()
                if item is None:
                    return
                taken += 1
                key, requests = item
                try:
                    await self._process_job(requests)
                except Exception:  # one job must not stop the others (crash-only)
                    log.exception("job %s/%s: processing failed", *key)
                finally:
                    self._lanes.done(key)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))

    async def _process_job(self, requests: list[Request]) -> None:
        """One job's requests in order: its syncs coalesce (one sync sees every change made
        so far); another action first runs the sync asked for before it. The leading syncs
        of a job whose finish took its next look already (:meth:`_finish`) would have
        coalesced into that look: they do not run again."""
        pending: Request | None = None
        absorbed = False
        if requests and requests[0].job_key in self._looked_ahead:
            self._looked_ahead.discard(requests[0].job_key)
            absorbed = True
        for request in requests:
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
                if not absorbed:
                    pending = pending or request
                continue
            absorbed = False
            if pending is not None:
                await self._run(pending, Resolution(Action.SYNC_JOB))
                pending = None
            await self._run(request, resolution)
        if pending is not None:
            await self._run(pending, Resolution(Action.SYNC_JOB))

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
            await self._sync_job(job, parsed, status, step.update)
        elif step.op is Op.KILL_JOB:
            await self._kill_job(job, parsed, status, step.retain, None, step.update)
        else:
            await self._kill_job(job, parsed, status, step.retain, resolution, step.update)


__all__ = ["JobController", "SyncFailure"]

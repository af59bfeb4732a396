"""The scheduler loop: snapshot → session (actions over plugin tiers) → writes.

One code path for the simulator and a live cluster; only the store behind it differs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.clock import Clock, format_time
from stromboli.core.cluster.errors import AlreadyExistsError, ConflictError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventRecorder
from stromboli.core.informer import Informer
from stromboli.core.logsetup import V
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.plaingroup import OBJECT, PlainPodGroups
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.arrivals import Arrivals
from stromboli.core.scheduler.cache import WATCHED_KINDS, SchedulerCache
from stromboli.core.scheduler.conf import ConfigSource
from stromboli.core.scheduler.deviceconfig import DeviceConfigSource
from stromboli.core.scheduler.framework.closing import close_set
from stromboli.core.scheduler.framework.outcome import EvictionRecord
from stromboli.core.scheduler.framework.plugin import ACTIONS, Action
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.memorygroups import keep_in_memory
from stromboli.core.scheduler.pipeline import refresh_stored, release, remember_written, reserve
from stromboli.core.scheduler.settled import SettledJobs
from stromboli.core.scheduler.status import collect
from stromboli.core.scheduler.writer import StatusWriter, WriteReport

log = logging.getLogger(__name__)
#: klog verbosity of one line per decision (a binding, an eviction), as Volcano's.
DECISION_V = 3
#: Evictions the scheduler remembers for reports; older ones are forgotten first.
RECENT_EVICTIONS = 10_000


@dataclass(slots=True)
class CycleStats:
    """Figures of one cycle, for metrics, reports and benchmarks."""

    seconds: float = 0.0
    #: Folding store events into the cache (not part of the decision).
    intake_seconds: float = 0.0
    snapshot_seconds: float = 0.0
    action_seconds: dict[str, float] = field(default_factory=dict)
    write_seconds: float = 0.0
    #: Seconds spent in scheduling stages (``Predicate``, ``Scoring``, ``Bind``), summed.
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: Bindings attempted; ``bound`` of them succeeded.
    bind_attempts: int = 0
    bound: int = 0
    #: The tasks bound, and when their bindings were written (the clock's time).
    bound_tasks: list[TaskInfo] = field(default_factory=list)
    bound_at: datetime | None = None
    evicted: int = 0
    status_writes: int = 0
    session: Session | None = None

    @property
    def decision_seconds(self) -> float:
        return self.snapshot_seconds + sum(self.action_seconds.values())


@dataclass(slots=True)
class Decided:
    """A cycle decided and not yet written (``Scheduler.commit`` writes it)."""

    stats: CycleStats
    ssn: Session
    now: datetime
    #: ``perf_counter`` when the cycle began.
    started: float
    #: Its bindings are held in the cache already (``Scheduler.reserve``).
    reserved: bool = False
    #: The cache's job change mark taken before its snapshot (``settled.py``).
    mark: int | None = None
    #: Its bindings, when written ahead of its commit (``Scheduler.start_binds``).
    binding: asyncio.Task[tuple[WriteReport, float]] | None = None

    @property
    def evicts(self) -> bool:
        return bool(self.ssn.outcome.evictions)


def builtin_queue(name: str) -> dict:
    """The ``root`` and ``default`` queues the scheduler creates when missing."""
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": name != k.ROOT_QUEUE}
        | ({} if name == k.ROOT_QUEUE else {"parent": k.ROOT_QUEUE}),
        "status": {"state": "Open"},
    }


def time_stages(ssn: Session, totals: dict[str, float]) -> None:
    """Add the time ``ssn`` spends in its predicate and scoring calls to ``totals``.

    The session's ``predicate`` and ``node_scores`` are wrapped on this one session object, so
    the session code stays free of timing and a stage costs two clock reads per call, summed
    into one figure per cycle (Volcano times each call into a histogram instead).
    """
    for attr, stage in (("predicate", "Predicate"), ("node_scores", "Scoring")):
        totals.setdefault(stage, 0.0)
        setattr(ssn, attr, _timed(getattr(ssn, attr), stage, totals))


def _timed(call: Callable[..., Any], stage: str, totals: dict[str, float]) -> Callable[..., Any]:
    clock = time.perf_counter

    def timed(*args: Any) -> Any:
        started = clock()
        result = call(*args)
        totals[stage] += clock() - started
        return result

    return timed


def log_decisions(ssn: Session, report: WriteReport) -> None:
    """One line per binding and eviction written (at ``V(3)``, Volcano's chart default) and
    per failure (an error, always shown)."""
    decision = V(DECISION_V)
    if log.isEnabledFor(decision):
        for task in report.bound:
            log.log(
                decision,
                "Binding Task <%s/%s> to node <%s>",
                task.namespace,
                task.name,
                task.node_name,
                extra={"fields": {"pod": f"{task.namespace}/{task.name}", "node": task.node_name}},
            )
        evicted = {task.uid for task in report.evicted}
        for eviction in ssn.outcome.evictions:
            victim = eviction.task
            if victim.uid not in evicted:
                continue
            log.log(
                decision,
                "Evicting Task <%s/%s> on node <%s> (%s): %s",
                victim.namespace,
                victim.name,
                victim.node_name,
                eviction.action,
                eviction.reason,
                extra={"fields": {"pod": f"{victim.namespace}/{victim.name}"}},
            )
    for task, message in report.bind_failures:
        log.error("Binding Task <%s/%s> failed: %s", task.namespace, task.name, message)


class Scheduler:
    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        config: ConfigSource,
        scheduler_names: tuple[str, ...] = (k.DEFAULT_SCHEDULER_NAME,),
        default_queue: str = k.DEFAULT_QUEUE,
        bind_concurrency: int = 16,
        plain_pod_groups: PlainPodGroups = OBJECT,
        recorder: EventRecorder | None = None,
        settled_close: bool = True,
    ) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.default_queue = default_queue
        self.cache = SchedulerCache(scheduler_names, plain_pod_groups)
        #: New work seen by the watch since the last snapshot (the loop's early cycles).
        self.arrivals = Arrivals(self.cache)
        self.informer = Informer(
            store, WATCHED_KINDS, self._intake, quarantine=self.cache.quarantine
        )
        recorder = recorder or EventRecorder(store, clock, k.DEFAULT_SCHEDULER_NAME)
        self.writer = StatusWriter(store, clock, recorder, bind_concurrency)
        self.device_configs = DeviceConfigSource(store, clock)
        self._actions: dict[str, Action] = {}
        #: The last session, kept for ``explain`` and reports.
        self.last_session: Session | None = None
        #: The latest evictions carried out (bounded), for the simulator's report.
        self.recent_evictions: deque[EvictionRecord] = deque(maxlen=RECENT_EVICTIONS)
        #: Which jobs each close looks at (``settled_close=False``: every job, every cycle).
        self.settled = SettledJobs(settled_close)

    async def start(self) -> None:
        for name in (k.ROOT_QUEUE, self.default_queue):
            try:
                created = await self.store.create(builtin_queue(name))
            except AlreadyExistsError:
                continue
            created["status"] = {"state": "Open"}
            try:
                await self.store.update_status(created)
            except ConflictError:
                continue  # the queue controller wrote its status first: the state it wants stands
        await self.informer.start()

    def _intake(self, kind: tuple[str, str], event_type: str, obj: dict) -> None:
        self.cache.apply(kind, event_type, obj)
        self.arrivals.notice(kind, event_type, obj)

    def action(self, name: str) -> Action:
        action = self._actions.get(name)
        if action is None:
            action = self._actions[name] = ACTIONS[name]()
        return action

    def _remember_evictions(self, ssn: Session, report: WriteReport, at: str) -> None:
        done = {task.uid for task in report.evicted}

        def job_of(task: TaskInfo | None) -> tuple[str, str]:
            job = ssn.jobs.get(task.job_id) if task is not None else None
            return (f"{job.namespace}/{job.name}", job.queue) if job is not None else ("", "")

        for eviction in ssn.outcome.evictions:
            if eviction.task.uid not in done:
                continue
            victim_job, victim_queue = job_of(eviction.task)
            by = eviction.preemptor
            by_job, by_queue = job_of(by)
            self.recent_evictions.append(
                EvictionRecord(
                    at,
                    eviction.task.key,
                    victim_job,
                    victim_queue,
                    eviction.reason,
                    by.key if by is not None else "",
                    by_job,
                    by_queue,
                )
            )

    async def run_once(self) -> CycleStats:
        """One scheduling cycle over the current cache: decide, then write."""
        return await self.commit(await self.decide())

    async def decide(self) -> Decided:
        """Fold in what the watch brought and run the actions; nothing is written yet."""
        stats = CycleStats()
        started = time.perf_counter()
        await self.informer.pump()
        decisions_started = time.perf_counter()
        stats.intake_seconds = decisions_started - started
        config = self.config.current()
        self.arrivals.clear()  # what arrives from here on is the next cycle's
        mark = self.cache.job_changes.mark()
        snapshot = self.cache.snapshot()
        snapshot.device_configs = await self.device_configs.refresh(config)
        now = self.clock.now()
        ssn = Session(snapshot, config, now)
        time_stages(ssn, stats.stage_seconds)
        ssn.open()
        stats.snapshot_seconds = time.perf_counter() - decisions_started
        for name in config.actions:
            action_started = time.perf_counter()
            self.action(name).execute(ssn)
            stats.action_seconds[name] = time.perf_counter() - action_started
        return Decided(stats, ssn, now, started, mark=mark)

    def reserve(self, cycle: Decided) -> None:
        """Hold the cycle's bindings in the cache now, so that the next cycle may decide
        while they are written (see ``pipeline``); a refused one is let go in ``commit``."""
        outcome = cycle.ssn.outcome
        cycle.reserved = True  # set first: whatever was held before a failure is let go too
        reserve(self.cache, outcome.binds, outcome.pod_annotations)

    def start_binds(self, cycle: Decided) -> None:
        """Start writing a reserved cycle's bindings now, ahead of its commit: they depend on
        nothing the previous cycle still writes (its statuses and events), so a pod decided
        while that commit runs does not wait for it. A cycle that evicts binds in its commit,
        after its victims are gone."""
        if not cycle.reserved or cycle.evicts or cycle.binding is not None:
            return
        outcome = cycle.ssn.outcome
        if not outcome.binds:
            return
        cycle.binding = asyncio.create_task(
            self._bind(outcome.binds, outcome.pod_annotations), name="scheduler-binds"
        )

    async def _bind(
        self, binds: list[tuple[TaskInfo, str]], annotations: dict[str, dict[str, str]]
    ) -> tuple[WriteReport, float]:
        """The bindings' report, and the seconds they took."""
        started = time.perf_counter()
        report = WriteReport()
        await self.writer.bind(binds, report, annotations)
        return report, time.perf_counter() - started

    async def commit(self, cycle: Decided) -> CycleStats:
        """Write a cycle's decisions: evictions, bindings, then the statuses and events of
        its closed session. Commits must run one after another, in the order decided."""
        stats, ssn, now = cycle.stats, cycle.ssn, cycle.now
        write_started = time.perf_counter()
        if cycle.binding is not None:  # started ahead (no evictions); ends here
            report, stats.stage_seconds["Bind"] = await cycle.binding
        else:
            report = WriteReport()
            await self.writer.evict(ssn.outcome.evictions, report, ssn.jobs)
            for task in report.evicted:
                self.cache.assume_evicted(task)
            if report.evicted:
                self._remember_evictions(ssn, report, format_time(now))
            bind_started = time.perf_counter()
            await self.writer.bind(ssn.outcome.binds, report, ssn.outcome.pod_annotations)
            stats.stage_seconds["Bind"] = time.perf_counter() - bind_started
        stats.bound_at = self.clock.now()
        log_decisions(ssn, report)
        if cycle.reserved:
            for task, _ in report.bind_failures:
                release(self.cache, task)
        for task in report.bound:
            self.cache.assume_bound(task, task.node_name, report.annotated.get(task.uid))
            # The API server has the binding now: the PodGroup status written below may count
            # the pod as bound (Running at once, not Inqueue first and Running a cycle later).
            ssn.jobs[task.job_id].update_status(task, TaskStatus.BOUND)
        # Closed once nothing edits it any more (Volcano, too, binds while its session is
        # open): the plugins' closing hooks write the conditions and shares collected below,
        # and count a bound task as they count an allocated one.
        close_started = time.perf_counter()
        ssn.closing = self.settled.close_set(ssn, self.cache.job_changes)
        ssn.close()
        close_seconds = time.perf_counter() - close_started
        if cycle.reserved:  # the previous cycle's writes may have landed since the snapshot
            refresh_stored(ssn, self.cache)
        changes = collect(ssn, format_time(now), self.settled.queue_totals)
        keep_in_memory(changes, close_set(ssn.jobs, ssn.closing).jobs, self.cache)
        remember_written(self.cache, await self.writer.write(changes))
        self.settled.settle(ssn.closing, changes, cycle.mark, self.cache.job_changes)
        for job, error in ssn.outcome.set_aside:
            if job.in_memory:  # no PodGroup object to warn on: its pods carry the warning
                for task in job.tasks.values():
                    self.cache.quarantine.reject(task.pod, error, "Pod")
            else:
                self.cache.quarantine.reject(job.podgroup, error, "PodGroup")
        await self.cache.quarantine.publish(self.writer.recorder)
        stats.write_seconds = time.perf_counter() - write_started - close_seconds
        stats.bind_attempts = len(ssn.outcome.binds)
        stats.bound = len(report.bound)
        stats.bound_tasks = report.bound
        stats.evicted = len(report.evicted)
        stats.status_writes = (
            len(changes.podgroups) + len(changes.queues) + len(changes.pod_conditions)
        )
        stats.seconds = time.perf_counter() - cycle.started
        stats.session = ssn
        previous, self.last_session = self.last_session, ssn
        if previous is not None:  # written and no longer shown: its clones may be lent again
            self.cache.release(previous.snapshot)
        return stats

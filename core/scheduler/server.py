"""``stromboli scheduler``: the scheduling loop on a live cluster.

The same ``Scheduler`` the simulator drives, fed by watches instead of a virtual clock: every
``schedule_period`` one cycle runs over the cache, and sooner when new work arrives (a pending
pod or a PodGroup, seen by the watch), though never less than ``early_cycle_gap`` (nor less than
the last cycle took) after the previous one ended, so that a pod created into a cluster with room
waits a few milliseconds, not half a period. A cycle's bindings and statuses are written while
the next cycles decide (the cache holds them meanwhile): its bindings start as soon as it is
decided, alongside earlier cycles' writes, and its statuses follow theirs in the order decided;
events are written in the background.
Metrics and health are served over HTTP; with leader election only the Lease holder schedules,
and a process that loses the Lease stops. A SIGTERM lets the current cycle finish, then releases
the Lease and closes the watches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.clock import Clock, SystemClock
from stromboli.core.cluster.errors import ApiError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.eventbroadcast import EventBroadcaster
from stromboli.core.httpserve import Endpoint, start_process_endpoints
from stromboli.core.leaderelection import LeaderElector
from stromboli.core.logsetup import settings_of
from stromboli.core.scheduler.api.plaingroup import OBJECT, PlainPodGroups
from stromboli.core.scheduler.conf import ConfigSource
from stromboli.core.scheduler.metrics import SchedulerMetrics
from stromboli.core.scheduler.scheduler import CycleStats, Decided, Scheduler

log = logging.getLogger(__name__)
LEASE_NAME = "vc-scheduler"
#: The ConfigMap Volcano's chart mounts as ``--scheduler-conf``, in the scheduler's namespace.
CONFIG_MAP_NAME = "volcano-scheduler-configmap"
#: A cycle older than this many periods makes /healthz fail.
STALE_PERIODS = 30


@dataclass(slots=True)
class SchedulerOptions:
    scheduler_names: tuple[str, ...] = (k.DEFAULT_SCHEDULER_NAME,)
    scheduler_conf: str | None = None
    schedule_period: float = 1.0
    default_queue: str = k.DEFAULT_QUEUE
    listen_address: str = ":8080"
    healthz_address: str = ":11251"
    leader_elect: bool = False
    lock_object_namespace: str = "volcano-system"
    #: Bindings in flight at once (over every cycle's, see ``StatusWriter``).
    bind_concurrency: int = 128
    #: Refuse a configuration naming what Stromboli would skip (``--strict-config``).
    strict_config: bool = False
    #: ``(namespace, name)`` of the ConfigMap the configuration file comes from: skipped
    #: plugins and arguments are posted there as Warning events. ``None``: no events.
    config_map: tuple[str, str] | None = None
    #: Where plain pods' groups live (``--plain-pod-groups``); must match the controller's.
    plain_pod_groups: PlainPodGroups = OBJECT
    #: Seconds after a cycle before new work may start the next one early; 0: only on period.
    early_cycle_gap: float = 0.02
    #: Write a cycle's bindings and statuses while the next cycle decides.
    pipeline_writes: bool = True
    #: Decided cycles whose writes may run at once (their bindings together, their commits in
    #: order) before the loop waits for the oldest.
    commits_in_flight: int = 2


def start_settings(options: SchedulerOptions, config: ConfigSource) -> dict[str, object]:
    """What the start line tells: the flags, and the configuration in force."""
    active = config.config
    return settings_of(options) | {
        "actions": active.actions,
        "tiers": [[o.name for o in tier] for tier in active.tiers],
        "skipped": [s.message for s in config.skipped],
    }


class LostLeadership(RuntimeError):
    """Raised when another replica took the Lease: the process must exit."""


#: Connections the scheduler's client keeps beside its bindings': one per watch (a dozen
#: kinds), the event workers, status writes and reads.
CONNECTIONS_BESIDES_BINDS = 64


def scheduler_connections(options: SchedulerOptions) -> int:
    """The client's connection pool: every binding in flight has a connection of its own.
    (With HTTP/1.1 a request waits for a free connection; a pool that the watches and event
    workers share with ``bind_concurrency`` bindings held a live run's bindings to two thirds
    of the rate pods were created at, and they queued for seconds.)"""
    return options.bind_concurrency + CONNECTIONS_BESIDES_BINDS


class SchedulerServer:
    def __init__(
        self,
        store: ClusterStore,
        options: SchedulerOptions,
        clock: Clock | None = None,
        config: ConfigSource | None = None,
    ) -> None:
        self.store = store
        self.options = options
        self.clock = clock or SystemClock()
        self.metrics = SchedulerMetrics()
        self.config = config or ConfigSource(options.scheduler_conf, strict=options.strict_config)
        self.events = EventBroadcaster(store, self.clock, k.DEFAULT_SCHEDULER_NAME)
        self.events.on_drop = lambda why: self.metrics.events_dropped.labels(why).inc()
        self._reported_generation = 0
        self.scheduler = Scheduler(
            store,
            self.clock,
            self.config,
            options.scheduler_names,
            options.default_queue,
            options.bind_concurrency,
            options.plain_pod_groups,
            recorder=self.events,
        )
        self.scheduler.cache.quarantine.counter = self.metrics.invalid_objects
        self.stopping = asyncio.Event()
        self.cycles = 0
        #: Cycles started before their period ended, because new work arrived.
        self.early_cycles = 0
        #: Seconds the last pipelined writes took (they count towards the early-cycle pause).
        self._last_writes = 0.0
        self._writes_done = 0.0
        self._last_cycle = time.monotonic()
        #: Commits running or queued, oldest first (``_cycle``).
        self._in_flight: deque[asyncio.Task[None]] = deque()
        self.endpoints: list[Endpoint] = []
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            self.elector = LeaderElector.for_this_process(
                store, self.clock, LEASE_NAME, options.lock_object_namespace
            )

    def healthy(self) -> tuple[bool, str]:
        if self.elector is not None and not self.elector.is_leader:
            return True, "ok (standby)"
        stale = time.monotonic() - self._last_cycle
        if stale > STALE_PERIODS * max(self.options.schedule_period, 1.0):
            return False, f"no scheduling cycle for {stale:.0f}s"
        return True, "ok"

    def stop(self) -> None:
        self.stopping.set()

    async def report_config(self) -> None:
        """Tell what the configuration version in force skips: the metric always, a Warning
        event on its ConfigMap for each skipped name (the error log is the loader's)."""
        self._reported_generation = self.config.generation
        skipped = list(self.config.skipped)
        try:
            self.metrics.observe_config(skipped)
        except Exception:  # a metric must never stop the scheduler
            log.exception("recording the skipped configuration names failed")
        if not skipped or self.options.config_map is None:
            return
        involved = await self._config_map_reference(*self.options.config_map)
        recorder = self.scheduler.writer.recorder
        for entry in skipped:
            reason = "UnknownPlugin" if not entry.key else "UnknownConfiguration"
            await recorder.record(involved, "Warning", reason, entry.message)

    async def _config_map_reference(self, namespace: str, name: str) -> dict:
        """A reference to the ConfigMap, with its uid when the scheduler may read it (so that
        ``kubectl describe configmap`` lists the events), else by name alone."""
        reference = {"apiVersion": "v1", "kind": "ConfigMap", "namespace": namespace, "name": name}
        try:
            found = await self.store.get("v1", "ConfigMap", name, namespace)
        except ApiError as err:
            log.debug(
                "ConfigMap %s/%s not readable (%s); events name it only", namespace, name, err
            )
            return reference
        uid = (found.get("metadata") or {}).get("uid")
        return reference | ({"uid": uid} if uid else {})

    async def _serve_http(self) -> None:
        self.endpoints = await start_process_endpoints(
            self.metrics.registry,
            self.options.listen_address,
            self.healthy,
            self.options.healthz_address,
        )

    async def run(self) -> None:
        """Serve until ``stop()``; raises ``LostLeadership`` if the Lease is taken away."""
        await self._serve_http()
        renewing: asyncio.Task | None = None
        informing: asyncio.Task | None = None
        try:
            if self.elector is not None:
                if not await self.elector.acquire_unless(self.stopping):
                    return
                renewing = asyncio.create_task(self.elector.keep_renewing())
                log.info("acquired the lease; scheduling")
            await self.scheduler.start()
            await self.report_config()
            informing = asyncio.create_task(self.scheduler.informer.run())
            await self._loop(renewing)
        finally:
            for task in (renewing, informing):
                if task is not None:
                    task.cancel()
            await self.scheduler.informer.stop()
            await self.events.close()
            if self.elector is not None:
                await self.elector.release()
            for endpoint in self.endpoints:
                await endpoint.stop()

    async def _loop(self, renewing: asyncio.Task | None) -> None:
        writing: asyncio.Task[None] | None = None
        try:
            while not self.stopping.is_set():
                if renewing is not None and renewing.done():
                    raise LostLeadership("another scheduler holds the lease")
                started = time.monotonic()
                try:
                    writing = await self._cycle(writing)
                except Exception:  # a bad cycle must not stop the scheduler
                    log.exception("scheduling cycle failed")
                if self.config.generation != self._reported_generation:
                    await self.report_config()
                self.cycles += 1
                self._last_cycle = time.monotonic()
                if await self._wait_for_next(started, self._last_cycle, writing):
                    self.early_cycles += 1
        finally:
            if writing is not None:
                await writing  # a decided cycle is written before the process lets go

    async def _cycle(self, writing: asyncio.Task[None] | None) -> asyncio.Task[None] | None:
        """Decide a cycle while earlier ones' writes go on (``writing``, the latest of them),
        start its bindings at once and queue its commit behind theirs; returns the commit while
        it runs. At most ``commits_in_flight`` commits run: past that the loop waits for the
        oldest, so that decisions never run far ahead of what the API server takes. A cycle
        that evicts is written before the next one decides, so that no victim is chosen
        twice."""
        scheduler = self.scheduler
        if not self.options.pipeline_writes:
            self._observe(await scheduler.run_once())
            return None
        cycle = await scheduler.decide()
        try:
            scheduler.reserve(cycle)
            held = True
        except Exception:  # the cache could not hold them: write them before deciding again
            log.exception("holding the cycle's bindings in the cache failed")
            held = False
        if held:
            scheduler.start_binds(cycle)  # not behind earlier cycles' statuses and events
        commit = asyncio.create_task(self._commit(cycle, writing), name="scheduler-writes")
        self._in_flight.append(commit)
        if cycle.evicts or not held:
            await commit
            return None
        while len(self._in_flight) > max(1, self.options.commits_in_flight):
            await self._in_flight[0]
        return commit

    async def _commit(self, cycle: Decided, after: asyncio.Task[None] | None = None) -> None:
        """Commit ``cycle`` once the commit before it (``after``) is done: commits run in
        the order decided."""
        try:
            if after is not None:
                await asyncio.shield(after)  # never raises: its failures are logged
            await self._write(cycle)
        finally:
            self._in_flight.remove(asyncio.current_task())  # type: ignore[arg-type]

    async def _write(self, cycle: Decided) -> None:
        started = time.monotonic()
        try:
            stats = await self.scheduler.commit(cycle)
        except Exception:  # a failed write must not stop the scheduler
            log.exception("writing the scheduling cycle failed")
            return
        finally:
            self._writes_done = time.monotonic()
            self._last_writes = self._writes_done - started
        self._observe(stats)

    def _observe(self, stats: CycleStats) -> None:
        try:
            self.metrics.observe(stats)
        except Exception:  # nor may a failure to record its metrics
            log.exception("recording the cycle's metrics failed")

    async def _wait_for_next(
        self, started: float, ended: float, writing: asyncio.Task[None] | None = None
    ) -> bool:
        """Wait until the period that began at ``started`` is over, or until new work arrived,
        the gap after ``ended`` has passed and the last cycle's writes (``writing``) are done;
        True when the next cycle starts early. (Deciding again while those writes run would
        double the cycles, and their CPU, for the same pods.)"""
        deadline = started + self.options.schedule_period
        gap = self.options.early_cycle_gap
        arrivals = self.scheduler.arrivals
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= deadline:
                return False
            if gap > 0 and arrivals.is_set():
                if writing is not None and not writing.done():
                    await self._sleep(deadline - now, asyncio.shield(writing))
                    continue
                # A busy cycle is not followed at once: the pause after its writes is at least
                # as long as the cycle took, writes included, so early cycles take at most half
                # the time, however slow the API server.
                written = writing is not None
                busy = ended - started + (self._last_writes if written else 0.0)
                earliest = max(ended, self._writes_done if written else ended) + max(gap, busy)
                if now >= earliest:
                    return True
                await self._sleep(min(earliest, deadline) - now)
            else:
                await self._sleep(deadline - now, arrivals.event if gap > 0 else None)
        return False

    async def _sleep(
        self, seconds: float, wake: asyncio.Event | asyncio.Future[None] | None = None
    ) -> None:
        """Sleep up to ``seconds``, returning early on ``stop()`` or when ``wake`` is set or
        done (a future passed is cancelled afterwards: shield what must go on)."""
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self.stopping.wait())]
        if isinstance(wake, asyncio.Event):
            waits.append(asyncio.ensure_future(wake.wait()))
        elif wake is not None:
            waits.append(wake)
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

"""Prometheus metrics of the scheduler, under Volcano's names, types, labels and buckets
(``volcano_*``, as vc-scheduler exports them), plus our own ``stromboli_*`` ones.

Everything is recorded once per cycle from its ``CycleStats`` and the finished session, never
on the decision's hot paths: a cycle that places thousands of pods costs a walk over its jobs
and queues here, after the decisions are made. Series of queues, jobs and namespaces that are
gone are removed, so a long-running scheduler does not export stale label sets.
"""

from __future__ import annotations

import functools
import math
from collections import Counter as Tally
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from stromboli.core.clock import parse_time
from stromboli.core.promtypes import CountedHistogram, ExactCounter, Series, exponential
from stromboli.core.scheduler.api.resource import CPU, MEMORY, PODS, Resource
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.closing import close_set
from stromboli.core.scheduler.jobmetrics import JobSeries
from stromboli.core.scheduler.pending import PendingCounter

if TYPE_CHECKING:
    from collections.abc import Iterable

    from stromboli.core.scheduler.api.job import JobInfo
    from stromboli.core.scheduler.conf import Skipped
    from stromboli.core.scheduler.framework.session import Session
    from stromboli.core.scheduler.scheduler import CycleStats

#: Actions whose committed evictions Volcano counts as transactions.
EVICTING_ACTIONS = ("preempt", "reclaim", "gangpreempt", "gangreclaim")
#: Plugins whose per-queue accounting feeds the queue gauges, in order of preference.
QUEUE_PLUGINS = ("capacity", "proportion")
#: Queue figures exported per resource: (metric infix, attribute of the plugin's queue state).
QUEUE_AMOUNTS = (
    ("allocated", "allocated"),
    ("request", "request"),
    ("deserved", "deserved"),
    ("capacity", "capability"),
    ("real_capacity", "real_capability"),
    ("inqueue", "inqueue"),
)
#: Queue figures that are upper bounds: a resource they do not list is unbounded, not zero.
BOUNDS = frozenset({"capability", "real_capability"})


class _QueueGauges:
    """One queue figure as Volcano exports it: ``_milli_cpu``, ``_memory_bytes`` and
    ``_scalar_resources{resource}`` gauges."""

    def __init__(self, infix: str, what: str, registry: CollectorRegistry) -> None:
        prefix = f"volcano_queue_{infix}"
        self.cpu = Series(
            Gauge(
                f"{prefix}_milli_cpu",
                f"{what} cpu of a queue, in millicores",
                ["queue_name"],
                registry=registry,
            )
        )
        self.memory = Series(
            Gauge(
                f"{prefix}_memory_bytes",
                f"{what} memory of a queue, in bytes",
                ["queue_name"],
                registry=registry,
            )
        )
        self.scalar = Series(
            Gauge(
                f"{prefix}_scalar_resources",
                f"{what} amount of other resources (GPUs, ...) of a queue",
                ["queue_name", "resource"],
                registry=registry,
            )
        )

    def set(self, queue: str, amounts: dict[str, float]) -> None:
        for name, value in amounts.items():
            if name == CPU:
                self.cpu.get(queue).set(value)
            elif name == MEMORY:
                self.memory.get(queue).set(value)
            elif name != PODS:
                self.scalar.get(queue, name).set(value)

    def sweep(self) -> None:
        for series in (self.cpu, self.memory, self.scalar):
            series.sweep()


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # -- whole cycles ------------------------------------------------------------------
        self.e2e = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "One scheduling cycle from session open through the actions to the written results",
            buckets=exponential(1, 5000, 20),
            registry=r,
        )
        self.open_session = Histogram(
            "volcano_open_session_duration_milliseconds",
            "Opening a session: the cache snapshot and the plugins' session set-up",
            buckets=exponential(1, 5000, 20),
            registry=r,
        )
        self.action = Histogram(
            "volcano_action_scheduling_latency_milliseconds",
            "Time one action took in one cycle",
            ["action"],
            buckets=exponential(1, 2000, 20),
            registry=r,
        )
        self.plugin = Histogram(
            "volcano_plugin_scheduling_latency_milliseconds",
            "Time one plugin took to open or close a session",
            ["plugin", "OnSession"],
            buckets=exponential(0.1, 100, 15),
            registry=r,
        )
        self.stage = Histogram(
            "volcano_scheduling_stage_duration_milliseconds",
            "Time spent in one scheduling stage (Predicate, Scoring, Bind), summed over a cycle",
            ["stage"],
            buckets=exponential(0.1, 500, 20),
            registry=r,
        )
        # -- pods and jobs -----------------------------------------------------------------
        self.task_latency = CountedHistogram(
            "volcano_task_scheduling_latency_milliseconds",
            "Time from a pod's creation to a scheduling stage (Assumed: placed by a session; "
            "Bound: its binding written)",
            ("stage",),
            exponential(50, 60000, 30),
            r,
        )
        self.job_latency = Histogram(
            "volcano_e2e_job_scheduling_latency_milliseconds",
            "Time from a job's creation to a cycle that placed pods of it",
            buckets=exponential(100, 120000, 30),
            registry=r,
        )
        job_labels = ["job_name", "queue", "job_namespace"]
        self.job_duration = Series(
            Gauge(
                "volcano_e2e_job_scheduling_duration",
                "Milliseconds from a job's creation to the last cycle that placed pods of it",
                job_labels,
                registry=r,
            )
        )
        self.job_start = Series(
            Gauge(
                "volcano_e2e_job_scheduling_start_time",
                "When a job was created (unix seconds)",
                job_labels,
                registry=r,
            )
        )
        self.job_last = Series(
            Gauge(
                "volcano_e2e_job_scheduling_last_time",
                "When a cycle last placed pods of a job (unix seconds)",
                job_labels,
                registry=r,
            )
        )
        self.invalid_objects = Counter(
            "stromboli_invalid_objects_total",
            "Object versions the scheduler could not read and set aside, by kind",
            ["kind"],
            registry=r,
        )
        self.events_dropped = Counter(
            "stromboli_events_dropped_total",
            "Events not written, by why: spam (client-go's per-object filter) or backlog (more "
            "distinct events waiting than the writers' bound)",
            ["reason"],
            registry=r,
        )
        self.config_skipped = Series(
            Gauge(
                "stromboli_scheduler_config_skipped",
                "Names of the active scheduler configuration that have no effect (1 each): a "
                "plugin (key empty) or an argument, switch or key (owner: its plugin or action)",
                ["owner", "key", "volcano"],
                registry=r,
            )
        )
        self.attempts = Counter(
            "volcano_schedule_attempts_total",
            "Attempts to schedule pods, by result (scheduled: bound; unschedulable: no node "
            "fitted; error: the binding failed)",
            ["result"],
            registry=r,
        )
        self.unschedule_jobs = Gauge(
            "volcano_unschedule_job_count",
            "Jobs the last cycle could not schedule",
            registry=r,
        )
        self.unschedule_tasks = Series(
            Gauge(
                "volcano_unschedule_task_count",
                "Pods of a job still waiting after the last cycle, for jobs it could not schedule",
                ["job_id"],
                registry=r,
            )
        )
        self.job_retries = Series(
            ExactCounter(
                "volcano_job_retry_counts",
                "Cycles that tried a job and could not schedule it",
                ("job_id",),
                r,
            )
        )
        self.job_share = Series(
            Gauge(
                "volcano_job_share",
                "Dominant resource share of a job (drf)",
                ["job_ns", "job_id"],
                registry=r,
            )
        )
        # -- preemption and reclaim --------------------------------------------------------
        self.preemption_victims = Gauge(
            "volcano_pod_preemption_victims",
            "Victims offered on the last node preempt tried",
            registry=r,
        )
        self.preemption_attempts = ExactCounter(
            "volcano_total_preemption_attempts",
            "Nodes preempt tried to free for a preemptor",
            (),
            r,
        )
        self.eviction_transactions = Counter(
            "volcano_eviction_transactions_total",
            "Committed statements that evicted pods, by action",
            ["action"],
            registry=r,
        )
        for action in EVICTING_ACTIONS:
            self.eviction_transactions.labels(action)
        self.evicted = Counter(
            "stromboli_evicted_pods_total",
            "Pods chosen for eviction, by the action that chose them",
            ["action"],
            registry=r,
        )
        # -- namespaces and queues ---------------------------------------------------------
        self.namespace_share = Series(
            Gauge(
                "volcano_namespace_share",
                "Dominant resource share of a namespace (drf)",
                ["namespace_name"],
                registry=r,
            )
        )
        self.namespace_weight = Series(
            Gauge(
                "volcano_namespace_weight",
                "Weight of a namespace (drf)",
                ["namespace_name"],
                registry=r,
            )
        )
        self.namespace_weighted_share = Series(
            Gauge(
                "volcano_namespace_weighted_share",
                "Share of a namespace divided by its weight (drf)",
                ["namespace_name"],
                registry=r,
            )
        )
        self.queue_amounts = {
            infix: _QueueGauges(infix, infix.replace("_", " ").capitalize(), r)
            for infix, _attr in QUEUE_AMOUNTS
        }
        self.queue_share = Series(
            Gauge(
                "volcano_queue_share",
                "Share of a queue: its largest allocated/deserved ratio over resources",
                ["queue_name"],
                registry=r,
            )
        )
        self.queue_weight = Series(
            Gauge("volcano_queue_weight", "Weight of a queue", ["queue_name"], registry=r)
        )
        self.queue_overused = Series(
            Gauge(
                "volcano_queue_overused",
                "1 when a queue uses more than it deserves, else 0",
                ["queue_name"],
                registry=r,
            )
        )
        # -- ours ----------------------------------------------------------------------------
        self.cycle = Histogram(
            "stromboli_cycle_duration_seconds",
            "Duration of one scheduling cycle, by part (intake, snapshot, each action, write, "
            "total)",
            ["part"],
            buckets=exponential(0.0005, 30, 20),
            registry=r,
        )
        self.placed = Histogram(
            "stromboli_pods_placed_per_cycle",
            "Pods bound in one scheduling cycle",
            buckets=[0, 1, 10, 100, 1000, 10000, 100000],
            registry=r,
        )
        self.pending = Series(
            Gauge(
                "stromboli_pending_pods",
                "Pods waiting for a node after the last cycle, by queue and reason class",
                ["queue", "reason"],
                registry=r,
            )
        )
        self.job_series = JobSeries(
            start=self.job_start,
            duration=self.job_duration,
            last=self.job_last,
            share=self.job_share,
            retries=self.job_retries,
            namespace_share=self.namespace_share,
            namespace_weight=self.namespace_weight,
            namespace_weighted_share=self.namespace_weighted_share,
            epoch=_epoch,
        )

    # -- reading -----------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format, as ``/metrics`` serves them."""
        return generate_latest(self.registry)

    def series_names(self) -> set[str]:
        """Every sample name this registry can expose (``_bucket``/``_sum``/``_count`` of
        histograms, ``_total`` of counters), whether or not a cycle has set it yet."""
        suffixes = {
            "histogram": ("_bucket", "_sum", "_count", "_created"),
            "counter": ("_total", "_created"),
        }
        names: set[str] = set()
        for family in self.registry.collect():
            names.update(family.name + suffix for suffix in suffixes.get(family.type, ("",)))
        return names

    # -- recording ---------------------------------------------------------------------------

    def observe_config(self, skipped: Iterable[Skipped]) -> None:
        """Export what the configuration version now in force skips (and nothing else)."""
        for entry in skipped:
            self.config_skipped.get(entry.owner, entry.key, str(entry.volcano).lower()).set(1)
        self.config_skipped.sweep()

    def observe(self, stats: CycleStats) -> None:
        """Record one cycle."""
        self._observe_cycle(stats)
        ssn = stats.session
        if ssn is None:
            return
        for (plugin, point), seconds in ssn.plugin_seconds.items():
            self.plugin.labels(plugin, point).observe(seconds * 1000)
        self._observe_tasks(stats, ssn)
        self._observe_jobs(ssn)
        self._observe_evictions(ssn)
        self._observe_queues(ssn)
        counts = PendingCounter(ssn).count(close_set(ssn.jobs, ssn.closing).jobs)
        for (queue, reason), count in counts.items():
            self.pending.get(queue, reason).set(count)
        self.pending.sweep()

    def _observe_cycle(self, stats: CycleStats) -> None:
        self.e2e.observe(stats.seconds * 1000)
        self.open_session.observe(stats.snapshot_seconds * 1000)
        for action, seconds in stats.action_seconds.items():
            self.action.labels(action).observe(seconds * 1000)
            self.cycle.labels(action).observe(seconds)
        for stage, seconds in stats.stage_seconds.items():
            self.stage.labels(stage).observe(seconds * 1000)
        self.cycle.labels("intake").observe(stats.intake_seconds)
        self.cycle.labels("snapshot").observe(stats.snapshot_seconds)
        self.cycle.labels("write").observe(stats.write_seconds)
        self.cycle.labels("total").observe(stats.seconds)
        self.placed.observe(stats.bound)
        if stats.bound:
            self.attempts.labels("scheduled").inc(stats.bound)
        failed = stats.bind_attempts - stats.bound
        if failed > 0:
            self.attempts.labels("error").inc(failed)

    @staticmethod
    def _since(created: str, then: datetime) -> float | None:
        """Milliseconds from the RFC 3339 time ``created`` to ``then`` (never negative)."""
        if not created:
            return None
        return max((then.timestamp() - _epoch(created)) * 1000, 0.0)

    def _observe_tasks(self, stats: CycleStats, ssn: Session) -> None:
        stages = [("Assumed", ssn.now, [task for task, _node in ssn.outcome.binds])]
        if stats.bound_at is not None:
            stages.append(("Bound", stats.bound_at, stats.bound_tasks))
        for stage, then, tasks in stages:
            series = self.task_latency.labels(stage)
            for created, count in Tally(task.creation for task in tasks).items():
                latency = self._since(created, then)
                if latency is not None:
                    series.observe(latency, count)
        placed = {task.job_id for task, _node in ssn.outcome.binds}
        now = ssn.now.timestamp()
        for uid in placed:
            job = ssn.jobs.get(uid)
            if job is None:
                continue
            labels = (job.name, job.queue, job.namespace)
            latency = self._since(job.creation, ssn.now)
            if latency is not None:
                self.job_latency.observe(latency)
                self.job_duration.get(*labels).set(latency)
            self.job_last.get(*labels).set(now)

    def _observe_jobs(self, ssn: Session) -> None:
        """Jobs the cycle could not schedule (all among the jobs its close looked at: such a
        job is never settled), and the per-job gauges (``jobmetrics``)."""
        close = close_set(ssn.jobs, ssn.closing)
        unscheduled: dict[str, int] = {}
        unschedulable_jobs = unschedulable_attempts = 0
        for job in close.jobs:
            if _unschedulable(ssn, job):
                unschedulable_jobs += 1
                pending = job.count(TaskStatus.PENDING)
                unscheduled[job.name] = unscheduled.get(job.name, 0) + pending
                unschedulable_attempts += len(job.fit_errors)
                self.job_retries.child(job.name).inc()
        if unschedulable_attempts:
            self.attempts.labels("unschedulable").inc(unschedulable_attempts)
        for name, count in unscheduled.items():
            self.unschedule_tasks.get(name).set(count)
        self.unschedule_tasks.sweep()
        self.unschedule_jobs.set(unschedulable_jobs)
        self.job_series.observe(ssn, close)

    def _observe_evictions(self, ssn: Session) -> None:
        figures = ssn.eviction_figures
        attempts = figures.get("preemption_attempts", 0)
        if attempts:
            self.preemption_attempts.inc(attempts)
        if "preemption_victims" in figures:
            self.preemption_victims.set(figures["preemption_victims"])
        for key, count in figures.items():
            action = key.partition("transactions/")[2]
            if action and count:
                self.eviction_transactions.labels(action).inc(count)
        chosen: dict[str, int] = {}
        for eviction in ssn.outcome.evictions:
            chosen[eviction.action] = chosen.get(eviction.action, 0) + 1
        for action, count in chosen.items():
            self.evicted.labels(action or "unknown").inc(count)

    def _observe_queues(self, ssn: Session) -> None:
        states = _queue_states(ssn)
        figures = ssn.queue_figures
        for name, queue in ssn.queues.items():
            state = states.get(name)
            published = figures.get(name) or {}
            for infix, attr in QUEUE_AMOUNTS:
                value = getattr(state, attr, None) if state is not None else published.get(attr)
                if value is None and attr == "capability":
                    value = queue.capability
                if value is None and state is None and attr in ("allocated", "request", "inqueue"):
                    value = Resource()  # a queue no plugin accounts for holds nothing
                amounts = _amounts(value, bound=attr in BOUNDS)
                if amounts:
                    self.queue_amounts[infix].set(name, amounts)
            share = getattr(state, "share", None) if state is not None else published.get("share")
            if isinstance(share, int | float):
                self.queue_share.get(name).set(share)
            self.queue_weight.get(name).set(queue.weight)
            self.queue_overused.get(name).set(1 if ssn.overused(queue) else 0)
        for gauges in self.queue_amounts.values():
            gauges.sweep()
        for series in (self.queue_share, self.queue_weight, self.queue_overused):
            series.sweep()


@functools.lru_cache(maxsize=65536)
def _epoch(created: str) -> float:
    """Unix seconds of a creation timestamp; pods of a job share theirs, and jobs keep theirs
    from cycle to cycle, so each text is parsed once."""
    return parse_time(created).timestamp()


def _unschedulable(ssn: Session, job: JobInfo) -> bool:
    """Whether the cycle tried ``job`` and left it short (gang's verdict, else fit errors)."""
    if job.uid in ssn.unschedulable_events:
        return True
    return bool(job.fit_errors) and bool(job.count(TaskStatus.PENDING))


def _queue_states(ssn: Session) -> dict[str, object]:
    """Per-queue accounting the first queue plugin of the session published (capacity, else
    proportion), read after the session closed; empty when neither runs."""
    for name in QUEUE_PLUGINS:
        accounts = ssn.queue_accounts.get(name)
        if accounts is not None:
            return dict(accounts)
    return {}


def _amounts(value: object, bound: bool = False) -> dict[str, float] | None:
    """Finite resource amounts of a ``Resource``, a plain mapping, or a bound with a default
    for unlisted resources (capacity's ``Limit``); None when there is nothing to export.

    An amount (allocated, request, ...) that does not list cpu or memory holds none of it; a
    ``bound`` (a capability) that does not list one leaves it unbounded, so it is not exported.
    """
    if value is None:
        return None
    if isinstance(value, Resource | dict):
        amounts = dict(value.amounts if isinstance(value, Resource) else value)
        if not bound:
            amounts.setdefault(CPU, 0.0)
            amounts.setdefault(MEMORY, 0.0)
    else:
        listed = getattr(value, "amounts", None)
        get = getattr(value, "get", None)
        if not isinstance(listed, dict) or get is None:
            return None
        amounts = dict(listed)
        for name in (CPU, MEMORY):
            amounts.setdefault(name, get(name))
    return {name: float(v) for name, v in amounts.items() if math.isfinite(v)}

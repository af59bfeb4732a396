"""Prometheus metrics of the scheduler, under Volcano's names (reference §7) plus our own
``stromboli_*`` ones. Recorded once per cycle from its figures, never on hot paths."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from stromboli.core.scheduler.api.resource import CPU, MEMORY, Resource
from stromboli.core.scheduler.api.status import TaskStatus


def exponential(start: float, stop: float, count: int) -> list[float]:
    factor = (stop / start) ** (1 / (count - 1))
    return [start * factor**i for i in range(count)]


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.e2e = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "E2e scheduling latency in milliseconds (scheduling algorithm + binding)",
            buckets=exponential(1, 5000, 20),
            registry=r,
        )
        self.open_session = Histogram(
            "volcano_open_session_duration_milliseconds",
            "Time to open a session (snapshot and plugin set-up) in milliseconds",
            buckets=exponential(1, 5000, 20),
            registry=r,
        )
        self.action = Histogram(
            "volcano_action_scheduling_latency_milliseconds",
            "Action scheduling latency in milliseconds",
            ["action"],
            buckets=exponential(1, 2000, 20),
            registry=r,
        )
        self.plugin = Histogram(
            "volcano_plugin_scheduling_latency_milliseconds",
            "Plugin scheduling latency in milliseconds",
            ["plugin", "OnSession"],
            buckets=exponential(0.1, 100, 15),
            registry=r,
        )
        self.attempts = Counter(
            "volcano_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result",
            ["result"],
            registry=r,
        )
        self.unschedule_jobs = Gauge(
            "volcano_unschedule_job_count", "Number of jobs that could not be scheduled", registry=r
        )
        self.unschedule_tasks = Gauge(
            "volcano_unschedule_task_count",
            "Number of tasks that could not be scheduled",
            ["job_id"],
            registry=r,
        )
        self.queue_allocated_cpu = Gauge(
            "volcano_queue_allocated_milli_cpu",
            "Allocated cpu of a queue",
            ["queue_name"],
            registry=r,
        )
        self.queue_allocated_memory = Gauge(
            "volcano_queue_allocated_memory_bytes",
            "Allocated memory of a queue",
            ["queue_name"],
            registry=r,
        )
        self.queue_deserved_cpu = Gauge(
            "volcano_queue_deserved_milli_cpu",
            "Deserved cpu of a queue",
            ["queue_name"],
            registry=r,
        )
        self.queue_deserved_memory = Gauge(
            "volcano_queue_deserved_memory_bytes",
            "Deserved memory of a queue",
            ["queue_name"],
            registry=r,
        )
        self.queue_share = Gauge(
            "volcano_queue_share",
            "Share of a queue (allocated / deserved)",
            ["queue_name"],
            registry=r,
        )
        self.queue_weight = Gauge(
            "volcano_queue_weight", "Weight of a queue", ["queue_name"], registry=r
        )
        self.cycle = Histogram(
            "stromboli_cycle_duration_seconds",
            "Duration of one scheduling cycle, by part",
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
        self._unscheduled_jobs: set[str] = set()

    def observe(self, stats) -> None:  # type: ignore[no-untyped-def]
        """Record one cycle (a ``CycleStats``)."""
        self.e2e.observe(stats.seconds * 1000)
        self.open_session.observe(stats.snapshot_seconds * 1000)
        for action, seconds in stats.action_seconds.items():
            self.action.labels(action).observe(seconds * 1000)
            self.cycle.labels(action).observe(seconds)
        self.cycle.labels("snapshot").observe(stats.snapshot_seconds)
        self.cycle.labels("write").observe(stats.write_seconds)
        self.cycle.labels("total").observe(stats.seconds)
        self.placed.observe(stats.bound)
        if stats.bound:
            self.attempts.labels("scheduled").inc(stats.bound)
        ssn = stats.session
        if ssn is None:
            return
        for (plugin, point), seconds in ssn.plugin_seconds.items():
            self.plugin.labels(plugin, point).observe(seconds * 1000)
        unscheduled: set[str] = set()
        for job in ssn.jobs.values():
            pending = job.count(TaskStatus.PENDING)
            if pending and job.fit_errors:
                unscheduled.add(job.uid)
                self.unschedule_tasks.labels(job.uid).set(pending)
                self.attempts.labels("unschedulable").inc(len(job.fit_errors))
        for uid in self._unscheduled_jobs - unscheduled:
            self.unschedule_tasks.remove(uid)
        self._unscheduled_jobs = unscheduled
        self.unschedule_jobs.set(len(unscheduled))
        for name, figures in ssn.queue_figures.items():
            allocated = figures.get("allocated")
            deserved = figures.get("deserved")
            if isinstance(allocated, Resource):
                self.queue_allocated_cpu.labels(name).set(allocated.get(CPU))
                self.queue_allocated_memory.labels(name).set(allocated.get(MEMORY))
            if isinstance(deserved, Resource):
                self.queue_deserved_cpu.labels(name).set(deserved.get(CPU))
                self.queue_deserved_memory.labels(name).set(deserved.get(MEMORY))
            share = figures.get("share")
            if isinstance(share, float):
                self.queue_share.labels(name).set(share)
        for queue in ssn.queues.values():
            self.queue_weight.labels(queue.name).set(queue.weight)

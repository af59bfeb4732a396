"""Prometheus metrics of the controller manager, under the ``volcano_*`` names that Volcano's
vc-controller-manager exports.

Each controller takes an optional ``ControllerMetrics`` and records on its event paths with
these small helpers, so a controller without metrics pays one ``None`` check."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from stromboli.core.promtypes import ExactCounter, exponential

#: PodGroup phases counted per queue, each with its own ``volcano_queue_pod_group_*_count``.
QUEUE_PODGROUP_PHASES = ("inqueue", "pending", "running", "unknown", "completed")


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.job_to_pod_creation = Histogram(
            "volcano_controller_job_to_pod_creation_latency_milliseconds",
            "Time from a vcjob's creation to the creation of each of its pods, in milliseconds",
            # Volcano's 30 buckets from 50 ms to 1 min (rounded: the last bound is 60000.0).
            buckets=[round(b, 6) for b in exponential(50, 60000, 30)],
            registry=r,
        )
        self.queue_podgroups = {
            phase: Gauge(
                f"volcano_queue_pod_group_{phase}_count",
                f"PodGroups of this queue in phase {phase.capitalize()}",
                ["queue_name"],
                registry=r,
            )
            for phase in QUEUE_PODGROUP_PHASES
        }
        self.invalid_objects = Counter(
            "stromboli_invalid_objects_total",
            "Object versions the controller could not read and set aside, by kind",
            ["kind"],
            registry=r,
        )
        self.job_completed = ExactCounter(
            "volcano_job_completed_phase_count",
            "vcjobs that reached Completed",
            ("job_name", "queue_name"),
            registry=r,
        )
        self.job_failed = ExactCounter(
            "volcano_job_failed_phase_count",
            "vcjobs that reached Failed",
            ("job_name", "queue_name"),
            registry=r,
        )
        self.jobflow_succeed = ExactCounter(
            "volcano_jobflow_succeed_phase_count",
            "JobFlows that reached Succeed",
            ("jobflow_namespace",),
            registry=r,
        )
        self.jobflow_failed = ExactCounter(
            "volcano_jobflow_failed_phase_count",
            "JobFlows that reached Failed",
            ("jobflow_namespace",),
            registry=r,
        )

    def observe_pod_creation(self, latency_ms: float) -> None:
        """One created pod, ``latency_ms`` after its vcjob's creationTimestamp (as Volcano)."""
        self.job_to_pod_creation.observe(max(0.0, latency_ms))

    def job_finished(self, namespace: str, name: str, queue: str, phase: str) -> None:
        """Count a vcjob entering Completed or Failed; other phases are not counted.

        ``job_name`` is ``namespace/name`` as in Volcano."""
        counter = {"Completed": self.job_completed, "Failed": self.job_failed}.get(phase)
        if counter is not None:
            counter.labels(f"{namespace}/{name}", queue).inc()

    def forget_job(self, namespace: str, name: str, queue: str) -> None:
        """Drop a deleted vcjob's series so they do not grow without bound."""
        for counter in (self.job_completed, self.job_failed):
            with contextlib.suppress(KeyError):
                counter.remove(f"{namespace}/{name}", queue)

    def jobflow_finished(self, namespace: str, phase: str) -> None:
        counter = {"Succeed": self.jobflow_succeed, "Failed": self.jobflow_failed}.get(phase)
        if counter is not None:
            counter.labels(namespace).inc()

    def set_queue_podgroups(self, queue: str, counts: Mapping[str, int]) -> None:
        """Set every phase gauge of ``queue``; ``counts`` keys are Volcano's status fields
        (``inqueue``, ``pending``...), case-insensitive; missing phases count zero."""
        lowered = {k.lower(): v for k, v in counts.items()}
        for phase, gauge in self.queue_podgroups.items():
            gauge.labels(queue).set(lowered.get(phase, 0))

    def forget_queue(self, queue: str) -> None:
        for gauge in self.queue_podgroups.values():
            with contextlib.suppress(KeyError):
                gauge.remove(queue)

"""The webhook's Prometheus metrics (``stromboli_webhook_*``), one registry per server.

``outcome`` says what became of a request: ``allowed``, ``denied``, ``error`` (a review the
server could not process: answered with code 500 or HTTP 400, counted, and the server goes
on), ``shed`` (HTTP 429, over the in-flight budget), ``expired`` (its deadline passed first),
``too_large`` (HTTP 413).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

OUTCOMES = ("allowed", "denied", "error", "shed", "expired", "too_large")


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "stromboli_webhook_requests",
            "Admission requests answered, by path and outcome.",
            ["path", "outcome"],
            registry=self.registry,
        )
        self.errors = Counter(
            "stromboli_webhook_request_errors",
            "Admission reviews the server could not process, by path and reason.",
            ["path", "reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "stromboli_webhook_request_duration_seconds",
            "Time from a request's arrival to its answer, by path.",
            ["path"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.inflight = Gauge(
            "stromboli_webhook_inflight_requests",
            "Admission requests taken on and not yet finished.",
            registry=self.registry,
        )
        self.inflight_bytes = Gauge(
            "stromboli_webhook_inflight_bytes",
            "Body bytes of the admission requests in flight.",
            registry=self.registry,
        )

    def count(self, path: str, outcome: str) -> None:
        self.requests.labels(path, outcome).inc()

    def value(self, path: str, outcome: str) -> float:
        """A counter's value now (for tests and the benchmark)."""
        return (
            self.registry.get_sample_value(
                "stromboli_webhook_requests_total", {"path": path, "outcome": outcome}
            )
            or 0.0
        )

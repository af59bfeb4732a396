"""Prometheus building blocks of our own: exponential buckets, label sets that are swept when
what they describe is gone, a counter exposed under exactly its (Volcano) name, and a histogram
that takes many equal observations at once, so per-pod figures cost one call per group."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


def exponential(start: float, stop: float, count: int) -> list[float]:
    """``count`` buckets growing by a constant factor from ``start`` to ``stop``
    (Prometheus' ``ExponentialBucketsRange``)."""
    factor = (stop / start) ** (1 / (count - 1))
    return [start * factor**i for i in range(count)]


class Series:
    """The children of one labelled metric, remembered so that series of things that are gone
    can be removed. ``get`` returns the child for a label set and marks it seen this cycle;
    ``sweep`` removes the children not seen (unless ``keep`` says otherwise)."""

    __slots__ = ("children", "metric", "seen")

    def __init__(self, metric: Any) -> None:
        self.metric = metric
        self.children: dict[tuple[str, ...], Any] = {}
        self.seen: set[tuple[str, ...]] = set()

    def get(self, *labels: str) -> Any:
        child = self.children.get(labels)
        if child is None:
            child = self.children[labels] = self.metric.labels(*labels)
        self.seen.add(labels)
        return child

    def child(self, *labels: str) -> Any:
        """The child for a label set, without marking it seen: for a caller that removes
        what is gone itself (``remove``) instead of sweeping every cycle."""
        child = self.children.get(labels)
        if child is None:
            child = self.children[labels] = self.metric.labels(*labels)
        return child

    def remove(self, *labels: str) -> None:
        """Remove one label set's child, if there is one."""
        if self.children.pop(labels, None) is not None:
            self.metric.remove(*labels)
        self.seen.discard(labels)

    def sweep(self, keep: Callable[[tuple[str, ...]], bool] | None = None) -> None:
        for labels in [ls for ls in self.children if ls not in self.seen]:
            if keep is not None and keep(labels):
                continue
            del self.children[labels]
            self.metric.remove(*labels)
        self.seen = set()


class _Tally:
    """One labelled series of an :class:`ExactCounter`."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class ExactCounter(Collector):
    """A counter exposed under exactly its name, without the ``_total`` that prometheus_client
    appends to every counter: Volcano's ``volcano_job_retry_counts`` and
    ``volcano_total_preemption_attempts`` have none. It is exposed untyped, since the text
    format would rename a typed counter; PromQL's ``rate`` and ``increase`` read it alike."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.tallies: dict[tuple[str, ...], _Tally] = {}
        if not labelnames:
            self.tallies[()] = _Tally()  # exposed at zero from the start, as a plain counter is
        registry.register(self)

    def labels(self, *values: str) -> _Tally:
        tally = self.tallies.get(values)
        if tally is None:
            tally = self.tallies[values] = _Tally()
        return tally

    def remove(self, *values: str) -> None:
        self.tallies.pop(values, None)

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "unknown")]

    def collect(self) -> list[Metric]:
        metric = Metric(self.name, self.documentation, "unknown")
        for values, tally in self.tallies.items():
            metric.add_sample(
                self.name, dict(zip(self.labelnames, values, strict=True)), tally.value
            )
        return [metric]


class _Buckets:
    """One labelled series of a :class:`CountedHistogram`."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += count
        self.sum += value * count


class CountedHistogram(Collector):
    """A histogram that takes one value for many observations at once.

    Pods of one job share a creation time and a cycle binds them together, so their latencies
    are equal: counting them in one call keeps a cycle that binds ten thousand pods from
    making twenty thousand histogram calls. Exposed exactly as a prometheus_client Histogram
    (cumulative ``_bucket`` with ``le``, ``_sum``, ``_count``).
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...],
        buckets: list[float],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.bounds = sorted(buckets)
        self.series: dict[tuple[str, ...], _Buckets] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Buckets:
        series = self.series.get(values)
        if series is None:
            series = self.series[values] = _Buckets(self.bounds)
        return series

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "histogram")]

    def collect(self) -> list[Metric]:
        metric = Metric(self.name, self.documentation, "histogram")
        for values, series in self.series.items():
            labels = dict(zip(self.labelnames, values, strict=True))
            total = 0
            for bound, count in zip([*self.bounds, math.inf], series.counts, strict=True):
                total += count
                le = floatToGoString(bound)
                metric.add_sample(f"{self.name}_bucket", {**labels, "le": le}, total)
            metric.add_sample(f"{self.name}_count", labels, total)
            metric.add_sample(f"{self.name}_sum", labels, series.sum)
        return [metric]

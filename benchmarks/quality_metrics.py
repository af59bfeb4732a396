"""Scheduling quality figures computed from pod timelines, the same way for every scheduler.

Input is what a replay leaves: for each pod a ``PodSpan`` (its job, its name, when it ran),
the jobs of the trace (submit time, size, queue) and when each job finished. Nothing here
reads scheduler state, so a configuration without the ``proportion`` plugin, or a placer that
is no scheduler at all, is measured exactly like the others.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: Size classes of the report, in pods: (label, smallest, largest).
SIZE_CLASSES = (("1", 1, 1), ("2-8", 2, 8), ("9-32", 9, 32), ("33-64", 33, 64))


@dataclass(frozen=True, slots=True)
class PodSpan:
    """One run of one pod: from its start until it finished or was evicted (None: still
    running when the replay ended). A pod evicted and recreated under its name has two."""

    job: str
    pod: str
    start: float
    end: float | None
    gpus: int = 1


class JobLike:
    """What the figures read from a trace job (``quality_trace.TraceJob`` has it)."""

    name: str
    queue: str
    submit: float
    pods: int


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one has all."""
    if not values:
        raise ValueError("jain_index: no values")
    squares = sum(x * x for x in values)
    if squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolating linearly between ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile: no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile: q={q} is not within 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def size_class(pods: int) -> str:
    for label, low, high in SIZE_CLASSES:
        if low <= pods <= high:
            return label
    raise ValueError(f"size_class: a job of {pods} pods is outside 1..64")


def _spans_by_job(spans: Iterable[PodSpan]) -> dict[str, list[PodSpan]]:
    out: dict[str, list[PodSpan]] = defaultdict(list)
    for span in spans:
        out[span.job].append(span)
    return out


def job_waits(
    jobs: Iterable[JobLike], spans: Iterable[PodSpan], horizon: float
) -> dict[str, tuple[float, bool]]:
    """Per job: (wait, complete). The wait runs from submission until every one of its pods
    has started at least once (a gang placed piecemeal waits for its last pod); a job not
    wholly placed by ``horizon`` gets ``horizon - submit`` and ``complete`` False."""
    by_job = _spans_by_job(spans)
    out: dict[str, tuple[float, bool]] = {}
    for job in jobs:
        first: dict[str, float] = {}
        for span in by_job.get(job.name, ()):
            first[span.pod] = min(first.get(span.pod, math.inf), span.start)
        if len(first) >= job.pods:
            out[job.name] = (max(first.values()) - job.submit, True)
        else:
            out[job.name] = (max(0.0, horizon - job.submit), False)
    return out


def gang_health(
    jobs: Iterable[JobLike], spans: Iterable[PodSpan], horizon: float
) -> tuple[int, float]:
    """(partially placed gangs, wasted pod-seconds).

    A gang (a job of more than one pod) is partially placed when, at some moment, some but
    not all of its pods run; the pod-seconds its pods run in such moments are wasted: a
    distributed job cannot make progress until all its workers are up. Starts and ends at
    the same instant are taken together, so a gang started whole is never partial.
    """
    by_job = _spans_by_job(spans)
    partial, wasted = 0, 0.0
    for job in jobs:
        if job.pods <= 1:
            continue
        changes: dict[float, int] = defaultdict(int)
        for span in by_job.get(job.name, ()):
            end = horizon if span.end is None else min(span.end, horizon)
            if end <= span.start:
                continue
            changes[span.start] += 1
            changes[end] -= 1
        running, previous, was_partial = 0, 0.0, False
        for at in sorted(changes):
            if 0 < running < job.pods:
                wasted += running * (at - previous)
                was_partial = was_partial or at > previous
            running += changes[at]
            previous = at
        partial += was_partial
    return partial, wasted


def utilisation(spans: Iterable[PodSpan], capacity: float, horizon: float) -> float:
    """GPU-seconds held by running pods over ``capacity`` GPUs × ``horizon`` seconds."""
    if capacity <= 0 or horizon <= 0:
        raise ValueError(f"utilisation: capacity {capacity} and horizon {horizon} must be > 0")
    used = sum(
        s.gpus * (min(horizon, s.end if s.end is not None else horizon) - s.start)
        for s in spans
        if s.start < horizon
    )
    return used / (capacity * horizon)


def weighted_deserved(
    total: float,
    demand: Mapping[str, float],
    weights: Mapping[str, float],
    caps: Mapping[str, float | None] | None = None,
) -> dict[str, float]:
    """What each queue deserves of ``total``: shares by weight, none above its demand or cap,
    what a satisfied queue leaves over going to the others (water-filling, as ``proportion``)."""
    caps = caps or {}
    limit = {q: min(d, math.inf if caps.get(q) is None else caps[q]) for q, d in demand.items()}
    deserved = {q: 0.0 for q in demand}
    hungry = {q for q in demand if limit[q] > 0}
    left = float(total)
    while hungry and left > 1e-9:
        weight = sum(weights[q] for q in hungry)
        given = 0.0
        for q in sorted(hungry):
            share = min(left * weights[q] / weight, limit[q] - deserved[q])
            deserved[q] += share
            given += share
        left -= given
        hungry = {q for q in hungry if limit[q] - deserved[q] > 1e-9}
        if given <= 1e-9:
            break
    return deserved


def fairness_over_time(
    jobs: Sequence[JobLike],
    spans: Sequence[PodSpan],
    finished: Mapping[str, float],
    weights: Mapping[str, float],
    caps: Mapping[str, float | None],
    capacity: float,
    horizon: float,
    step: float = 60.0,
) -> float:
    """Mean over time (every ``step`` seconds) of Jain's index of the queues' held/deserved GPUs.

    At each instant a queue's demand is the GPUs of its jobs submitted and not yet finished;
    deserved comes from ``weighted_deserved``. Only queues with demand count; instants with
    fewer than two such queues are skipped (nothing to be fair between).
    """
    samples: list[float] = []
    queue_of = {j.name: j.queue for j in jobs}
    t = 0.0
    while t < horizon:
        demand: dict[str, float] = defaultdict(float)
        for job in jobs:
            if job.submit <= t < finished.get(job.name, math.inf):
                demand[job.queue] += job.pods
        if len(demand) >= 2:
            held: dict[str, float] = defaultdict(float)
            for span in spans:
                if span.start <= t and (span.end is None or t < span.end):
                    held[queue_of[span.job]] += span.gpus
            deserved = weighted_deserved(capacity, demand, weights, caps)
            ratios = [held[q] / deserved[q] for q in demand if deserved[q] > 0]
            if len(ratios) >= 2:
                samples.append(jain_index(ratios))
        t += step
    return sum(samples) / len(samples) if samples else 1.0

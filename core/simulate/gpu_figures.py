"""GPU figures for the report, the page and ``--output json``: pure functions over the GPU
samples of the timeline and the per-node map (``gpus.py``).

The JSON document (key ``gpu`` of the output ``List``) is part of the output contract: its keys
are camelCase and stay stable; the timeline keeps only the samples where a figure changed
(each holds until the next), times in virtual seconds since the start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stromboli.core.simulate.engine import SimulationResult
from stromboli.core.simulate.gpus import CardView, GpuSample, NodeGpus, sampler_for
from stromboli.core.simulate.jobs import time_weighted_mean

#: Nodes the text report's GPU map lists unless told otherwise (``--gpu-map``).
DEFAULT_MAP_NODES = 10
#: Figures the text report shows even when they stay 0 (others are left out then).
ALWAYS_SHOWN = frozenset({"allocated", "memory", "fragmented", "fragmentation"})
#: Width of the text report's sparklines (time buckets).
SPARK_WIDTH = 24
_BARS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True, slots=True)
class Metric:
    """One figure over time: its JSON key, its label and how to read it from a sample."""

    key: str
    label: str
    read: Callable[[GpuSample], float]
    #: A fraction (shown as a percentage) rather than a count of cards or instances.
    fraction: bool


METRICS: tuple[Metric, ...] = (
    Metric("allocated", "allocated (cards)", lambda s: s.allocated, False),
    Metric("whole", "held whole (cards)", lambda s: s.whole, False),
    Metric("sharedCards", "shared cards", lambda s: float(s.shared_cards), False),
    Metric("memory", "gpu memory used", lambda s: s.memory, True),
    Metric("cores", "vgpu cores used", lambda s: s.cores, True),
    Metric("migInstances", "MIG instances", lambda s: float(s.mig_instances), False),
    Metric("fragmented", "fragmented (cards)", lambda s: s.fragmented, False),
    Metric("fragmentation", "fragmentation (of free)", lambda s: s.fragmentation, True),
)


@dataclass(frozen=True, slots=True)
class MetricSummary:
    metric: Metric
    mean: float
    peak: float
    end: float
    spark: str


def gpu_samples(result: SimulationResult) -> list[GpuSample]:
    """The timeline's GPU samples (none when no node had GPUs)."""
    return [s.gpu for s in result.timeline if s.gpu is not None]


def sparkline(times: Sequence[float], values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """A step function as ``width`` block characters: each the time-weighted mean of its
    bucket, scaled to the peak (all lowest bars when the peak is 0)."""
    if not values:
        return ""
    t0, t1 = times[0], times[-1]
    peak = max(values)
    if t1 <= t0:
        buckets = [values[-1]] * width
    else:
        step = (t1 - t0) / width
        buckets = []
        for b in range(width):
            lo, hi = t0 + b * step, t0 + (b + 1) * step
            total = 0.0
            for i, value in enumerate(values):
                start = times[i]
                stop = times[i + 1] if i + 1 < len(times) else t1
                overlap = min(stop, hi) - max(start, lo)
                if overlap > 0:
                    total += value * overlap
            buckets.append(total / step)
    if peak <= 0 or not math.isfinite(peak):
        return _BARS[0] * width
    top = len(_BARS) - 1
    return "".join(_BARS[min(top, max(0, round(v / peak * top)))] for v in buckets)


def summaries(samples: Sequence[GpuSample]) -> list[MetricSummary]:
    times = [s.time for s in samples]
    out = []
    for metric in METRICS:
        values = [metric.read(s) for s in samples]
        out.append(
            MetricSummary(
                metric,
                time_weighted_mean(times, values),
                max(values, default=0.0),
                values[-1] if values else 0.0,
                sparkline(times, values),
            )
        )
    return out


def most_fragmented(nodes: Sequence[NodeGpus], limit: int | None) -> list[NodeGpus]:
    """Nodes by fragmented capacity (most first), then by free capacity, then name; the first
    ``limit`` of them (all when None)."""
    ranked = sorted(nodes, key=lambda n: (-n.fragmented, -n.free, n.name))
    return ranked if limit is None else ranked[: max(0, limit)]


def _round(value: float) -> float:
    return round(value, 4)


def sample_document(sample: GpuSample) -> dict:
    return {
        "time": sample.time,
        "gpus": _round(sample.gpus),
        **{m.key: _round(m.read(sample)) for m in METRICS},
        "sharedCards": sample.shared_cards,
        "migInstances": sample.mig_instances,
        "migCards": sample.mig_cards,
        "free": _round(sample.free),
    }


def card_document(card: CardView) -> dict:
    doc: dict = {
        "index": card.index,
        "uuid": card.uuid,
        "model": card.model,
        "mode": card.mode,
        "healthy": card.healthy,
        "memoryUsedMiB": card.memory_used,
        "memoryTotalMiB": card.memory_total,
        "coresUsed": card.cores_used,
        "coresTotal": card.cores_total,
        "free": _round(card.free),
        "pods": [
            {
                "pod": h.pod,
                "memoryMiB": h.memory,
                **({"cores": h.cores} if h.cores >= 0 else {}),
                **({"migInstance": h.instance, "migPosition": h.position} if h.instance else {}),
            }
            for h in card.holdings
        ],
    }
    if card.mode == "mig":
        doc["migGroup"] = card.mig_group
    return doc


def node_document(node: NodeGpus) -> dict:
    doc: dict = {
        "name": node.name,
        "free": _round(node.free),
        "fragmented": _round(node.fragmented),
        "cards": [card_document(c) for c in node.cards],
    }
    if node.whole is not None:
        doc["wholeGpus"] = {
            "model": node.whole.model,
            "total": node.whole.total,
            "used": node.whole.used,
            "pods": [{"pod": pod, "gpus": count} for pod, count in node.whole.pods],
        }
    return doc


def changed_only(samples: Sequence[GpuSample]) -> list[GpuSample]:
    """The samples where some figure changed, and the last one."""
    kept: list[GpuSample] = []
    for i, sample in enumerate(samples):
        if kept and i != len(samples) - 1 and _figures(kept[-1]) == _figures(sample):
            continue
        kept.append(sample)
    return kept


def _figures(sample: GpuSample) -> dict:
    doc = sample_document(sample)
    del doc["time"]
    return doc


def gpu_document(result: SimulationResult) -> dict | None:
    """The ``gpu`` key of ``--output json|yaml``: summary, timeline and per-node map; None
    when no node had GPUs."""
    samples = gpu_samples(result)
    if not samples and not sampler_for(result.scheduler).any_gpus:
        return None
    nodes = sampler_for(result.scheduler).node_map(result.scheduler)
    return {
        "summary": {
            s.metric.key: {"mean": _round(s.mean), "peak": _round(s.peak), "end": _round(s.end)}
            for s in summaries(samples)
        },
        "timeline": [sample_document(s) for s in changed_only(samples)],
        "nodes": [node_document(n) for n in nodes],
    }


def format_cards(value: float) -> str:
    """Cards with at most two decimals: ``3``, ``1.25``."""
    return f"{value:.2f}".rstrip("0").rstrip(".") or "0"


def format_metric(metric: Metric, value: float) -> str:
    if metric.fraction:
        return f"{value * 100:.0f}%"
    return format_cards(value)


def memory_text(card: CardView) -> str:
    """``30000/40960 MiB``."""
    return f"{card.memory_used}/{card.memory_total} MiB"


def cores_text(card: CardView) -> str:
    return f"{card.cores_used}/{card.cores_total}%" if card.cores_total else "-"


def pod_label(key: str) -> str:
    """``default/infer-0`` → ``infer-0``: pods of other namespaces keep theirs."""
    namespace, _, name = key.rpartition("/")
    return name if namespace == "default" else key


def short_model(model: str) -> str:
    """``NVIDIA-A100-SXM4-40GB`` → ``A100-SXM4-40GB``."""
    for prefix in ("NVIDIA-", "NVIDIA ", "Tesla-", "Tesla "):
        model = model.removeprefix(prefix)
    return model


def holders_text(card: CardView, short: bool = False) -> str:
    """The pods holding the card, with what each holds (MIG: its instance); ``short`` drops
    the default namespace."""
    parts = []
    for h in card.holdings:
        pod = pod_label(h.pod) if short else h.pod
        if h.instance:
            parts.append(f"{pod} ({h.instance}#{h.position})")
        elif h.cores >= 0:
            parts.append(f"{pod} {h.memory}M/{h.cores}%")
        else:
            parts.append(f"{pod} {h.memory}M")
    return ", ".join(parts) or "-"


def mig_text(card: CardView) -> str:
    """`` MIG group2`` for a split MIG card, `` MIG`` for an unsplit one, else nothing."""
    if card.mode != "mig":
        return ""
    return f" MIG {card.mig_group}" if card.mig_group else " MIG"

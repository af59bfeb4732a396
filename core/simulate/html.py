"""``stromboli simulate --html FILE``: the report as one self-contained HTML page.

No scripts, stylesheets or fonts from elsewhere (the page must open offline): inline CSS and
SVG charts drawn here. Charts are step lines, since each timeline sample holds until the next:
cluster utilisation (cpu, memory), pending and running pods, per queue the dominant share
held (solid) and deserved (dashed), and with GPUs their allocation, fragmentation and cards;
the per-node GPU map draws each card's memory as a bar. Every piece of text from the
simulation is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from itertools import pairwise
from pathlib import Path

from stromboli.core.simulate.engine import SimulationResult
from stromboli.core.simulate.gpu_figures import (
    cores_text,
    format_cards,
    gpu_samples,
    holders_text,
    most_fragmented,
    short_model,
    summaries,
)
from stromboli.core.simulate.gpus import CardView, GpuSample, NodeGpus, sampler_for
from stromboli.core.simulate.jobs import (
    Figures,
    figures,
    format_duration,
    format_percent,
    format_pods,
    group_pending,
    run_text,
    wait_text,
)
from stromboli.core.simulate.outcomes import (
    EvictionGroup,
    MadeJobs,
    Waiting,
    group_evictions,
    made_jobs,
    waiting_jobs,
)
from stromboli.core.simulate.report import header_line, pod_name, virtual_time
from stromboli.core.simulate.timeline import Sample

PALETTE = (
    "#1f6fb4",
    "#e8731a",
    "#2c9a3c",
    "#cc3333",
    "#8a5cb8",
    "#7f5347",
    "#d561b4",
    "#6f6f6f",
    "#a6a822",
    "#17a9bb",
)
WIDTH, HEIGHT = 880, 260
LEFT, RIGHT, TOP, BOTTOM = 60, 16, 14, 34
#: Pod names shown per pending reason before the rest fold into a details element.
NAMES_SHOWN = 5

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 960px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { padding: .25em .7em; border-bottom: 1px solid #ddd; text-align: left;
         vertical-align: top; }
th { background: #f3f3f3; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.caption { color: #666; font-size: .85em; }
.legend span { display: inline-block; margin-right: 1.2em; font-size: .85em; }
.legend svg { vertical-align: middle; margin-right: .3em; }
svg.chart { font-size: 11px; font-family: inherit; }
svg.chart .grid { stroke: #e5e5e5; }
svg.chart .axis { stroke: #888; }
svg.bar { vertical-align: middle; }
.phase-Completed { color: #2c7a2c; } .phase-Running { color: #1f6fb4; }
.phase-Failed, .phase-Aborted, .phase-Terminated { color: #c33; }
.phase-Pending, .phase-Inqueue { color: #a66a00; }
"""


@dataclass(slots=True)
class Series:
    #: Stable identifier written as ``data-series`` (``cpu``, ``queue:NAME:held``, ...).
    key: str
    label: str
    color: str
    points: list[tuple[float, float]]
    dashed: bool = False


# -- charts -----------------------------------------------------------------------------------


def _nice_step(span: float, target: int) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about ``target`` intervals."""
    if span <= 0:
        return 1.0
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def _time_step(span: float, target: int = 7) -> float:
    """A step for a time axis: round seconds, minutes, hours or days."""
    steps = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
             43200, 86400)  # fmt: skip
    for step in steps:
        if span / step <= target:
            return float(step)
    return _nice_step(span / 86400, target) * 86400


def _compress(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Keep only the samples where a step line changes (and the last one)."""
    kept: list[tuple[float, float]] = []
    for i, (t, v) in enumerate(points):
        if kept and kept[-1][1] == v and i != len(points) - 1:
            continue
        kept.append((t, v))
    return kept


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def svg_chart(
    series: Sequence[Series],
    t0: float,
    t1: float,
    y_max: float,
    y_label: Callable[[float], str],
    y_step: float,
    title: str,
) -> str:
    """One chart as inline SVG: step lines over time, with a grid and axis labels."""
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    span = max(t1 - t0, 1e-9)
    top = max(y_max, 1e-9)

    def x(t: float) -> float:
        return LEFT + (t - t0) / span * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - min(max(v, 0.0), top) / top * plot_h

    parts = [
        f'<svg class="chart" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">',
        f"<title>{escape(title)}</title>",
    ]
    steps = round(top / y_step) if y_step > 0 else 0
    for i in range(steps + 1):
        value = i * y_step
        gy = y(value)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{_fmt(gy)}" y2="{_fmt(gy)}"/>'
        )
        parts.append(
            f'<text x="{LEFT - 6}" y="{_fmt(gy + 4)}" text-anchor="end">'
            f"{escape(y_label(value))}</text>"
        )
    t_step = _time_step(t1 - t0)
    tick = math.ceil(t0 / t_step) * t_step
    while tick <= t1 + 1e-9:
        gx = x(tick)
        parts.append(
            f'<line class="grid" x1="{_fmt(gx)}" x2="{_fmt(gx)}" y1="{TOP}" y2="{TOP + plot_h}"/>'
        )
        parts.append(
            f'<text x="{_fmt(gx)}" y="{TOP + plot_h + 16}" text-anchor="middle">'
            f"{escape(format_duration(tick))}</text>"
        )
        tick += t_step
    parts.append(
        f'<line class="axis" x1="{LEFT}" x2="{LEFT + plot_w}" '
        f'y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>'
    )
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>')
    for line in series:
        points = _compress(line.points)
        if not points:
            continue
        path = [f"M{_fmt(x(points[0][0]))} {_fmt(y(points[0][1]))}"]
        for (_, previous), (t, v) in pairwise(points):
            path.append(f"H{_fmt(x(t))}")
            if v != previous:
                path.append(f"V{_fmt(y(v))}")
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        parts.append(
            f'<path data-series="{escape(line.key)}" d="{" ".join(path)}" fill="none" '
            f'stroke="{escape(line.color)}" stroke-width="2"{dash}>'
            f"<title>{escape(line.label)}</title></path>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend(series: Sequence[Series]) -> str:
    items = []
    for line in series:
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        items.append(
            f'<span><svg width="24" height="10"><line x1="0" x2="24" y1="5" y2="5" '
            f'stroke="{escape(line.color)}" stroke-width="2"{dash}/></svg>'
            f"{escape(line.label)}</span>"
        )
    return f'<div class="legend">{"".join(items)}</div>'


def _figure(title: str, chart: str, series: Sequence[Series]) -> str:
    return f"<h2>{escape(title)}</h2>\n{chart}\n{_legend(series)}"


def charts(timeline: Sequence[Sample]) -> str:
    """The three charts over the timeline, or a note when there is none."""
    if not timeline:
        return "<p>No timeline was sampled.</p>"
    t0, t1 = timeline[0].time, timeline[-1].time
    if t1 <= t0:
        t1 = t0 + 1.0
    out: list[str] = []

    usage = [
        Series("cpu", "cpu", PALETTE[0], [(s.time, s.cpu) for s in timeline]),
        Series("memory", "memory", PALETTE[1], [(s.time, s.memory) for s in timeline]),
    ]
    chart = svg_chart(usage, t0, t1, 1.0, format_percent, 0.25, "Utilisation over time")
    out.append(_figure("Utilisation over time (fraction of allocatable)", chart, usage))

    pods = [
        Series("pending", "pending pods", PALETTE[3], [(s.time, s.pending_pods) for s in timeline]),
        Series("running", "running pods", PALETTE[2], [(s.time, s.running_pods) for s in timeline]),
    ]
    peak = max(max(s.pending_pods, s.running_pods) for s in timeline)
    step = max(_nice_step(max(peak, 1), 4), 1.0)
    top = max(math.ceil(peak / step), 1) * step
    chart = svg_chart(pods, t0, t1, top, lambda v: f"{v:.0f}", step, "Pods over time")
    out.append(_figure("Pending and running pods", chart, pods))

    names = sorted({name for s in timeline for name in s.queues})
    if names:
        shares: list[Series] = []
        for i, name in enumerate(names):
            color = PALETTE[i % len(PALETTE)]
            held = [(s.time, s.queues.get(name, (0.0, 0.0))[0]) for s in timeline]
            deserved = [(s.time, s.queues.get(name, (0.0, 0.0))[1]) for s in timeline]
            shares.append(Series(f"queue:{name}:held", f"{name} held", color, held))
            if not any(math.isnan(v) for _, v in deserved):
                shares.append(
                    Series(f"queue:{name}:deserved", f"{name} deserved", color, deserved, True)
                )
        top = max(1.0, max(v for line in shares for _, v in line.points))
        chart = svg_chart(shares, t0, t1, top, format_percent, 0.25, "Queue shares over time")
        out.append(
            _figure(
                "Queue share held (solid) vs deserved (dashed), dominant resource", chart, shares
            )
        )
    return "\n".join(out)


def gpu_charts(samples: Sequence[GpuSample]) -> str:
    """GPU allocation (share of the cards, memory, cores), fragmentation, and counts of whole,
    shared and MIG-split cards over time."""
    if not samples:
        return ""
    t0, t1 = samples[0].time, samples[-1].time
    if t1 <= t0:
        t1 = t0 + 1.0
    out: list[str] = []
    shares = [
        Series(
            "gpu:allocated",
            "allocated (share of cards)",
            PALETTE[0],
            [(s.time, s.allocated / s.gpus if s.gpus else 0.0) for s in samples],
        ),
        Series("gpu:memory", "gpu memory used", PALETTE[1], [(s.time, s.memory) for s in samples]),
        Series("gpu:cores", "vgpu cores used", PALETTE[2], [(s.time, s.cores) for s in samples]),
    ]
    chart = svg_chart(shares, t0, t1, 1.0, format_percent, 0.25, "GPU allocation over time")
    out.append(_figure("GPU allocation over time (share of capacity)", chart, shares))
    frag = [
        Series(
            "gpu:fragmentation",
            "fragmentation (share of free GPU)",
            PALETTE[3],
            [(s.time, s.fragmentation) for s in samples],
        ),
        Series(
            "gpu:fragmented-share",
            "fragmented (share of all cards)",
            PALETTE[4],
            [(s.time, s.fragmented / s.gpus if s.gpus else 0.0) for s in samples],
            True,
        ),
    ]
    chart = svg_chart(frag, t0, t1, 1.0, format_percent, 0.25, "GPU fragmentation over time")
    out.append(
        _figure(
            "GPU fragmentation over time (free GPU the pods seen so far cannot use)", chart, frag
        )
    )
    counts = [
        Series("gpu:whole", "cards held whole", PALETTE[5], [(s.time, s.whole) for s in samples]),
        Series(
            "gpu:shared-cards",
            "shared cards",
            PALETTE[6],
            [(s.time, float(s.shared_cards)) for s in samples],
        ),
        Series(
            "gpu:mig-instances",
            "MIG instances",
            PALETTE[9],
            [(s.time, float(s.mig_instances)) for s in samples],
        ),
    ]
    peak = max(max(s.whole, s.shared_cards, s.mig_instances) for s in samples)
    step = max(_nice_step(max(peak, 1), 4), 1.0)
    top = max(math.ceil(peak / step), 1) * step
    chart = svg_chart(counts, t0, t1, top, lambda v: f"{v:.0f}", step, "GPU cards over time")
    out.append(_figure("Cards held whole, shared cards and MIG instances", chart, counts))
    return "\n".join(out)


# -- tables -----------------------------------------------------------------------------------


#: A table cell: plain text, or plain text with a CSS class.
Cell = str | tuple[str, str]


def _table(headers: Sequence[str], rows: Sequence[Sequence[Cell]], numeric: set[int]) -> str:
    """An HTML table; cells are escaped here, so pass plain text."""

    def cell(tag: str, i: int, value: Cell) -> str:
        text, extra = (value, "") if isinstance(value, str) else value
        classes = " ".join(c for c in ("num" if i in numeric else "", extra) if c)
        attr = f' class="{escape(classes)}"' if classes else ""
        return f"<{tag}{attr}>{escape(text)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def jobs_html(fig: Figures) -> str:
    if not fig.jobs:
        return "<p>No jobs (PodGroups) were submitted.</p>"
    rows: list[list[Cell]] = [
        [
            job.label,
            job.queue,
            (job.state, f"phase-{job.state}"),
            format_pods(job.pods),
            format_duration(job.submit),
            wait_text(job, fig.end_time),
            run_text(job, fig.end_time),
        ]
        for job in fig.jobs
    ]
    table = _table(["job", "queue", "phase", "pods", "submitted", "wait", "run"], rows, {4, 5, 6})
    note = '<p class="caption">≥: still waiting or running when the simulation ended.</p>'
    return table + note


def queues_html(fig: Figures) -> str:
    if not fig.queues:
        return "<p>No queue held or deserved a share.</p>"
    rows = [
        [
            q.name,
            str(q.weight),
            f"{q.started}/{q.jobs}",
            format_duration(q.mean_wait),
            format_duration(q.p95_wait),
            f"{format_percent(q.held_end)} / {format_percent(q.deserved_end)}",
            f"{format_percent(q.held_mean)} / {format_percent(q.deserved_mean)}",
            format_percent(q.held_peak),
        ]
        for q in fig.queues
    ]
    headers = [
        "queue",
        "weight",
        "started",
        "mean wait",
        "p95 wait",
        "share end",
        "share mean",
        "peak held",
    ]
    note = (
        '<p class="caption">share: held / deserved dominant-resource share of the cluster, '
        "at the end and time-averaged over the run.</p>"
    )
    return _table(headers, rows, set(range(1, 8))) + note


def utilisation_html(fig: Figures) -> str:
    use = fig.utilisation
    rows = [
        ["cpu", format_percent(use.cpu_mean), format_percent(use.cpu_peak)],
        ["memory", format_percent(use.memory_mean), format_percent(use.memory_peak)],
        ["pending pods", "", str(use.pending_peak)],
        ["running pods", "", str(use.running_peak)],
    ]
    return _table(["", "mean", "peak"], rows, {1, 2})


def pending_html(fig: Figures) -> str:
    if not fig.pending:
        return "<p>No pod is left pending.</p>"
    body = []
    for group in group_pending(fig.pending):
        shown = escape(", ".join(group.pods[:NAMES_SHOWN]))
        if group.count > NAMES_SHOWN:
            rest = escape(", ".join(group.pods[NAMES_SHOWN:]))
            more = group.count - NAMES_SHOWN
            shown += f"<details><summary>+{more} more</summary>{rest}</details>"
        body.append(
            f'<tr><td class="num">{group.count}</td><td>{shown}</td>'
            f"<td>{escape(group.reason)}</td></tr>"
        )
    return (
        '<table><thead><tr><th class="num">pods</th><th>which</th><th>reason</th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def waiting_html(waiting: Waiting) -> str:
    rows = [[job.label, job.queue, job.stage or "-", job.reason] for job in waiting.jobs]
    table = _table(["job", "queue", "held at", "why"], rows, set())
    if waiting.total > len(waiting.jobs):
        rest = waiting.total - len(waiting.jobs)
        table += f'<p class="caption">... and {rest} more jobs.</p>'
    return table


def evictions_html(groups: list[EvictionGroup]) -> str:
    rows = [
        [
            virtual_time(group.first_at),
            f"{len(group.pods)} of {group.victim_job} (queue {group.victim_queue})",
            ", ".join(pod_name(p) for p in group.pods),
            f"{group.preemptor_job} (queue {group.preemptor_queue})"
            if group.preemptor_job
            else "-",
            group.reason,
        ]
        for group in groups
    ]
    return _table(["at", "evicted", "pods", "for", "why"], rows, {0})


def made_html(made: list[MadeJobs]) -> str:
    rows = [[m.kind, m.owner, str(m.count), str(len(m.stored))] for m in made]
    note = (
        '<p class="caption">stored: still in the cluster at the end (CronJobs delete runs '
        "past their history limits).</p>"
    )
    return _table(["kind", "made by", "jobs", "stored"], rows, {2, 3}) + note


def gpu_summary_html(samples: Sequence[GpuSample]) -> str:
    rows = []
    for row in summaries(samples):
        metric = row.metric
        show = format_percent if metric.fraction else format_cards
        rows.append([metric.label, show(row.mean), show(row.peak), show(row.end)])
    return _table(["", "mean", "peak", "end"], rows, {1, 2, 3})


def _bar(card: CardView) -> str:
    """The card's memory as a bar: used part filled, a MIG card's instances marked."""
    width, height = 120, 12
    used = card.memory_used / card.memory_total if card.memory_total else 0.0
    fill = round(min(max(used, 0.0), 1.0) * width, 1)
    color = PALETTE[4] if card.mode == "mig" else PALETTE[0]
    return (
        f'<svg class="bar" width="{width}" height="{height}" role="img">'
        f"<title>{escape(f'{card.memory_used}/{card.memory_total} MiB')}</title>"
        f'<rect width="{width}" height="{height}" fill="#eee"/>'
        f'<rect width="{fill}" height="{height}" fill="{color}"/></svg>'
    )


def gpu_map_html(nodes: Sequence[NodeGpus]) -> str:
    """Every GPU node's cards at the end, the most fragmented nodes first."""
    body = []
    for node in most_fragmented(nodes, None):
        rows = len(node.cards) + (node.whole is not None)
        head = (
            f'<td rowspan="{rows}">{escape(node.name)}</td>'
            f'<td class="num" rowspan="{rows}">{escape(format_cards(node.fragmented))}</td>'
        )
        for card in node.cards:
            model = short_model(card.model) or card.mode
            mig = f" (MIG {card.mig_group or 'unsplit'})" if card.mode == "mig" else ""
            body.append(
                f'<tr data-node="{escape(node.name)}">{head}'
                f"<td>{escape(f'{card.index} {model}{mig}')}</td>"
                f"<td>{_bar(card)} {escape(f'{card.memory_used}/{card.memory_total}')}</td>"
                f'<td class="num">{escape(cores_text(card))}</td>'
                f"<td>{escape(holders_text(card))}</td></tr>"
            )
            head = ""
        if node.whole is not None:
            whole = node.whole
            pods = ", ".join(f"{p} ({format_cards(n)})" for p, n in whole.pods) or "-"
            label = f"{format_cards(whole.total)}× {short_model(whole.model) or 'nvidia.com/gpu'}"
            body.append(
                f'<tr data-node="{escape(node.name)}">{head}<td>{escape(label)}</td>'
                f"<td>{escape(format_cards(whole.used))} used</td><td>-</td>"
                f"<td>{escape(pods)}</td></tr>"
            )
    return (
        '<table class="gpu-map"><thead><tr><th>node</th><th class="num">fragmented</th>'
        "<th>card</th><th>memory MiB (used/total)</th><th>cores</th><th>held by</th></tr>"
        f"</thead><tbody>{''.join(body)}</tbody></table>"
        '<p class="caption">fragmented: free GPU capacity (cards) on the node that the pods '
        "seen so far could not use.</p>"
    )


def gpu_sections(result: SimulationResult) -> list[str]:
    """GPU figures, charts over time and the per-node map; nothing without GPUs."""
    samples = gpu_samples(result)
    if not samples:
        return []
    out = [
        f"<h2>GPUs over time ({escape(format_cards(samples[-1].gpus))} cards)</h2>",
        gpu_summary_html(samples),
        gpu_charts(samples),
    ]
    nodes = sampler_for(result.scheduler).node_map(result.scheduler)
    if nodes:
        out += [f"<h2>GPU map at the end ({len(nodes)} nodes)</h2>", gpu_map_html(nodes)]
    return out


def outcome_sections(result: SimulationResult, final: dict, fig: Figures) -> list[str]:
    """Jobs that never started, evictions, and jobs made by JobFlows and CronJobs."""
    out: list[str] = []
    waiting = waiting_jobs(result, final, fig.jobs)
    if waiting:
        out += [f"<h2>Jobs that never started ({waiting.total})</h2>", waiting_html(waiting)]
    groups = group_evictions(result.scheduler.recent_evictions)
    if groups:
        count = sum(len(g.pods) for g in groups)
        out += [f"<h2>Evictions ({count} pods)</h2>", evictions_html(groups)]
    made = made_jobs(final)
    if made:
        out += ["<h2>Jobs made by JobFlows and CronJobs</h2>", made_html(made)]
    return out


# -- page -------------------------------------------------------------------------------------


def render_html(result: SimulationResult, final: dict) -> str:
    """The whole page as a string."""
    fig = figures(result, final)
    use = fig.utilisation
    pending_title = f"Why pending ({len(fig.pending)} pod{'' if len(fig.pending) == 1 else 's'})"
    sections = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Stromboli simulation report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Stromboli simulation report</h1>",
        f"<p>{escape(header_line(result))}</p>",
        "<h2>Jobs</h2>",
        jobs_html(fig),
        "<h2>Queues</h2>",
        queues_html(fig),
        f"<h2>Utilisation over {escape(format_duration(use.span))}</h2>",
        utilisation_html(fig),
        *outcome_sections(result, final, fig),
        f"<h2>{escape(pending_title)}</h2>",
        pending_html(fig),
        charts(result.timeline),
        *gpu_sections(result),
        "</body></html>",
    ]
    return "\n".join(sections) + "\n"


def write_html(path: str | Path, result: SimulationResult, final: dict) -> None:
    """Write the report with charts to ``path`` as one self-contained HTML file."""
    Path(path).write_text(render_html(result, final), encoding="utf-8")

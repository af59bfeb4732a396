"""The human report ``stromboli simulate`` prints without ``--output``: rich tables on stdout."""

from __future__ import annotations

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from stromboli.core.clock import EPOCH, parse_time
from stromboli.core.simulate.engine import SimulationResult
from stromboli.core.simulate.gpu_figures import (
    ALWAYS_SHOWN,
    DEFAULT_MAP_NODES,
    cores_text,
    format_cards,
    format_metric,
    gpu_samples,
    holders_text,
    mig_text,
    most_fragmented,
    pod_label,
    short_model,
    summaries,
)
from stromboli.core.simulate.gpus import GpuSample, NodeGpus, sampler_for
from stromboli.core.simulate.jobs import (
    Figures,
    figures,
    format_duration,
    format_elapsed,
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

#: Pod names listed per pending reason before the rest are counted.
NAMES_PER_REASON = 3
#: Jobs listed in the table; the rest are summarised in one line.
MAX_JOB_ROWS = 200

_PHASE_STYLES = {
    "Completed": "green",
    "Running": "cyan",
    "Inqueue": "yellow",
    "Pending": "yellow",
    "Unknown": "magenta",
    "Failed": "red",
    "Aborted": "red",
    "Terminated": "red",
}


def _add_row(table: Table, *cells: str | Text) -> None:
    """Add a row whose strings are shown as written, never read as rich markup: names,
    reasons and messages come from the user's objects, and ``[/x]`` in one would crash the
    report (``[bold]`` restyle it)."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def header_line(result: SimulationResult) -> str:
    """One line on the run: virtual end time, cycles, pods bound, scheduler and wall time."""
    decisions = format_elapsed(result.decision_seconds)
    writes = format_elapsed(result.write_seconds)
    line = (
        f"Simulated {format_duration(result.end_time)} of virtual time in {result.cycles} cycles: "
        f"{_plural(result.pods_bound, 'pod')} bound; scheduler decisions took {decisions} "
        f"(writes {writes}), wall time {format_elapsed(result.wall_seconds)}."
    )
    if result.hit_max_time:
        line += " Stopped at the time limit (--max-time) with work left."
    return line


def jobs_table(fig: Figures) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title="Jobs",
        title_justify="left",
        caption="≥: still waiting or running when the simulation ended",
        caption_justify="left",
    )
    table.add_column("job", overflow="fold", max_width=40)
    table.add_column("queue", overflow="fold", max_width=16)
    table.add_column("phase")
    table.add_column("pods", overflow="fold")
    table.add_column("wait", justify="right")
    table.add_column("run", justify="right")
    for job in fig.jobs[:MAX_JOB_ROWS]:
        _add_row(
            table,
            job.label,
            job.queue,
            Text(job.state, style=_PHASE_STYLES.get(job.state, "")),
            format_pods(job.pods),
            wait_text(job, fig.end_time),
            run_text(job, fig.end_time),
        )
    if len(fig.jobs) > MAX_JOB_ROWS:
        table.caption = f"... and {len(fig.jobs) - MAX_JOB_ROWS} more jobs; {table.caption}"
    return table


def queues_table(fig: Figures) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title="Queues (dominant-resource share of the cluster)",
        title_justify="left",
        caption="share: held / deserved, at the end and time-averaged over the run",
        caption_justify="left",
    )
    table.add_column("queue", overflow="fold", min_width=8, max_width=20)
    table.add_column("weight", justify="right")
    table.add_column("started", justify="right")
    table.add_column("mean wait", justify="right")
    table.add_column("p95 wait", justify="right")
    table.add_column("share end", justify="right", no_wrap=True)
    table.add_column("share mean", justify="right", no_wrap=True)
    for queue in fig.queues:
        _add_row(
            table,
            queue.name,
            str(queue.weight),
            f"{queue.started}/{queue.jobs}",
            format_duration(queue.mean_wait),
            format_duration(queue.p95_wait),
            f"{format_percent(queue.held_end)} / {format_percent(queue.deserved_end)}",
            f"{format_percent(queue.held_mean)} / {format_percent(queue.deserved_mean)}",
        )
    return table


def utilisation_table(fig: Figures) -> Table:
    use = fig.utilisation
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title=f"Utilisation over {format_duration(use.span)}",
        title_justify="left",
    )
    table.add_column("")
    table.add_column("mean", justify="right")
    table.add_column("peak", justify="right")
    _add_row(table, "cpu", format_percent(use.cpu_mean), format_percent(use.cpu_peak))
    _add_row(table, "memory", format_percent(use.memory_mean), format_percent(use.memory_peak))
    _add_row(table, "pending pods", "", str(use.pending_peak))
    _add_row(table, "running pods", "", str(use.running_peak))
    return table


def gpu_table(samples: list[GpuSample]) -> Table:
    """GPU allocation and fragmentation over the run: mean, peak, end and a sparkline."""
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title=f"GPUs over time ({format_cards(samples[-1].gpus)} cards)",
        title_justify="left",
        caption="fragmentation: share of free GPU capacity the pods seen so far could not use "
        "(FGD's measure); over: each bar a time-weighted mean, scaled to the peak",
        caption_justify="left",
    )
    table.add_column("")
    table.add_column("mean", justify="right")
    table.add_column("peak", justify="right")
    table.add_column("end", justify="right")
    table.add_column("over time", no_wrap=True)
    for row in summaries(samples):
        metric = row.metric
        if row.peak <= 0 and metric.key not in ALWAYS_SHOWN:
            continue  # no MIG card, no whole GPU, ...: a row of zeros says nothing
        _add_row(
            table,
            metric.label,
            format_metric(metric, row.mean),
            format_metric(metric, row.peak),
            format_metric(metric, row.end),
            row.spark,
        )
    return table


def gpu_map_table(nodes: list[NodeGpus], limit: int | None) -> Table:
    """Each GPU node's cards at the end; ``limit`` nodes, the most fragmented first."""
    shown = most_fragmented(nodes, limit)
    title = f"GPU map at the end ({_plural(len(nodes), 'node')}"
    title += ")" if len(shown) == len(nodes) else f"; the {len(shown)} most fragmented)"
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, title=title, title_justify="left")
    table.add_column("node", overflow="fold", max_width=20)
    table.add_column("frag", justify="right")
    table.add_column("card", overflow="fold", max_width=24)
    table.add_column("mem MiB", justify="right", no_wrap=True)
    table.add_column("cores", justify="right", no_wrap=True)
    table.add_column("held by", overflow="fold", min_width=20, ratio=1)
    for node in shown:
        first = True
        # Text, not markup: a card's model and id come from the node's registration as written.
        for card in node.cards:
            model = short_model(card.model) or card.mode
            _add_row(
                table,
                Text(node.name if first else ""),
                format_cards(node.fragmented) if first else "",
                Text(
                    f"{card.index} {model}{mig_text(card)}"
                    + ("" if card.healthy else " (unhealthy)")
                ),
                f"{card.memory_used}/{card.memory_total}",
                cores_text(card),
                Text(holders_text(card, short=True)),
            )
            first = False
        if node.whole is not None:
            whole = node.whole
            pods = ", ".join(f"{pod_label(p)} ({format_cards(n)})" for p, n in whole.pods)
            model = short_model(whole.model) or "nvidia.com/gpu"
            _add_row(
                table,
                Text(node.name if first else ""),
                "-" if first else "",
                Text(f"{format_cards(whole.total)}× {model}"),
                f"{format_cards(whole.used)} used",
                "-",
                Text(pods or "-"),
            )
    caption = "frag: free GPU (cards) the pods seen so far cannot use; mem: used/total"
    if len(shown) < len(nodes):
        caption = (
            f"... and {len(nodes) - len(shown)} more nodes (--gpu-map all lists every one; "
            f"--output json has them all). {caption}"
        )
    table.caption = caption
    table.caption_justify = "left"
    return table


def pending_table(fig: Figures) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title=f"Why pending ({_plural(len(fig.pending), 'pod')})",
        title_justify="left",
    )
    table.add_column("pods", justify="right")
    table.add_column("which", overflow="fold", max_width=36)
    table.add_column("reason", overflow="fold")
    for group in group_pending(fig.pending):
        names = ", ".join(group.pods[:NAMES_PER_REASON])
        if group.count > NAMES_PER_REASON:
            names += f" +{group.count - NAMES_PER_REASON} more"
        _add_row(table, str(group.count), names, group.reason)
    return table


def virtual_time(timestamp: str) -> str:
    """A virtual timestamp as the offset from the start of the run (``1m30s``)."""
    try:
        return format_duration((parse_time(timestamp) - EPOCH).total_seconds())
    except (ValueError, TypeError):
        return timestamp


def pod_name(key: str) -> str:
    """``ns/name`` → ``name``: the evicted pods' job already names the namespace."""
    return key.rpartition("/")[2]


def waiting_table(waiting: Waiting) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title=f"Jobs that never started ({_plural(waiting.total, 'job')})",
        title_justify="left",
    )
    table.add_column("job", overflow="fold", max_width=32)
    table.add_column("queue", overflow="fold", max_width=16)
    table.add_column("held at")
    table.add_column("why", overflow="fold")
    for job in waiting.jobs:
        _add_row(table, job.label, job.queue, job.stage or "-", job.reason)
    if waiting.total > len(waiting.jobs):
        table.caption = f"... and {waiting.total - len(waiting.jobs)} more jobs"
    return table


def evictions_table(groups: list[EvictionGroup]) -> Table:
    count = sum(len(g.pods) for g in groups)
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title=f"Evictions ({_plural(count, 'pod')})",
        title_justify="left",
        caption="at: virtual time of the first eviction of the row",
        caption_justify="left",
    )
    table.add_column("at", justify="right")
    table.add_column("evicted", overflow="fold", max_width=48)
    table.add_column("pods", overflow="fold", max_width=40)
    table.add_column("for", overflow="fold", max_width=40)
    table.add_column("why")
    for group in groups[:MAX_JOB_ROWS]:
        names = ", ".join(pod_name(p) for p in group.pods[:NAMES_PER_REASON])
        if len(group.pods) > NAMES_PER_REASON:
            names += f" +{len(group.pods) - NAMES_PER_REASON} more"
        _add_row(
            table,
            virtual_time(group.first_at),
            f"{_plural(len(group.pods), 'pod')} of {group.victim_job} (queue {group.victim_queue})",
            names,
            f"{group.preemptor_job} (queue {group.preemptor_queue})"
            if group.preemptor_job
            else "-",
            group.reason,
        )
    if len(groups) > MAX_JOB_ROWS:
        table.caption = f"... and {len(groups) - MAX_JOB_ROWS} more rows; {table.caption}"
    return table


def made_table(made: list[MadeJobs]) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        title="Jobs made by JobFlows and CronJobs",
        title_justify="left",
        caption="stored: still in the cluster at the end (CronJobs delete runs past their "
        "history limits)",
        caption_justify="left",
    )
    table.add_column("kind")
    table.add_column("made by", overflow="fold", max_width=40)
    table.add_column("jobs", justify="right")
    table.add_column("stored", justify="right")
    for entry in made:
        _add_row(table, entry.kind, entry.owner, str(entry.count), str(len(entry.stored)))
    return table


def print_report(
    result: SimulationResult,
    final: dict,
    console: Console | None = None,
    gpu_map: int | None = DEFAULT_MAP_NODES,
) -> None:
    """Print the report: header line, jobs, queues, utilisation, GPUs over time and per node
    (``gpu_map`` nodes, all when None), why jobs never started, evictions, jobs JobFlows and
    CronJobs made, and why pods still wait."""
    console = console or Console()
    fig = figures(result, final)
    sections: list[RenderableType] = [
        jobs_table(fig) if fig.jobs else Text("No jobs (PodGroups) were submitted.")
    ]
    if fig.queues:
        sections.append(queues_table(fig))
    sections.append(utilisation_table(fig))
    samples = gpu_samples(result)
    if samples:
        sections.append(gpu_table(samples))
        nodes = sampler_for(result.scheduler).node_map(result.scheduler) if gpu_map != 0 else []
        if nodes:  # --gpu-map 0: no map
            sections.append(gpu_map_table(nodes, gpu_map))
    waiting = waiting_jobs(result, final, fig.jobs)
    if waiting:
        sections.append(waiting_table(waiting))
    evicted = group_evictions(result.scheduler.recent_evictions)
    if evicted:
        sections.append(evictions_table(evicted))
    made = made_jobs(final)
    if made:
        sections.append(made_table(made))
    sections.append(pending_table(fig) if fig.pending else Text("No pod is left pending."))
    console.print(Text(header_line(result)), highlight=False)
    for section in sections:
        console.print()
        console.print(section)

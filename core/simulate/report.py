"""The human report ``stromboli simulate`` prints without ``--output``: rich tables on stdout."""

from __future__ import annotations

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from stromboli.core.clock import EPOCH, parse_time
from stromboli.core.simulate.engine import SimulationResult
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
        table.add_row(
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
        table.add_row(
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
    table.add_row("cpu", format_percent(use.cpu_mean), format_percent(use.cpu_peak))
    table.add_row("memory", format_percent(use.memory_mean), format_percent(use.memory_peak))
    table.add_row("pending pods", "", str(use.pending_peak))
    table.add_row("running pods", "", str(use.running_peak))
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
        table.add_row(str(group.count), names, group.reason)
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
        table.add_row(job.label, job.queue, job.stage or "-", job.reason)
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
        table.add_row(
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
        table.add_row(entry.kind, entry.owner, str(entry.count), str(len(entry.stored)))
    return table


def print_report(result: SimulationResult, final: dict, console: Console | None = None) -> None:
    """Print the report: header line, jobs, queues, utilisation, why jobs never started,
    evictions, jobs JobFlows and CronJobs made, and why pods still wait."""
    console = console or Console()
    fig = figures(result, final)
    sections: list[RenderableType] = [
        jobs_table(fig) if fig.jobs else Text("No jobs (PodGroups) were submitted.")
    ]
    if fig.queues:
        sections.append(queues_table(fig))
    sections.append(utilisation_table(fig))
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
    console.print(header_line(result), highlight=False)
    for section in sections:
        console.print()
        console.print(section)

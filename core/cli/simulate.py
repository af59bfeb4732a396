"""``stromboli simulate``: run the real scheduler on YAML input, no cluster needed."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from stromboli.core.cli.process import plain_pod_groups_option

if TYPE_CHECKING:
    from stromboli.core.admission.policy import QueuePolicy
    from stromboli.core.scheduler.api.plaingroup import PlainPodGroups
    from stromboli.core.scheduler.metrics import SchedulerMetrics
    from stromboli.core.simulate.engine import SimulationResult

#: The simulator's defaults (``simulate.engine``), repeated so that ``--help`` imports none of
#: the simulator (a test keeps them equal).
DEFAULT_MAX_CRON_RUNS = 1000
DEFAULT_MAX_WORKLOAD_PODS = 1000


def _progress(total: int) -> tuple[Any, Callable[[float, int], None]]:
    """A progress bar on stderr for long runs (arrivals delivered over total)."""
    from rich.progress import BarColumn, Progress, TextColumn

    progress = Progress(
        TextColumn("simulating t={task.fields[t]}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} objects delivered"),
        transient=True,
        console=__import__("rich.console").console.Console(stderr=True),
    )
    task = progress.add_task("simulate", total=total, t="0s")
    return progress, lambda now, delivered: progress.update(
        task, completed=delivered, t=f"{now:.0f}s"
    )


async def _simulate(
    files: tuple[str, ...],
    conf: str | None,
    max_time: float,
    show_progress: bool,
    metrics: SchedulerMetrics | None = None,
    max_cron_runs: int = DEFAULT_MAX_CRON_RUNS,
    queue_policy: QueuePolicy | None = None,
    max_workload_pods: int = DEFAULT_MAX_WORKLOAD_PODS,
    plain_pod_groups: PlainPodGroups = "object",
) -> tuple[SimulationResult, dict]:
    from stromboli.core.simulate.engine import Simulation
    from stromboli.core.simulate.loader import load
    from stromboli.core.simulate.output import as_list

    objects = load(list(files))
    progress = None
    on_progress = None
    if show_progress:
        progress, on_progress = _progress(len(objects))
        progress.start()
    try:
        result = await Simulation(
            objects,
            conf,
            max_time,
            on_progress,
            metrics,
            max_cron_runs,
            queue_policy,
            max_workload_pods=max_workload_pods,
            plain_pod_groups=plain_pod_groups,
        ).run()
    finally:
        if progress is not None:
            progress.stop()
    return result, await as_list(result.store)


def _gpu_map_nodes(value: str) -> int | None:
    """``--gpu-map``: a node count, or None for all."""
    if value.strip().lower() == "all":
        return None
    try:
        count = int(value)
    except ValueError:
        count = -1
    if count < 0:
        raise click.BadParameter(
            f"{value!r}: expected a number of nodes or 'all'", param_hint="--gpu-map"
        )
    return count


@click.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--example",
    "example",
    metavar="NAME",
    help="Also simulate a packaged example (gang-waits, gpu/mig, frameworks/rayjob, ...); "
    "'--example list' lists them all, with the files each runs with.",
)
@click.option(
    "--scheduler-conf",
    type=click.Path(exists=True, dir_okay=False),
    help="Scheduler configuration file (Volcano's format); Volcano's default when omitted.",
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["json", "yaml"]),
    help="Print the final state as a Kubernetes List instead of the report.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="Also write the report with charts to this HTML file.",
)
@click.option(
    "--metrics",
    "metrics_path",
    type=click.Path(dir_okay=False),
    help="Also write the scheduler's Prometheus metrics, as /metrics would serve them at the "
    "end of the run, to this file (text exposition format).",
)
@click.option(
    "--max-time",
    default=None,
    help="Stop the virtual clock here (a duration such as 2h); default 30 days.",
)
@click.option(
    "--max-cron-runs",
    default=DEFAULT_MAX_CRON_RUNS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Jobs each CronJob may create in one run; then the simulator suspends it (a cron "
    "timer never runs out, so this bounds the run).",
)
@click.option(
    "--max-workload-pods",
    default=DEFAULT_MAX_WORKLOAD_PODS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Pods each Deployment, StatefulSet or batch Job may create in one run (pods that end "
    "are replaced, so this bounds the run).",
)
@click.option(
    "--queue-policy",
    "queue_policy_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Queue policy file (YAML), enforced on the input as the webhook enforces it: "
    "default queues, the queues each namespace may use, per-queue limits.",
)
@plain_pod_groups_option
@click.option(
    "--gpu-map",
    "gpu_map",
    default="10",
    show_default=True,
    metavar="N|all",
    help="GPU nodes the report's per-node GPU map lists, the most fragmented first; 'all' "
    "lists every one, 0 none (--output json and --html always have them all).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr (default: when stderr is a terminal).",
)
@click.option(
    "--fail-on-rejection",
    is_flag=True,
    help="Exit 1 when an object was refused (the run still goes to the end); for CI "
    "pipelines that validate manifests.",
)
def simulate(
    files: tuple[str, ...],
    scheduler_conf: str | None,
    output: str | None,
    html_path: str | None,
    metrics_path: str | None,
    max_time: str | None,
    max_cron_runs: int,
    max_workload_pods: int,
    queue_policy_path: str | None,
    plain_pod_groups: str,
    progress: bool | None,
    fail_on_rejection: bool,
    example: str | None,
    gpu_map: str,
) -> None:
    """Simulate FILES (Kubernetes YAML: Nodes, Queues, PodGroups, Pods, vcjobs, Deployments,
    StatefulSets, batch Jobs, CronJobs, ...) on a virtual clock.

    Annotations drive the run: sim.stromboli.dev/submit-at (when an object arrives),
    sim.stromboli.dev/runtime (how long a pod runs once bound) and
    sim.stromboli.dev/exit-code (non-zero makes the pod fail).
    """
    if example is not None:
        from stromboli.core.cli import examples

        if example == examples.LIST:
            click.echo(examples.listing())
            return
        try:
            files = (str(examples.find_example(example).path), *files)
        except examples.ExampleNotFound as err:
            raise click.UsageError(str(err)) from None
    if not files:
        raise click.UsageError("give FILES to simulate, or --example NAME (--example list)")
    map_nodes = _gpu_map_nodes(gpu_map)
    import orjson
    import yaml

    from stromboli.core.admission.policy import load_policy
    from stromboli.core.api.durations import parse_duration
    from stromboli.core.scheduler.api.plaingroup import plain_pod_groups_mode
    from stromboli.core.scheduler.conf import ConfigError
    from stromboli.core.scheduler.metrics import SchedulerMetrics
    from stromboli.core.simulate.engine import DEFAULT_MAX_TIME
    from stromboli.core.simulate.loader import SimulationInputError

    try:
        limit = parse_duration(max_time, "--max-time") if max_time else DEFAULT_MAX_TIME
        show = sys.stderr.isatty() if progress is None else progress
        metrics = SchedulerMetrics() if metrics_path else None
        policy = load_policy(queue_policy_path) if queue_policy_path else None
        result, final = asyncio.run(
            _simulate(
                files,
                scheduler_conf,
                limit,
                show,
                metrics,
                max_cron_runs,
                policy,
                max_workload_pods,
                plain_pod_groups_mode(plain_pod_groups),
            )
        )
    except (SimulationInputError, ConfigError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    for rejection in result.rejections:
        click.echo(f"rejected: {rejection}", err=True)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if metrics is not None and metrics_path:
        try:
            Path(metrics_path).write_bytes(metrics.exposition())
        except OSError as err:
            raise click.ClickException(f"--metrics: cannot write {metrics_path}: {err}") from None
    if html_path:
        from stromboli.core.simulate.html import write_html

        write_html(Path(html_path), result, final)
    if output:
        from stromboli.core.simulate.output import with_gpu

        final = with_gpu(final, result)
    if output == "json":
        sys.stdout.buffer.write(orjson.dumps(final, option=orjson.OPT_INDENT_2) + b"\n")
    elif output == "yaml":
        yaml.safe_dump(final, sys.stdout, sort_keys=False)
    else:
        from stromboli.core.simulate.report import print_report

        print_report(result, final, gpu_map=map_nodes)
    if fail_on_rejection and result.rejections:
        raise SystemExit(1)

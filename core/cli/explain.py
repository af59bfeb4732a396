"""``stromboli explain POD``: every node's verdict for one pod, plugin by plugin."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from stromboli.core.scheduler.conf import ConfigError
from stromboli.core.scheduler.explain import Explanation, explain, find_task
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import SimulationInputError, load


def session_over(scheduler: Scheduler) -> Session:
    ssn = Session(scheduler.cache.snapshot(), scheduler.config.current(), scheduler.clock.now())
    ssn.open()
    return ssn


def render(result: Explanation, console: Console, limit: int) -> None:
    task, job = result.task, result.job
    condition = next(
        (
            c
            for c in (task.pod.get("status") or {}).get("conditions") or ()
            if c.get("type") == "PodScheduled"
        ),
        None,
    )
    console.print(
        f"[bold]Pod {task.namespace}/{task.name}[/bold]: {task.status.label}"
        + (f" on {task.node_name}" if task.node_name else "")
    )
    console.print(
        f"PodGroup {job.namespace}/{job.name}: phase {job.phase}, minMember {job.min_available}, "
        f"queue {job.queue}, {job.ready_task_num()} ready / {len(job.tasks)} tasks"
    )
    if condition is not None and condition.get("status") == "False":
        console.print(f"Last reason: {condition.get('reason')}: {condition.get('message')}")
    if result.pre_predicate:
        console.print(f"Rejected before node checks: {result.pre_predicate}")
    feasible = result.feasible()
    console.print(f"{len(feasible)} of {len(result.nodes)} nodes can take the pod now.")
    if feasible:
        plugins = sorted({p for n in feasible for p in n.scores})
        table = Table("node", *plugins, "total", title="Feasible nodes, best first")
        for verdict in feasible[:limit]:
            table.add_row(
                verdict.node,
                *(f"{verdict.scores.get(p, 0):.1f}" for p in plugins),
                f"{verdict.total:.1f}",
            )
        console.print(table)
    rejected = result.infeasible()
    if rejected:
        table = Table("node", "check", "reason", title="Nodes that cannot take it")
        for verdict in rejected[:limit]:
            for index, (who, why) in enumerate(verdict.failures):
                table.add_row(verdict.node if index == 0 else "", who, why)
        if len(rejected) > limit:
            table.add_row(f"... {len(rejected) - limit} more", "", "")
        console.print(table)


async def _from_simulation(files: tuple[str, ...], conf: str | None) -> Scheduler:
    simulation = Simulation(load(list(files)), conf)
    await simulation.run()
    await simulation.scheduler.informer.pump()
    return simulation.scheduler


@click.command(name="explain")
@click.argument("pod")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option(
    "--simulate",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Explain the pod's state at the end of simulating these files.",
)
@click.option(
    "--scheduler-conf",
    type=click.Path(exists=True, dir_okay=False),
    help="Scheduler configuration (Volcano's format).",
)
@click.option(
    "--kubeconfig",
    envvar="KUBECONFIG",
    help="Explain against a live cluster (default when --simulate is not given).",
)
@click.option("--limit", default=20, show_default=True, help="Nodes to list per table.")
def explain_command(
    pod: str,
    namespace: str,
    files: tuple[str, ...],
    scheduler_conf: str | None,
    kubeconfig: str | None,
    limit: int,
) -> None:
    """Show why POD is or is not placed: each node's verdict from every plugin."""
    try:
        if files:
            scheduler = asyncio.run(_from_simulation(files, scheduler_conf))
        else:
            scheduler = asyncio.run(_from_cluster(kubeconfig, scheduler_conf))
    except (SimulationInputError, ConfigError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    ssn = session_over(scheduler)
    task = find_task(ssn, namespace, pod)
    if task is None:
        raise click.ClickException(
            f"pod {namespace}/{pod} is not one the scheduler follows "
            "(unknown, another scheduler's, or without a PodGroup in an existing queue)"
        )
    render(explain(ssn, task), Console(), limit)


async def _from_cluster(kubeconfig: str | None, conf: str | None) -> Scheduler:
    from stromboli.core.clock import SystemClock
    from stromboli.core.cluster.kube import KubeConfig, KubeStore
    from stromboli.core.scheduler.builtins import register_builtins
    from stromboli.core.scheduler.conf import ConfigSource

    register_builtins()
    store = KubeStore(KubeConfig.load(kubeconfig))
    try:
        scheduler = Scheduler(store, SystemClock(), ConfigSource(Path(conf) if conf else None))
        await scheduler.informer.start()
        return scheduler
    finally:
        await store.close()

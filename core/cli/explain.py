"""``stromboli explain TARGET``: why a pod, a vcjob, a PodGroup or a queue waits.

TARGET is a pod's name (or ``pod/NAME``), ``job/NAME`` (a vcjob), ``podgroup/NAME`` or
``queue/NAME``. The answer comes from a scheduling session opened over the current state
(the live cluster, or the end of a simulation) with the configured plugins, never written
back: what the next cycle would decide. Heavy modules are imported inside the command, so
``stromboli --help`` does not pay for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from stromboli.core.cli.process import plain_pod_groups_option

if TYPE_CHECKING:
    from rich.console import Console

    from stromboli.core.cluster.store import ClusterStore
    from stromboli.core.scheduler.api.plaingroup import PlainPodGroups
    from stromboli.core.scheduler.explain import Explanation
    from stromboli.core.scheduler.explain_job import JobExplanation
    from stromboli.core.scheduler.explain_queue import QueueExplanation
    from stromboli.core.scheduler.framework.session import Session
    from stromboli.core.scheduler.scheduler import Scheduler

#: TARGET prefixes → the kind explained (kubectl's singular, plural and short names).
KINDS = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "job": "job",
    "jobs": "job",
    "vcjob": "job",
    "vcjobs": "job",
    "vj": "job",
    "podgroup": "podgroup",
    "podgroups": "podgroup",
    "pg": "podgroup",
    "queue": "queue",
    "queues": "queue",
    "q": "queue",
}
VCJOB_API = "batch.volcano.sh/v1alpha1"


def parse_target(target: str) -> tuple[str, str]:
    """``job/train`` → (``job``, ``train``); a bare name is a pod."""
    kind, slash, name = target.partition("/")
    if not slash:
        return "pod", target
    known = KINDS.get(kind.lower())
    if known is None or not name or "/" in name:
        raise click.BadParameter(
            f"{target!r}: expected NAME, pod/NAME, job/NAME, podgroup/NAME or queue/NAME",
            param_hint="TARGET",
        )
    return known, name


def session_over(scheduler: Scheduler) -> Session:
    from stromboli.core.scheduler.framework.session import Session

    ssn = Session(scheduler.cache.snapshot(), scheduler.config.current(), scheduler.clock.now())
    ssn.open()
    return ssn


# -- pods -------------------------------------------------------------------------------------


def render(result: Explanation, console: Console, limit: int) -> None:
    """Print a pod's explanation. Every string is a rich ``Text``, never markup: names,
    reasons and messages come from the user's objects, and ``[/x]`` in one would crash the
    command (``[bold]`` restyle it)."""
    from rich.table import Table
    from rich.text import Text

    def say(*parts: str | tuple[str, str]) -> None:
        console.print(Text.assemble(*parts), highlight=False)

    def row(table: Table, *cells: str) -> None:
        table.add_row(*(Text(c) for c in cells))

    task, job = result.task, result.job
    condition = next(
        (
            c
            for c in (task.pod.get("status") or {}).get("conditions") or ()
            if c.get("type") == "PodScheduled"
        ),
        None,
    )
    say(
        (f"Pod {task.namespace}/{task.name}", "bold"),
        f": {task.status.label}" + (f" on {task.node_name}" if task.node_name else ""),
    )
    say(
        f"PodGroup {job.namespace}/{job.name}{' (in memory)' if job.in_memory else ''}: "
        f"phase {job.phase}, minMember {job.min_available}, "
        f"queue {job.queue}, {job.ready_task_num()} ready / {len(job.tasks)} tasks"
    )
    if condition is not None and condition.get("status") == "False":
        say(f"Last reason: {condition.get('reason')}: {condition.get('message')}")
    if result.pre_predicate:
        say(f"Rejected before node checks: {result.pre_predicate}")
    feasible = result.feasible()
    say(f"{len(feasible)} of {len(result.nodes)} nodes can take the pod now.")
    if feasible:
        plugins = sorted({p for n in feasible for p in n.scores})
        table = Table("node", title="Feasible nodes, best first")
        for plugin in plugins:
            table.add_column(Text(plugin))
        table.add_column("total")
        for verdict in feasible[:limit]:
            row(
                table,
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
                row(table, verdict.node if index == 0 else "", who, why)
        if len(rejected) > limit:
            row(table, f"... {len(rejected) - limit} more", "", "")
        console.print(table)


def pod_json(result: Explanation) -> dict:
    task, job = result.task, result.job
    return {
        "pod": task.key,
        "status": task.status.label,
        "node": task.node_name or None,
        "podgroup": f"{job.namespace}/{job.name}",
        "podgroupInMemory": job.in_memory,
        "queue": job.queue,
        "prePredicate": result.pre_predicate,
        "feasible": [{"node": n.node, "scores": n.scores} for n in result.feasible()],
        "infeasible": [
            {"node": n.node, "failures": [{"check": w, "reason": r} for w, r in n.failures]}
            for n in result.infeasible()
        ],
    }


# -- jobs and queues ----------------------------------------------------------------------------


def job_lines(kind: str, name: str, result: JobExplanation, limit: int) -> list[str]:
    from stromboli.core.scheduler.explain_gang import pods_text

    job = result.job
    head = f"Job {job.namespace}/{name} (PodGroup {job.name})" if kind == "job" else ""
    head = head or f"PodGroup {job.namespace}/{job.name}"
    lines = [
        f"{head}: phase {job.phase}, queue {job.queue}, minMember {job.min_available}, "
        f"{len(job.tasks)} pods",
        f"Why: {result.sentence}",
    ]
    if result.enqueue is not None and result.enqueue.gates:
        lines.append("Enqueue gates:")
        for gate in result.enqueue.gates:
            who = f" ({gate.plugin})" if gate.plugin and gate.plugin != gate.gate else ""
            lines.append(f"  {gate.gate}{who}: {gate.verdict}: {gate.sentence}")
    if result.gang is not None and result.gang.placed:
        lines.append("Pods that fit now:")
        for pod, node in result.gang.placed[:limit]:
            lines.append(f"  {pod} → {node}")
        if len(result.gang.placed) > limit:
            lines.append(f"  ... {len(result.gang.placed) - limit} more")
    if result.gang is not None and result.gang.lacks:
        lines.append("Pods that fit nowhere:")
        for lack, pods in result.gang.lacks.items():
            lines.append(f"  {pods_text(pods, limit)}: {lack}")
    lines.extend(result.notes)
    return lines


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def queue_lines(result: QueueExplanation) -> list[str]:
    lines = [f"Why: {result.sentence()}", _sentence_case(result.waiting_sentence())]
    if result.running:
        lines.append(f"Running: {len(result.running)} ({', '.join(result.running)})")
    if result.plugin:
        lines.append(f"Amounts from the {result.plugin} plugin of this session.")
    return lines


# -- reading the state ----------------------------------------------------------------------------


@dataclass(slots=True)
class State:
    scheduler: Scheduler
    #: The vcjob asked about, when TARGET is job/NAME and it exists (None otherwise).
    vcjob: dict | None = None


async def _vcjob(store: ClusterStore, kind: str, name: str, namespace: str) -> dict | None:
    from stromboli.core.cluster.errors import NotFoundError

    if kind != "job":
        return None
    try:
        return await store.get(VCJOB_API, "Job", name, namespace)
    except NotFoundError:
        return None


async def _from_simulation(
    files: tuple[str, ...],
    conf: str | None,
    kind: str,
    name: str,
    namespace: str,
    plain_pod_groups: PlainPodGroups,
) -> State:
    from stromboli.core.simulate.engine import Simulation
    from stromboli.core.simulate.loader import load

    simulation = Simulation(load(list(files)), conf, plain_pod_groups=plain_pod_groups)
    await simulation.run()
    await simulation.scheduler.informer.pump()
    return State(simulation.scheduler, await _vcjob(simulation.store, kind, name, namespace))


async def _from_cluster(
    kubeconfig: str | None, conf: str | None, kind: str, name: str, namespace: str
) -> State:
    from stromboli.core.clock import SystemClock
    from stromboli.core.cluster.kube import KubeConfig, KubeStore
    from stromboli.core.scheduler.builtins import register_builtins
    from stromboli.core.scheduler.conf import ConfigSource
    from stromboli.core.scheduler.scheduler import Scheduler

    register_builtins()
    store = KubeStore(KubeConfig.load(kubeconfig))
    try:
        # Plain pods are grouped in memory whatever the cluster's mode: a stored PodGroup of
        # the same name wins, so this explains both modes' pods, enrolled or not yet.
        scheduler = Scheduler(
            store,
            SystemClock(),
            ConfigSource(Path(conf) if conf else None),
            plain_pod_groups="memory",
        )
        await scheduler.informer.start()
        return State(scheduler, await _vcjob(store, kind, name, namespace))
    finally:
        await store.close()


def _emit(lines: list[str], document: dict, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        click.echo("\n".join(lines))


@click.command(name="explain")
@click.argument("target", metavar="TARGET")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option(
    "--simulate",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Explain the state at the end of simulating these files.",
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
@click.option("--limit", default=20, show_default=True, help="Nodes or pods to list per table.")
@plain_pod_groups_option
@click.option(
    "-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def explain_command(
    target: str,
    namespace: str,
    files: tuple[str, ...],
    scheduler_conf: str | None,
    kubeconfig: str | None,
    limit: int,
    output: str,
    plain_pod_groups: str,
) -> None:
    """Show why TARGET waits: a pod (NAME or pod/NAME), job/NAME (a vcjob), podgroup/NAME or
    queue/NAME. ``--plain-pod-groups`` sets the simulated controller's and scheduler's mode
    (a live cluster is read in both modes at once)."""
    import asyncio

    from stromboli.core.scheduler.api.plaingroup import plain_pod_groups_mode
    from stromboli.core.scheduler.conf import ConfigError
    from stromboli.core.simulate.loader import SimulationInputError

    kind, name = parse_target(target)
    try:
        if files:
            mode = plain_pod_groups_mode(plain_pod_groups)
            state = asyncio.run(
                _from_simulation(files, scheduler_conf, kind, name, namespace, mode)
            )
        else:
            state = asyncio.run(_from_cluster(kubeconfig, scheduler_conf, kind, name, namespace))
    except (SimulationInputError, ConfigError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    ssn = session_over(state.scheduler)
    if kind == "pod":
        _explain_pod(ssn, namespace, name, limit, output)
    elif kind == "queue":
        _explain_queue(ssn, name, output)
    else:
        _explain_job(ssn, state, kind, namespace, name, limit, output)


def _explain_pod(ssn: Session, namespace: str, name: str, limit: int, output: str) -> None:
    from stromboli.core.scheduler.explain import explain, find_task

    task = find_task(ssn, namespace, name)
    if task is None:
        raise click.ClickException(
            f"pod {namespace}/{name} is not one the scheduler follows "
            "(unknown, another scheduler's, or without a PodGroup in an existing queue)"
        )
    result = explain(ssn, task)
    if output == "json":
        _emit([], pod_json(result), output)
        return
    from rich.console import Console

    render(result, Console(), limit)


def _explain_queue(ssn: Session, name: str, output: str) -> None:
    from stromboli.core.scheduler.explain_queue import explain_queue

    queue = ssn.queues.get(name)
    if queue is None:
        raise click.ClickException(f"queue {name} does not exist")
    result = explain_queue(ssn, queue)
    _emit(queue_lines(result), result.as_dict(), output)


def _explain_job(
    ssn: Session,
    state: State,
    kind: str,
    namespace: str,
    name: str,
    limit: int,
    output: str,
) -> None:
    from stromboli.core.scheduler.explain_job import (
        explain_job,
        explain_unqueued,
        find_podgroup,
        find_unqueued,
        find_vcjob,
    )

    job = find_vcjob(ssn, namespace, name) if kind == "job" else find_podgroup(ssn, namespace, name)
    if job is not None:
        result = explain_job(ssn, job)
    elif (unqueued := find_unqueued(state.scheduler.cache, kind, namespace, name)) is not None:
        result = explain_unqueued(unqueued)
    elif kind == "job" and state.vcjob is not None:
        phase = ((state.vcjob.get("status") or {}).get("state") or {}).get("phase") or "Pending"
        sentence = (
            f"job {namespace}/{name} ({phase}) has no PodGroup the scheduler follows: the job "
            "controller creates it (is the controller running?), or the job has finished"
        )
        _emit([f"Why: {sentence}"], {"job": f"{namespace}/{name}", "reason": sentence}, output)
        return
    else:
        what = "vcjob" if kind == "job" else "podgroup"
        raise click.ClickException(
            f"{what} {namespace}/{name} does not exist"
            + (" (or belongs to another scheduler)" if kind == "podgroup" else "")
        )
    document = result.as_dict()
    if kind == "job":
        document["job"] = f"{namespace}/{name}"
    _emit(job_lines(kind, name, result, limit), document, output)

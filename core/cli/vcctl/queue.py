"""``stromboli queue``: vcctl's queue commands (create, list, get, operate, delete).

``list`` and ``get`` count each queue's PodGroups by phase themselves, as vcctl does (the queue
status does not carry the counts). ``operate -a open|close`` creates an ``OpenQueue`` /
``CloseQueue`` Command for the queue controller; ``-a update`` merge-patches the weight.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import click

from stromboli.core.api import constants as k
from stromboli.core.cli.vcctl.common import (
    CommandDecorator,
    VcctlError,
    checked,
    connection_options,
    echo,
    name_of,
    run,
)
from stromboli.core.cli.vcctl.job import command_for
from stromboli.core.cluster.store import ClusterStore

QUEUE = (k.SCHEDULING_V1BETA1, "Queue")
PODGROUP = (k.SCHEDULING_V1BETA1, "PodGroup")
COMMAND_NAMESPACE = "default"
"""vcctl creates queue Commands in the ``default`` namespace."""
COLUMNS = (
    "Name",
    "Weight",
    "State",
    "Parent",
    "Inqueue",
    "Pending",
    "Running",
    "Unknown",
    "Completed",
)
PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
ACTIONS = {"open": k.Action.OPEN_QUEUE, "close": k.Action.CLOSE_QUEUE}


@click.group("queue")
def queue() -> None:
    """Create, list, inspect, open, close and delete queues (vcctl queue)."""


def name_option(default: str = "") -> CommandDecorator:
    return click.option(
        "-n", "--name", default=default, show_default=bool(default), help="Name of the queue."
    )


def podgroup_counts(podgroups: list[dict]) -> dict[str, Counter[str]]:
    """PodGroups per queue and phase."""
    counts: dict[str, Counter[str]] = {}
    for pg in podgroups:
        name = (pg.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE
        phase = (pg.get("status") or {}).get("phase") or ""
        counts.setdefault(name, Counter())[phase] += 1
    return counts


def format_queues(queues: Sequence[Mapping[str, Any]], counts: Mapping[str, Counter[str]]) -> str:
    """vcctl's queue table: a 25-wide name column, then 8-wide columns."""

    def line(cells: list[Any]) -> str:
        return f"{cells[0]!s:<25}" + "".join(f"{c!s:<8}" for c in cells[1:]) + "\n"

    out = line(list(COLUMNS))
    for q in queues:
        spec = q.get("spec") or {}
        mine = counts.get(name_of(q), Counter())
        out += line(
            [
                name_of(q),
                int(spec.get("weight") or 0),
                (q.get("status") or {}).get("state") or "",
                spec.get("parent") or "",
                *(mine[p] for p in PHASES),
            ]
        )
    return out


@queue.command("create")
@connection_options
@name_option("test")
@click.option("-w", "--weight", default=1, show_default=True, help="Weight of the queue.")
@click.option("-S", "--state", default="Open", show_default=True, help="State of the queue.")
def create_queue(master: str, kubeconfig: str, name: str, weight: int, state: str) -> None:
    """Create a queue."""
    obj = {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
        "status": {"state": state},
    }

    async def action(store: ClusterStore) -> None:
        created = await store.create(obj)
        # The API server drops the status of a create (status subresource) and the queue
        # controller opens queues without a state; write any other state asked for, so that
        # --state means what it says.
        current = (created.get("status") or {}).get("state")
        if state and state != k.QueueState.OPEN and current != state:
            await store.patch(*QUEUE, name, {"status": {"state": state}}, subresource="status")

    run(kubeconfig, master, action)


@queue.command("delete")
@connection_options
@name_option()
@checked
def delete_queue(master: str, kubeconfig: str, name: str) -> None:
    """Delete a queue."""
    if not name:
        raise VcctlError("queue name must be specified")

    async def action(store: ClusterStore) -> None:
        await store.delete(*QUEUE, name)

    run(kubeconfig, master, action)


@queue.command("list")
@connection_options
def list_queues(master: str, kubeconfig: str) -> None:
    """List all queues with the number of PodGroups in each phase."""

    async def action(store: ClusterStore) -> None:
        queues = sorted((await store.list(*QUEUE)).items, key=name_of)
        if not queues:
            click.echo("No resources found")
            return
        podgroups = (await store.list(*PODGROUP)).items
        echo(format_queues(queues, podgroup_counts(podgroups)))

    run(kubeconfig, master, action)


@queue.command("get")
@connection_options
@name_option()
@checked
def get_queue(master: str, kubeconfig: str, name: str) -> None:
    """Show one queue with the number of its PodGroups in each phase."""
    if not name:
        raise VcctlError("name is mandatory to get the particular queue details")

    async def action(store: ClusterStore) -> None:
        obj = await store.get(*QUEUE, name)
        podgroups = (await store.list(*PODGROUP)).items
        echo(format_queues([obj], podgroup_counts(podgroups)))

    run(kubeconfig, master, action)


@queue.command("operate")
@connection_options
@name_option()
@click.option("-w", "--weight", default=0, help="New weight (with --action update).")
@click.option("-a", "--action", "verb", default="",
              help="What to do with the queue: open, close or update.")  # fmt: skip
@checked
def operate_queue(master: str, kubeconfig: str, name: str, weight: int, verb: str) -> None:
    """Open or close a queue, or change its weight."""
    if not name:
        raise VcctlError("queue name must be specified")
    if verb == "update":
        if weight <= 0:
            raise VcctlError(
                f"when update queue {name}, weight must be specified, "
                "the value must be greater than 0"
            )

        async def patch(store: ClusterStore) -> None:
            await store.patch(*QUEUE, name, {"spec": {"weight": weight}})

        run(kubeconfig, master, patch)
        return
    if not verb:
        raise VcctlError("action can not be null")
    if verb not in ACTIONS:
        raise VcctlError(f"action {verb} invalid, valid actions are open, close and update")

    async def command(store: ClusterStore) -> None:
        target = await store.get(*QUEUE, name)
        target.setdefault("apiVersion", k.SCHEDULING_V1BETA1)
        target.setdefault("kind", "Queue")
        await store.create(command_for(target, ACTIONS[verb], COMMAND_NAMESPACE))

    run(kubeconfig, master, command)

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
    fit,
    name_of,
    output_option,
    run,
    terminal_width,
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


#: Columns a narrow terminal loses first (Name, State and Running stay).
NARROW_DROP = ("Unknown", "Parent", "Completed", "Inqueue", "Weight", "Pending")
#: What ``-o wide`` adds: the queue's bounds, as ``cpu=4,memory=8Gi``.
WIDE_COLUMNS = (("Capability", "capability"), ("Deserved", "deserved"), ("Guarantee", "guarantee"))


def _amounts(value: Any) -> str:
    if isinstance(value, Mapping) and isinstance(value.get("resource"), Mapping):
        value = value["resource"]  # guarantee: {resource: {...}}
    if not isinstance(value, Mapping) or not value:
        return "<none>"
    return ",".join(f"{name}={amount}" for name, amount in sorted(value.items()))


def format_queues(
    queues: Sequence[Mapping[str, Any]],
    counts: Mapping[str, Counter[str]],
    wide: bool = False,
    width: int | None = None,
) -> str:
    """vcctl's queue table: a 25-wide name column, then 8-wide columns; ``wide`` adds the
    queue's capability, deserved and guarantee; narrowed to ``width`` if it does not fit."""

    def line(cells: list[str]) -> str:
        fixed = f"{cells[0]:<25}" + "".join(f"{c:<8}" for c in cells[1 : len(COLUMNS)])
        extra = cells[len(COLUMNS) :]
        return (
            fixed + "".join(f"   {c:<{w}}" for c, w in zip(extra, extra_widths, strict=True)) + "\n"
        )

    rows = [list(COLUMNS) + ([title for title, _ in WIDE_COLUMNS] if wide else [])]
    for q in queues:
        spec = q.get("spec") or {}
        mine = counts.get(name_of(q), Counter())
        row = [
            name_of(q),
            str(int(spec.get("weight") or 0)),
            str((q.get("status") or {}).get("state") or ""),
            str(spec.get("parent") or ""),
            *(str(mine[p]) for p in PHASES),
        ]
        if wide:
            row += [_amounts(spec.get(field)) for _, field in WIDE_COLUMNS]
        rows.append(row)
    extra_widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS), len(rows[0]))]
    full = "".join(line(row).rstrip() + "\n" if wide else line(row) for row in rows)
    return full if wide else fit(rows, full, width, NARROW_DROP)


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
        click.echo(f"create queue {name} successfully (weight {weight}, state {state})")

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
        click.echo(f"delete queue {name} successfully")

    run(kubeconfig, master, action)


@queue.command("list")
@connection_options
@output_option
def list_queues(master: str, kubeconfig: str, output: str | None) -> None:
    """List all queues with the number of PodGroups in each phase."""

    async def action(store: ClusterStore) -> None:
        queues = sorted((await store.list(*QUEUE)).items, key=name_of)
        if not queues:
            click.echo("No resources found")
            return
        podgroups = (await store.list(*PODGROUP)).items
        echo(format_queues(queues, podgroup_counts(podgroups), output == "wide", terminal_width()))

    run(kubeconfig, master, action)


@queue.command("get")
@connection_options
@name_option()
@output_option
@checked
def get_queue(master: str, kubeconfig: str, name: str, output: str | None) -> None:
    """Show one queue with the number of its PodGroups in each phase."""
    if not name:
        raise VcctlError("name is mandatory to get the particular queue details")

    async def action(store: ClusterStore) -> None:
        obj = await store.get(*QUEUE, name)
        podgroups = (await store.list(*PODGROUP)).items
        echo(format_queues([obj], podgroup_counts(podgroups), output == "wide", terminal_width()))

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
            before = int(((await store.get(*QUEUE, name)).get("spec") or {}).get("weight") or 0)
            await store.patch(*QUEUE, name, {"spec": {"weight": weight}})
            click.echo(f"update queue {name} successfully: weight {before} -> {weight}")

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
        made = await store.create(command_for(target, ACTIONS[verb], COMMAND_NAMESPACE))
        click.echo(
            f"{verb} queue {name} successfully: Command {COMMAND_NAMESPACE}/{name_of(made)} "
            f"({ACTIONS[verb]}) created for the queue controller"
        )

    run(kubeconfig, master, command)

"""``stromboli jobflow`` and ``stromboli jobtemplate``: vcctl's flow commands.

Both kinds get ``create -f``, ``list``, ``get``, ``delete`` (by name or by the file they were
created from) and ``describe`` (YAML or JSON); JobFlows list with their phase and age.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

from stromboli.core.api import constants as k
from stromboli.core.cli.vcctl.common import (
    CommandDecorator,
    VcctlError,
    age,
    by_namespace_and_name,
    checked,
    connection_options,
    dump,
    echo,
    meta,
    name_of,
    namespace_of,
    read_documents,
    run,
    table,
)
from stromboli.core.cluster.errors import ApiError
from stromboli.core.cluster.store import ClusterStore


@dataclass(frozen=True)
class FlowKind:
    kind: str
    noun: str
    """How messages and help name it: ``jobflow`` / ``job template``."""
    with_phase: bool

    @property
    def key(self) -> tuple[str, str]:
        return (k.FLOW_V1ALPHA1, self.kind)


JOBFLOW = FlowKind("JobFlow", "jobflow", with_phase=True)
JOBTEMPLATE = FlowKind("JobTemplate", "job template", with_phase=False)


def format_flows(kind: FlowKind, objects: Sequence[Mapping[str, Any]]) -> str:
    """``Name Namespace [Phase Age]`` columns, each as wide as its content plus 4."""
    if kind.with_phase:
        rows: list[tuple[str, ...]] = [("Name", "Namespace", "Phase", "Age")]
        rows += [
            (
                name_of(o),
                namespace_of(o),
                ((o.get("status") or {}).get("state") or {}).get("phase") or "",
                age(meta(o).get("creationTimestamp")),
            )
            for o in objects
        ]
    else:
        rows = [("Name", "Namespace")]
        rows += [(name_of(o), namespace_of(o)) for o in objects]
    return table(rows)


def _documents(kind: FlowKind, path: str) -> list[dict]:
    documents = read_documents(path)
    for document in documents:
        document.setdefault("apiVersion", k.FLOW_V1ALPHA1)
        document.setdefault("kind", kind.kind)
        document.setdefault("metadata", {}).setdefault("namespace", "default")
    return documents


def _create(kind: FlowKind, master: str, kubeconfig: str, file: str) -> None:
    documents = _documents(kind, file)

    async def action(store: ClusterStore) -> None:
        for document in documents:
            try:
                await store.create(document)
            except ApiError as error:
                click.echo(f"Failed to create {kind.kind}: {error}")
                continue
            click.echo(f"Created {kind.kind}: {namespace_of(document)}/{name_of(document)}")

    run(kubeconfig, master, action)


def _list(kind: FlowKind, master: str, kubeconfig: str, namespace: str | None) -> None:
    async def action(store: ClusterStore) -> None:
        objects = by_namespace_and_name((await store.list(*kind.key, namespace=namespace)).items)
        if not objects:
            click.echo("No resources found")
            return
        echo(format_flows(kind, objects))

    run(kubeconfig, master, action)


def _get(kind: FlowKind, master: str, kubeconfig: str, name: str, namespace: str) -> None:
    if not name:
        raise VcctlError(f"name is mandatory to get the particular {kind.noun} details")

    async def action(store: ClusterStore) -> None:
        echo(format_flows(kind, [await store.get(*kind.key, name, namespace)]))

    run(kubeconfig, master, action)


def _delete(
    kind: FlowKind, master: str, kubeconfig: str, name: str, namespace: str, file: str
) -> None:
    if file:
        documents = _documents(kind, file)

        async def from_file(store: ClusterStore) -> None:
            for document in documents:
                try:
                    await store.delete(*kind.key, name_of(document), namespace_of(document))
                except ApiError as error:
                    click.echo(f"Failed to delete {kind.kind}: {error}")
                    continue
                click.echo(f"Deleted {kind.kind}: {namespace_of(document)}/{name_of(document)}")

        run(kubeconfig, master, from_file)
        return
    if not name:
        raise VcctlError(f"{kind.noun} name must be specified")

    async def by_name(store: ClusterStore) -> None:
        await store.delete(*kind.key, name, namespace)
        click.echo(f"Deleted {kind.kind}: {namespace}/{name}")

    run(kubeconfig, master, by_name)


def _clean(obj: dict) -> dict:
    obj.setdefault("apiVersion", k.FLOW_V1ALPHA1)
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


def _describe(
    kind: FlowKind, master: str, kubeconfig: str, name: str, namespace: str, output: str
) -> None:
    if output not in ("yaml", "json"):
        raise VcctlError(f"Unsupported format: {output}")

    async def action(store: ClusterStore) -> None:
        if name:
            obj = await store.get(*kind.key, name, namespace)
            obj.setdefault("kind", kind.kind)
            echo(dump(_clean(obj), output))
            return
        objects = by_namespace_and_name((await store.list(*kind.key, namespace=namespace)).items)
        echo("\n\n".join(dump(_clean(o), output) for o in objects))

    run(kubeconfig, master, action)


# --- the two groups ------------------------------------------------------------------------------


def _file_option(noun: str) -> CommandDecorator:
    return click.option("-f", "--file", default="", help=f"YAML file holding the {noun}(s).")


def _name_option(noun: str) -> CommandDecorator:
    return click.option("-N", "--name", default="", help=f"Name of the {noun}.")


def _namespace_option(noun: str) -> CommandDecorator:
    return click.option(
        "-n", "--namespace", default="default", show_default=True, help=f"Namespace of the {noun}."
    )


def _format_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "-o",
        "--format",
        "output",
        default="yaml",
        show_default=True,
        help="Output format: yaml or json.",
    )(command)


@click.group("jobflow")
def jobflow() -> None:
    """Create, list, inspect and delete JobFlows (vcctl jobflow)."""


@jobflow.command("create")
@connection_options
@_file_option("jobflow")
@checked
def create_jobflow(master: str, kubeconfig: str, file: str) -> None:
    """Create the JobFlows of a YAML file."""
    _create(JOBFLOW, master, kubeconfig, file)


@jobflow.command("list")
@connection_options
@_namespace_option("jobflows")
@click.option("--all-namespaces", is_flag=True, help="List jobflows of every namespace.")
def list_jobflows(master: str, kubeconfig: str, namespace: str, all_namespaces: bool) -> None:
    """List JobFlows with their phase and age."""
    _list(JOBFLOW, master, kubeconfig, None if all_namespaces else namespace)


@jobflow.command("get")
@connection_options
@_name_option("jobflow")
@_namespace_option("jobflow")
@checked
def get_jobflow(master: str, kubeconfig: str, name: str, namespace: str) -> None:
    """Show one JobFlow's phase and age."""
    _get(JOBFLOW, master, kubeconfig, name, namespace)


@jobflow.command("delete")
@connection_options
@_name_option("jobflow")
@_namespace_option("jobflow")
@_file_option("jobflow")
@checked
def delete_jobflow(master: str, kubeconfig: str, name: str, namespace: str, file: str) -> None:
    """Delete a JobFlow by name, or the JobFlows of a YAML file."""
    _delete(JOBFLOW, master, kubeconfig, name, namespace, file)


@jobflow.command("describe")
@connection_options
@_name_option("jobflow (all of the namespace when omitted)")
@_namespace_option("jobflow")
@_format_option
@checked
def describe_jobflow(master: str, kubeconfig: str, name: str, namespace: str, output: str) -> None:
    """Print JobFlows in full, as YAML or JSON."""
    _describe(JOBFLOW, master, kubeconfig, name, namespace, output)


@click.group("jobtemplate")
def jobtemplate() -> None:
    """Create, list, inspect and delete JobTemplates (vcctl jobtemplate)."""


@jobtemplate.command("create")
@connection_options
@_file_option("job template")
@checked
def create_jobtemplate(master: str, kubeconfig: str, file: str) -> None:
    """Create the JobTemplates of a YAML file."""
    _create(JOBTEMPLATE, master, kubeconfig, file)


@jobtemplate.command("list")
@connection_options
@_namespace_option("job templates")
def list_jobtemplates(master: str, kubeconfig: str, namespace: str) -> None:
    """List JobTemplates."""
    _list(JOBTEMPLATE, master, kubeconfig, namespace)


@jobtemplate.command("get")
@connection_options
@_name_option("job template")
@_namespace_option("job template")
@checked
def get_jobtemplate(master: str, kubeconfig: str, name: str, namespace: str) -> None:
    """Show one JobTemplate."""
    _get(JOBTEMPLATE, master, kubeconfig, name, namespace)


@jobtemplate.command("delete")
@connection_options
@_name_option("job template")
@_namespace_option("job template")
@_file_option("job template")
@checked
def delete_jobtemplate(master: str, kubeconfig: str, name: str, namespace: str, file: str) -> None:
    """Delete a JobTemplate by name, or the JobTemplates of a YAML file."""
    _delete(JOBTEMPLATE, master, kubeconfig, name, namespace, file)


@jobtemplate.command("describe")
@connection_options
@_name_option("job template (all of the namespace when omitted)")
@_namespace_option("job template")
@_format_option
@checked
def describe_jobtemplate(
    master: str, kubeconfig: str, name: str, namespace: str, output: str
) -> None:
    """Print JobTemplates in full, as YAML or JSON."""
    _describe(JOBTEMPLATE, master, kubeconfig, name, namespace, output)

"""What every vcctl-style command shares: the cluster connection, errors, tables, files.

Each command talks to a :class:`~stromboli.core.cluster.store.ClusterStore`. By default it is a
``KubeStore`` built from ``--kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config`` or the
in-cluster service account) and ``--master``; a caller may put a :class:`VcctlContext` in
click's context object to hand the commands another store (tests use a ``MemoryStore``)::

    CliRunner().invoke(main, ["job", "list"], obj=VcctlContext(lambda kubeconfig, master: store))

A command that fails prints ``Failed to <command path>: <reason>`` and exits with status 255,
as vcctl does.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any

import click
import yaml

from stromboli.core.cluster.errors import ApiError
from stromboli.core.cluster.store import ClusterStore

EXIT_FAILURE = 255
"""vcctl exits with ``os.Exit(-1)``, which the shell sees as 255."""
CLI_QPS = 50.0
CLI_BURST = 100

StoreFactory = Callable[[str | None, str | None], ClusterStore]
CommandDecorator = Callable[[Callable[..., Any]], Callable[..., Any]]
"""What the option factories return: ``click.option(...)`` applied to a command function."""


class VcctlError(Exception):
    """A problem with what the user asked for (a missing flag, a bad file)."""


def kube_store(kubeconfig: str | None, master: str | None) -> ClusterStore:
    """The default store: the Kubernetes API server named by the kubeconfig (or ``--master``)."""
    from stromboli.core.cluster.kube import KubeStore
    from stromboli.core.cluster.kubeconfig import KubeConfig

    config = KubeConfig.load(kubeconfig or None)
    if master:
        config = config.with_server(master)
    return KubeStore(config, qps=CLI_QPS, burst=CLI_BURST, user_agent="stromboli-vcctl")


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class VcctlContext:
    """How commands reach the cluster; see the module docstring.

    ``close_store``: close the store after each command (right for stores built per command;
    a caller sharing one store across commands turns it off). ``now`` is the clock for ages.
    """

    store_factory: StoreFactory = kube_store
    close_store: bool = True
    now: Callable[[], datetime] = field(default=_utc_now)


def context() -> VcctlContext:
    found = click.get_current_context().find_object(VcctlContext)
    return found if found is not None else VcctlContext()


def connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``-s/--master`` and ``-k/--kubeconfig`` (every vcctl command has them)."""
    command = click.option(
        "-k",
        "--kubeconfig",
        default="",
        help="Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config or in-cluster).",
    )(command)
    return click.option(
        "-s", "--master", default="", help="Address of the API server, overriding the kubeconfig."
    )(command)


def _command_path(ctx: click.Context) -> str:
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def run(
    kubeconfig: str | None,
    master: str | None,
    action: Callable[[ClusterStore], Awaitable[None]],
) -> None:
    """Run ``action`` against the cluster store; report failures the vcctl way."""
    ctx = click.get_current_context()
    settings = context()

    async def main() -> None:
        store = settings.store_factory(kubeconfig or None, master or None)
        try:
            await action(store)
        finally:
            if settings.close_store:
                await store.close()

    try:
        asyncio.run(main())
    except (ApiError, VcctlError, OSError, ValueError) as error:
        fail(ctx, str(error) or type(error).__name__)


def fail(ctx: click.Context, message: str) -> None:
    click.echo(f"Failed to {_command_path(ctx)}: {message}")
    ctx.exit(EXIT_FAILURE)


def checked(function: Callable[..., None]) -> Callable[..., None]:
    """Report a :class:`VcctlError` raised before the store is used (flag checks) the same way."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            function(*args, **kwargs)
        except VcctlError as error:
            fail(click.get_current_context(), str(error))

    return wrapper


def echo(text: str = "") -> None:
    click.echo(text, nl=False)


# --- objects -------------------------------------------------------------------------------------


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def by_namespace_and_name(objects: Iterable[dict]) -> list[dict]:
    """The API server's list order (by key: namespace, then name)."""
    return sorted(objects, key=lambda o: (namespace_of(o), name_of(o)))


def controller_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An ownerReference marking ``obj`` as the controller."""
    return {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": name_of(obj),
        "uid": meta(obj).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """A short age such as ``45s``, ``3m20s``, ``5h``, ``2d3h`` or ``3y``, coarser as it grows
    (the buckets ``kubectl get`` uses)."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    whole = int(seconds)
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def age(timestamp: str | None) -> str:
    """How long ago ``timestamp`` was, or ``<unknown>``."""
    when = parse_time(timestamp)
    if when is None:
        return "<unknown>"
    return human_duration((context().now() - when).total_seconds())


def table(rows: Sequence[Sequence[str]], spacing: int = 4) -> str:
    """Left-aligned columns, each as wide as its widest cell plus ``spacing``."""
    widths = [max(len(str(row[i])) for row in rows) + spacing for i in range(len(rows[0]))]
    return "".join(
        "".join(f"{cell!s:<{widths[i]}}" for i, cell in enumerate(row)) + "\n" for row in rows
    )


def output_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``-o wide``: every column, never narrowed to the terminal (kubectl's flag)."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["wide"]),
        default=None,
        help="wide: more columns, and never narrowed to fit the terminal.",
    )(command)


def terminal_width() -> int | None:
    """The terminal's width when standard output is one; ``None`` (no limit) when it is a
    pipe or a file, so that scripts always read vcctl's full table."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def fit(
    rows: Sequence[Sequence[str]], full: str, width: int | None, drop_order: Sequence[str]
) -> str:
    """``full`` (vcctl's layout of ``rows``) if it fits ``width``; else the same rows in
    columns only as wide as their cells, dropping the columns named in ``drop_order`` one by
    one until the table fits (``-o wide`` never narrows)."""
    if width is None or _widest(full) <= width:
        return full
    keep = list(range(len(rows[0])))
    text = full
    for column in [None, *drop_order]:
        if column is not None and column in rows[0]:
            keep.remove(list(rows[0]).index(column))
        text = table([[row[i] for i in keep] for row in rows], spacing=2)
        text = "".join(line.rstrip() + "\n" for line in text.splitlines())
        if _widest(text) <= width:
            break
    return text


def _widest(text: str) -> int:
    return max((len(line.rstrip()) for line in text.splitlines()), default=0)


# --- files ---------------------------------------------------------------------------------------


def read_documents(path: str) -> list[dict]:
    """The non-empty YAML (or JSON) documents of a file."""
    if not path:
        raise VcctlError("a file must be specified with --file/-f")
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise VcctlError(f"failed to read file, err: {error}") from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as error:
        raise VcctlError(f"failed to unmarshal file, err: {error}") from None
    for document in documents:
        if not isinstance(document, dict):
            raise VcctlError(f"failed to unmarshal file, err: {path} holds a non-object document")
    return documents


def dump(obj: Mapping[str, Any], output: str) -> str:
    """``obj`` as YAML (keys sorted, as kubectl prints) or indented JSON."""
    if output == "json":
        return json.dumps(obj, indent=2) + "\n"
    return yaml.safe_dump(dict(obj), sort_keys=True, default_flow_style=False)

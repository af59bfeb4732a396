"""What the long-running commands (``scheduler``, ``controller``) share: connection and
leader-election flags with Volcano's names and defaults, logging, and serving until a signal."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import click

if TYPE_CHECKING:
    from stromboli.core.cluster.kube import KubeStore
    from stromboli.core.cluster.store import ClusterStore

CommandFunction = Callable[..., Any]


class Server(Protocol):
    """What :func:`serve` runs: the scheduler's or the controller's server."""

    def stop(self) -> None: ...

    async def run(self) -> None: ...


def go_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text in ("true", "1", "t", "yes"):
        return True
    if text in ("false", "0", "f", "no"):
        return False
    raise click.BadParameter(f"{value!r} is not true or false")


def kube_options(command: CommandFunction) -> CommandFunction:
    """Connection flags shared by the long-running commands."""
    for option in reversed(
        [
            click.option(
                "--kubeconfig",
                envvar="KUBECONFIG",
                help="Path to a kubeconfig file; in-cluster config when omitted.",
            ),
            click.option(
                "--master", default=None, help="API server address, overriding the kubeconfig's."
            ),
            click.option(
                "--kube-api-qps",
                default=2000.0,
                show_default=True,
                help="Requests per second to the API server.",
            ),
            click.option(
                "--kube-api-burst",
                default=2000,
                show_default=True,
                help="Burst of requests to the API server.",
            ),
            click.option(
                "-v",
                "--v",
                "verbosity",
                default=3,
                show_default=True,
                help="Log verbosity, as klog's -v: errors, warnings and the start line always; "
                "3 one line per scheduling decision (Volcano's chart default); 5 debug.",
            ),
            click.option(
                "--log-format",
                type=click.Choice(["text", "json"]),
                default="text",
                show_default=True,
                help="Log lines as text, or as one JSON object each for log collectors.",
            ),
        ]
    ):
        command = option(command)
    return command


def setup_logging(verbosity: int, log_format: str = "text") -> None:
    """klog-style verbosity and the chosen format on stderr (see ``core/logsetup.py``)."""
    from stromboli.core.logsetup import setup_logging as configure

    configure(verbosity, log_format, sys.stderr)


async def serve(
    store_factory: Callable[[], Awaitable[ClusterStore]],
    make_server: Callable[[ClusterStore], Server],
) -> None:
    """Run ``make_server(store)`` until SIGTERM/SIGINT, then close the store."""
    store = await store_factory()
    server = make_server(store)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.stop)
    try:
        await server.run()
    finally:
        await store.close()


def kube_store_factory(
    kubeconfig: str | None,
    master: str | None,
    qps: float,
    burst: int,
    max_connections: int | None = None,
) -> Callable[[], Awaitable[KubeStore]]:
    """``max_connections``: the client's connection pool (None: the store's default)."""

    async def make() -> KubeStore:
        from stromboli.core.cluster.kube import KubeConfig, KubeStore

        config = KubeConfig.load(kubeconfig)
        if master:
            config = config.with_server(master)
        if max_connections is None:
            return KubeStore(config, qps=qps, burst=burst)
        return KubeStore(config, qps=qps, burst=burst, max_connections=max_connections)

    return make


def leader_options(command: CommandFunction) -> CommandFunction:
    """``--healthz-address``, ``--leader-elect`` and ``--lock-object-namespace``."""
    for option in reversed(
        [
            click.option(
                "--healthz-address",
                default=":11251",
                show_default=True,
                help="Address of the /healthz endpoint; empty to disable.",
            ),
            click.option(
                "--leader-elect",
                is_flag=False,
                flag_value="true",
                default="false",
                show_default=True,
                help="Run only while holding the Lease (for several replicas).",
            ),
            click.option(
                "--lock-object-namespace",
                default="volcano-system",
                show_default=True,
                help="Namespace of the leader-election Lease.",
            ),
        ]
    ):
        command = option(command)
    return command


#: ``scheduler.api.plaingroup.PLAIN_POD_GROUP_MODES``, repeated so that ``--help`` imports no
#: scheduler code.
PLAIN_POD_GROUP_MODES = ("object", "memory")


def plain_pod_groups_option(command: CommandFunction) -> CommandFunction:
    """``--plain-pod-groups``: the scheduler and the controller must be given the same."""
    return click.option(
        "--plain-pod-groups",
        type=click.Choice(PLAIN_POD_GROUP_MODES),
        default="object",
        show_default=True,
        help="Where the one-member group of a plain pod (naming no PodGroup) lives: 'object', "
        "a PodGroup the controller creates as Volcano's does; 'memory', kept by the scheduler "
        "only (no PodGroup, no pod patch: a binding and an event per pod). Give the scheduler "
        "and the controller the same value.",
    )(command)

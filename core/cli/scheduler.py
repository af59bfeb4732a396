"""``stromboli scheduler``: run the scheduler against a Kubernetes cluster.

Flags follow vc-scheduler's names and defaults so Volcano's Deployments carry over; Go-style
boolean flags accept ``--leader-elect`` as well as ``--leader-elect=false``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import click

from stromboli.core.api import constants as k
from stromboli.core.scheduler.conf import ConfigError
from stromboli.core.scheduler.server import LostLeadership, SchedulerOptions, SchedulerServer
from stromboli.core.simulate.durations import parse_duration


def go_bool(value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text in ("true", "1", "t", "yes"):
        return True
    if text in ("false", "0", "f", "no"):
        return False
    raise click.BadParameter(f"{value!r} is not true or false")


def kube_options(command):  # type: ignore[no-untyped-def]
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
                default=2,
                show_default=True,
                help="Log verbosity (0 errors .. 4 debug).",
            ),
        ]
    ):
        command = option(command)
    return command


def setup_logging(verbosity: int) -> None:
    level = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO}.get(verbosity, logging.DEBUG)
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname).1s %(name)s: %(message)s", stream=sys.stderr
    )


async def serve(store_factory, make_server) -> None:  # type: ignore[no-untyped-def]
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


def kube_store_factory(kubeconfig: str | None, master: str | None, qps: float, burst: int):  # type: ignore[no-untyped-def]
    async def make():  # type: ignore[no-untyped-def]
        from stromboli.core.cluster.kube import KubeConfig, KubeStore

        config = KubeConfig.load(kubeconfig)
        if master:
            config = config.with_server(master)
        return KubeStore(config, qps=qps, burst=burst)

    return make


@click.command()
@kube_options
@click.option(
    "--scheduler-name",
    "scheduler_names",
    multiple=True,
    default=(k.DEFAULT_SCHEDULER_NAME,),
    show_default=True,
    help="Schedule pods whose schedulerName is this (repeatable).",
)
@click.option(
    "--scheduler-conf",
    type=click.Path(dir_okay=False),
    help="Scheduler configuration file (Volcano's format); reloaded when it changes.",
)
@click.option(
    "--schedule-period", default="1s", show_default=True, help="Time between scheduling cycles."
)
@click.option(
    "--default-queue",
    default=k.DEFAULT_QUEUE,
    show_default=True,
    help="Queue created at start and used by PodGroups without one.",
)
@click.option(
    "--listen-address",
    default=":8080",
    show_default=True,
    help="Address of the /metrics endpoint; empty to disable.",
)
@click.option(
    "--healthz-address",
    default=":11251",
    show_default=True,
    help="Address of the /healthz endpoint; empty to disable.",
)
@click.option(
    "--leader-elect",
    is_flag=False,
    flag_value="true",
    default="false",
    show_default=True,
    help="Run only while holding the Lease (for several replicas).",
)
@click.option(
    "--lock-object-namespace",
    default="volcano-system",
    show_default=True,
    help="Namespace of the leader-election Lease.",
)
def scheduler(
    kubeconfig: str | None,
    master: str | None,
    kube_api_qps: float,
    kube_api_burst: int,
    verbosity: int,
    scheduler_names: tuple[str, ...],
    scheduler_conf: str | None,
    schedule_period: str,
    default_queue: str,
    listen_address: str,
    healthz_address: str,
    leader_elect: str,
    lock_object_namespace: str,
) -> None:
    """Schedule pods of a live cluster (Volcano's vc-scheduler)."""
    setup_logging(verbosity)
    try:
        options = SchedulerOptions(
            scheduler_names=tuple(scheduler_names),
            scheduler_conf=scheduler_conf,
            schedule_period=parse_duration(schedule_period, "--schedule-period"),
            default_queue=default_queue,
            listen_address=listen_address,
            healthz_address=healthz_address,
            leader_elect=go_bool(leader_elect),
            lock_object_namespace=lock_object_namespace,
        )
        factory = kube_store_factory(kubeconfig, master, kube_api_qps, kube_api_burst)
        asyncio.run(serve(factory, lambda store: SchedulerServer(store, options)))
    except (ConfigError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    except LostLeadership as err:
        raise click.ClickException(f"stopping: {err}") from None

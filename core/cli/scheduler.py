"""``stromboli scheduler``: run the scheduler against a Kubernetes cluster.

Flags follow vc-scheduler's names and defaults so Volcano's Deployments carry over; Go-style
boolean flags accept ``--leader-elect`` as well as ``--leader-elect=false``.
"""

from __future__ import annotations

import asyncio

import click

from stromboli.core.api import constants as k
from stromboli.core.api.durations import parse_duration
from stromboli.core.cli.process import (
    go_bool,
    kube_options,
    kube_store_factory,
    leader_options,
    serve,
    setup_logging,
)
from stromboli.core.scheduler.conf import ConfigError
from stromboli.core.scheduler.server import LostLeadership, SchedulerOptions, SchedulerServer


@click.command()
@kube_options
@leader_options
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
    from stromboli.core.scheduler.builtins import register_builtins  # lazily: CLI start-up

    register_builtins()
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

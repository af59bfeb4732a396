"""``stromboli scheduler``: run the scheduler against a Kubernetes cluster.

Flags follow vc-scheduler's names and defaults so Volcano's Deployments carry over; Go-style
boolean flags accept ``--leader-elect`` as well as ``--leader-elect=false``. The scheduler's
own modules are imported when the command runs, so ``--help`` starts fast.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click

from stromboli.core.api import constants as k
from stromboli.core.cli.process import (
    go_bool,
    kube_options,
    kube_store_factory,
    leader_options,
    plain_pod_groups_option,
    serve,
    setup_logging,
)

log = logging.getLogger("stromboli.core.scheduler")
#: Where a pod finds its own namespace (the service account's mount).
POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_CONFIG_MAP = "volcano-scheduler-configmap"


def config_map_of(
    value: str, scheduler_conf: str | None, fallback_namespace: str
) -> tuple[str, str] | None:
    """``--scheduler-configmap`` as (namespace, name): ``NAME`` is in the scheduler's own
    namespace (its service account's, else ``fallback_namespace``); empty, or no
    ``--scheduler-conf``, means none."""
    if not value or not scheduler_conf:
        return None
    namespace, _, name = value.rpartition("/")
    if not namespace:
        try:
            namespace = POD_NAMESPACE_FILE.read_text().strip() or fallback_namespace
        except OSError:
            namespace = fallback_namespace
    if not name:
        raise click.BadParameter(
            f"{value!r} names no ConfigMap", param_hint="--scheduler-configmap"
        )
    return namespace, name


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
    "--strict-config",
    is_flag=True,
    help="Refuse a configuration naming plugins, arguments or keys Stromboli would skip "
    "(by default they are skipped, as Volcano does, and reported).",
)
@click.option(
    "--scheduler-configmap",
    default=DEFAULT_CONFIG_MAP,
    show_default=True,
    help="ConfigMap (NAME or NAMESPACE/NAME) mounted as --scheduler-conf: skipped plugins and "
    "arguments are posted on it as Warning events; empty for none.",
)
@click.option(
    "--schedule-period", default="1s", show_default=True, help="Time between scheduling cycles."
)
@click.option(
    "--early-cycle-gap",
    default="20ms",
    show_default=True,
    help="When new pending pods or PodGroups arrive, start the next cycle this long after the "
    "last one ended (at least as long as that cycle took) instead of waiting for "
    "--schedule-period; 0 turns early cycles off.",
)
@click.option(
    "--default-queue",
    default=k.DEFAULT_QUEUE,
    show_default=True,
    help="Queue created at start and used by PodGroups without one.",
)
@plain_pod_groups_option
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
    log_format: str,
    scheduler_names: tuple[str, ...],
    scheduler_conf: str | None,
    strict_config: bool,
    scheduler_configmap: str,
    schedule_period: str,
    early_cycle_gap: str,
    default_queue: str,
    plain_pod_groups: str,
    listen_address: str,
    healthz_address: str,
    leader_elect: str,
    lock_object_namespace: str,
) -> None:
    """Schedule pods of a live cluster (Volcano's vc-scheduler)."""
    setup_logging(verbosity, log_format)
    from stromboli.core.api.durations import parse_duration
    from stromboli.core.logsetup import log_start
    from stromboli.core.scheduler.api.plaingroup import plain_pod_groups_mode
    from stromboli.core.scheduler.builtins import register_builtins
    from stromboli.core.scheduler.conf import ConfigError, ConfigSource
    from stromboli.core.scheduler.server import (
        LostLeadership,
        SchedulerOptions,
        SchedulerServer,
        scheduler_connections,
        start_settings,
    )

    register_builtins()
    try:
        options = SchedulerOptions(
            scheduler_names=tuple(scheduler_names),
            scheduler_conf=scheduler_conf,
            schedule_period=parse_duration(schedule_period, "--schedule-period"),
            early_cycle_gap=parse_duration(early_cycle_gap, "--early-cycle-gap"),
            default_queue=default_queue,
            listen_address=listen_address,
            healthz_address=healthz_address,
            leader_elect=go_bool(leader_elect),
            lock_object_namespace=lock_object_namespace,
            strict_config=strict_config,
            plain_pod_groups=plain_pod_groups_mode(plain_pod_groups),
            config_map=config_map_of(scheduler_configmap, scheduler_conf, lock_object_namespace),
        )
        # Read before connecting: a configuration it cannot use stops the start at once.
        config = ConfigSource(scheduler_conf, strict=strict_config)
        log_start(log, "scheduler", start_settings(options, config))
        factory = kube_store_factory(
            kubeconfig, master, kube_api_qps, kube_api_burst, scheduler_connections(options)
        )
        asyncio.run(serve(factory, lambda store: SchedulerServer(store, options, config=config)))
    except (ConfigError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    except LostLeadership as err:
        raise click.ClickException(f"stopping: {err}") from None

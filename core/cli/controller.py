"""``stromboli controller``: run the vcjob controller against a Kubernetes cluster
(Volcano's vc-controller-manager)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from stromboli.core.cluster.store import ClusterStore
    from stromboli.core.controller.server import ControllerServer

log = logging.getLogger("stromboli.core.controller")
#: ``controller.server.DRIVERS``, repeated so that ``--help`` imports no controller code.
DRIVERS = ("kopf", "native")


@click.command()
@kube_options
@leader_options
@click.option(
    "--scheduler-name",
    "scheduler_names",
    multiple=True,
    default=(k.DEFAULT_SCHEDULER_NAME,),
    show_default=True,
    help="Enrol plain pods of these schedulers into PodGroups (repeatable).",
)
@click.option(
    "--max-requeue-num",
    default=15,
    show_default=True,
    help="Failed attempts of one job action before the job is terminated.",
)
@click.option(
    "--worker-threads",
    default=3,
    show_default=True,
    help="Accepted for Volcano compatibility; the controller is single-threaded asyncio.",
)
@click.option(
    "--listen-address",
    default=":8081",
    show_default=True,
    help="Address of the /metrics endpoint (Volcano's controller metrics); empty to disable.",
)
@click.option(
    "--driver",
    type=click.Choice(DRIVERS),
    default="kopf",
    show_default=True,
    help="What feeds the controllers live events: a kopf operator, or their own list+watch.",
)
@plain_pod_groups_option
@click.option(
    "--frameworks/--no-frameworks",
    default=True,
    show_default=True,
    help="Make the PodGroups of framework workloads (PyTorchJob, RayCluster, ...) in enrolled "
    "namespaces, for every framework CRD installed when the controller starts.",
)
def controller(
    kubeconfig: str | None,
    master: str | None,
    kube_api_qps: float,
    kube_api_burst: int,
    verbosity: int,
    log_format: str,
    scheduler_names: tuple[str, ...],
    healthz_address: str,
    leader_elect: str,
    lock_object_namespace: str,
    max_requeue_num: int,
    worker_threads: int,
    listen_address: str,
    driver: str,
    plain_pod_groups: str,
    frameworks: bool,
) -> None:
    """Run vcjobs through their lifecycle and enrol plain pods into PodGroups."""
    setup_logging(verbosity, log_format)
    from stromboli.core.controller.server import ControllerOptions, ControllerServer
    from stromboli.core.logsetup import log_start, settings_of
    from stromboli.core.scheduler.api.plaingroup import plain_pod_groups_mode

    options = ControllerOptions(
        scheduler_names=tuple(scheduler_names),
        healthz_address=healthz_address,
        listen_address=listen_address,
        driver=driver,
        leader_elect=go_bool(leader_elect),
        lock_object_namespace=lock_object_namespace,
        max_requeue=max_requeue_num,
        plain_pod_groups=plain_pod_groups_mode(plain_pod_groups),
    )
    log_start(log, "controller", settings_of(options) | {"frameworks": frameworks})
    factory = kube_store_factory(kubeconfig, master, kube_api_qps, kube_api_burst)

    def server(store: ClusterStore) -> ControllerServer:
        from stromboli.integrations.live import FrameworkController

        adapters = [FrameworkController(store)] if frameworks else []
        return ControllerServer(store, options, extensions=adapters)

    asyncio.run(serve(factory, server))

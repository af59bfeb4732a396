"""``stromboli dev-cluster up|down|status``: a local Kubernetes for trying Stromboli.

The cluster is the test control plane (etcd, kube-apiserver, kube-controller-manager, kwok
nodes, optionally kube-scheduler; see ``hack/README.md``) run by a detached daemon, so ``up``
returns and the cluster keeps running until ``down``. ``up`` prints the admin kubeconfig's path
as its last line of standard output, so scripts can do
``export KUBECONFIG=$(stromboli dev-cluster up | tail -1)``; progress and build output go to
standard error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from stromboli.core.devcluster.daemon import Paths

#: ``devcluster.daemon.STATE_DIR_ENV``, repeated so that ``--help`` imports none of the
#: control plane's code (a test keeps them equal).
STATE_DIR_ENV = "STROMBOLI_DEV_CLUSTER_DIR"

_state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar=STATE_DIR_ENV,
    help="Where the cluster's state, logs and certificates live "
    "[default: ~/.cache/stromboli/dev-cluster, or $STROMBOLI_CACHE/dev-cluster].",
)


def _paths(state_dir: Path | None) -> Paths:
    from stromboli.core.devcluster.daemon import Paths, default_state_dir

    return Paths((state_dir or default_state_dir()).expanduser().resolve())


@click.group("dev-cluster")
def dev_cluster() -> None:
    """A local cluster (etcd, kube-apiserver, kube-controller-manager, kwok nodes) with
    Stromboli's CRDs installed."""


@dev_cluster.command("up")
@click.option(
    "--nodes", type=click.IntRange(min=0), default=3, show_default=True, help="kwok nodes."
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the admin kubeconfig [default: <state-dir>/kubeconfig].",
)
@click.option(
    "--scheduler/--no-scheduler",
    default=False,
    show_default=True,
    help="Also run the upstream kube-scheduler (default-scheduler), for comparisons.",
)
@click.option("--node-cpu", default="32", show_default=True, help="CPU of each kwok node.")
@click.option("--node-memory", default="256Gi", show_default=True, help="Memory of each node.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds to wait for the cluster to be ready (the first build is not counted).",
)
@_state_dir_option
def up(
    nodes: int,
    kubeconfig: Path | None,
    scheduler: bool,
    node_cpu: str,
    node_memory: str,
    timeout: float,
    state_dir: Path | None,
) -> None:
    """Start the cluster in the background and print its kubeconfig path (last line)."""
    from stromboli.core.devcluster.build import BuildError
    from stromboli.core.devcluster.daemon import DevClusterError
    from stromboli.core.devcluster.daemon import up as start_cluster

    paths = _paths(state_dir)
    try:
        result = start_cluster(
            paths,
            nodes=nodes,
            kubeconfig=kubeconfig,
            kube_scheduler=scheduler,
            node_cpu=node_cpu,
            node_memory=node_memory,
            timeout=timeout,
        )
    except (DevClusterError, BuildError) as err:
        raise click.ClickException(str(err)) from err
    if result.already_running:
        click.echo(f"the dev cluster is already running at {result.server}", err=True)
        if kubeconfig is not None and kubeconfig.expanduser().resolve() != result.kubeconfig:
            click.echo(
                f"--kubeconfig {kubeconfig} ignored: its kubeconfig is {result.kubeconfig} "
                "(run `stromboli dev-cluster down` first to move it)",
                err=True,
            )
    else:
        click.echo(f"dev cluster running at {result.server} with {nodes} kwok node(s)", err=True)
        click.echo("stop it with: stromboli dev-cluster down", err=True)
    click.echo(str(result.kubeconfig))


@dev_cluster.command("down")
@_state_dir_option
def down(state_dir: Path | None) -> None:
    """Stop every process `up` started and remove the cluster's state (idempotent)."""
    from stromboli.core.devcluster.daemon import DevClusterError
    from stromboli.core.devcluster.daemon import down as stop_cluster

    try:
        click.echo(stop_cluster(_paths(state_dir)))
    except DevClusterError as err:
        raise click.ClickException(str(err)) from err


@dev_cluster.command("status")
@_state_dir_option
def status(state_dir: Path | None) -> None:
    """Say whether the cluster runs (exit status 0) or not (exit status 1): ``restarting``
    while a component that died is being started again."""
    from stromboli.core.devcluster.daemon import status as cluster_status

    report = cluster_status(_paths(state_dir))
    click.echo(f"status:     {report.message}")
    if report.server:
        click.echo(f"server:     {report.server}")
    if report.nodes is not None:
        click.echo(f"nodes:      {report.nodes} ({report.ready_nodes} ready)")
    if report.kubeconfig:
        click.echo(f"kubeconfig: {report.kubeconfig}")
    if report.restarts:
        counts = ", ".join(f"{name} {n}" for name, n in sorted(report.restarts.items()))
        click.echo(f"restarted:  {counts} (after they died)")
    if not report.running:
        raise SystemExit(1)

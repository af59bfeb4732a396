"""The ``stromboli`` command: one click group, one module per sub-command."""

import click

from stromboli.core import __version__
from stromboli.core.cli.controller import controller
from stromboli.core.cli.crds import crds
from stromboli.core.cli.devcluster import dev_cluster
from stromboli.core.cli.explain import explain_command
from stromboli.core.cli.scheduler import scheduler
from stromboli.core.cli.simulate import simulate
from stromboli.core.cli.sparkconf import spark_conf
from stromboli.core.cli.vcctl import job, jobflow, jobtemplate, queue
from stromboli.core.cli.webhook import webhook_manager
from stromboli.core.runtime import tune_gc


@click.group()
@click.version_option(__version__, prog_name="stromboli")
def main() -> None:
    """Stromboli: a Volcano-compatible batch scheduler for Kubernetes."""
    tune_gc()


main.add_command(crds)
main.add_command(dev_cluster)
main.add_command(simulate)
main.add_command(explain_command)
main.add_command(scheduler)
main.add_command(controller)
main.add_command(webhook_manager)
main.add_command(job)
main.add_command(queue)
main.add_command(jobflow)
main.add_command(jobtemplate)
main.add_command(spark_conf)

"""The ``stromboli`` command: one click group, one module per sub-command."""

import click

from stromboli.core import __version__
from stromboli.core.cli.crds import crds
from stromboli.core.cli.scheduler import scheduler
from stromboli.core.cli.simulate import simulate
from stromboli.core.runtime import tune_gc


@click.group()
@click.version_option(__version__, prog_name="stromboli")
def main() -> None:
    """Stromboli: a Volcano-compatible batch scheduler for Kubernetes."""
    tune_gc()


main.add_command(crds)
main.add_command(simulate)
main.add_command(scheduler)

"""The ``stromboli`` command: one click group, one module per sub-command."""

import click

from stromboli.core import __version__


@click.group()
@click.version_option(__version__, prog_name="stromboli")
def main() -> None:
    """Stromboli: a Volcano-compatible batch scheduler for Kubernetes."""

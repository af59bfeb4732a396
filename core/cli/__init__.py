"""The ``stromboli`` command: one click group, one module per sub-command.

A sub-command's module is imported only when that sub-command runs, so ``stromboli --version``
and ``--help`` load click and this table, not the scheduler, the API models or an HTTP client
(kubectl's start is the bar). The table repeats each command's one-line help for ``--help``; a
test keeps it equal to the command's own.
"""

from __future__ import annotations

import importlib

import click

from stromboli.core import __version__

#: Sub-command → (module under ``stromboli.core.cli``, attribute, one-line help), in the order
#: ``--help`` lists them.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "crds": (
        "crds",
        "crds",
        "Print the Volcano-compatible CRDs (Queue, PodGroup, Job, ...) as YAML.",
    ),
    "dev-cluster": (
        "devcluster",
        "dev_cluster",
        "A local cluster (etcd, kube-apiserver, kube-controller-manager, kwok nodes) with "
        "Stromboli's CRDs installed.",
    ),
    "simulate": (
        "simulate",
        "simulate",
        "Simulate FILES (Kubernetes YAML: Nodes, Queues, PodGroups, Pods, vcjobs, Deployments, "
        "StatefulSets, batch Jobs, CronJobs, ...) on a virtual clock.",
    ),
    "explain": (
        "explain",
        "explain_command",
        "Show why TARGET waits: a pod (NAME or pod/NAME), job/NAME (a vcjob), podgroup/NAME or "
        "queue/NAME.",
    ),
    "scheduler": (
        "scheduler",
        "scheduler",
        "Schedule pods of a live cluster (Volcano's vc-scheduler).",
    ),
    "controller": (
        "controller",
        "controller",
        "Run vcjobs through their lifecycle and enrol plain pods into PodGroups.",
    ),
    "webhook-manager": (
        "webhook",
        "webhook_manager",
        "Validate and default Volcano objects (vcjobs, queues, PodGroups, pods) on admission.",
    ),
    "job": (
        "vcctl.job",
        "job",
        "Run, list, view, suspend, resume and delete vcjobs (vcctl job).",
    ),
    "queue": (
        "vcctl.queue",
        "queue",
        "Create, list, inspect, open, close and delete queues (vcctl queue).",
    ),
    "jobflow": (
        "vcctl.flow",
        "jobflow",
        "Create, list, inspect and delete JobFlows (vcctl jobflow).",
    ),
    "jobtemplate": (
        "vcctl.flow",
        "jobtemplate",
        "Create, list, inspect and delete JobTemplates (vcctl jobtemplate).",
    ),
    "spark-conf": (
        "sparkconf",
        "spark_conf",
        "Print the --conf flags and write the templates that run spark-submit under Stromboli.",
    ),
    "doctor": (
        "doctor",
        "doctor",
        "Check a cluster's Stromboli install (CRDs, RBAC, webhook, certificates, operators, "
        "enrolled namespaces) and say what to fix.",
    ),
}


class LazyGroup(click.Group):
    """A group whose sub-commands are imported on first use (see :data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS) + [name for name in self.commands if name not in COMMANDS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attribute, _ = entry
        command = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{__name__}.{module}.{attribute} is not a click command")
        self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table, importing none of the commands."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = []
        for name, (_, _, text) in COMMANDS.items():
            rows.append((name, click.Command(name, help=text).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="stromboli")
def main() -> None:
    """Stromboli: a Volcano-compatible batch scheduler for Kubernetes."""
    from stromboli.core.runtime import tune_gc

    tune_gc()

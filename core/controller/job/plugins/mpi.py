"""``mpi``: the master learns its workers' addresses; every container opens the ssh port.

Pods of the ``--master`` task get ``MPI_HOST`` = the workers' ``<pod>.<job>`` names, comma
separated (``--worker`` names the worker task). Every (init) container of every pod exposes
``--port`` (22) as ``mpijob-port`` unless a port with that number is already declared. A job
without the worker task is left alone. The mutating webhook adds ``svc`` and ``ssh`` to jobs
that use this plugin, and the validating webhook requires the master task.
"""

from __future__ import annotations

from stromboli.core.api.jobflags import MPI_FLAGS
from stromboli.core.controller.job.plugins.base import (
    JobPlugin,
    Obj,
    add_env,
    add_port,
    containers,
    task_hosts,
)

MPI_HOST = "MPI_HOST"
PORT_NAME = "mpijob-port"


class MpiPlugin(JobPlugin):
    """See the module docstring."""

    name = "mpi"
    flags = MPI_FLAGS

    @property
    def master_name(self) -> str:
        return str(self.options["master"])

    @property
    def worker_name(self) -> str:
        return str(self.options["worker"])

    def worker_hosts(self) -> str | None:
        worker = self.task(self.worker_name)
        if worker is None:
            return None
        return ",".join(task_hosts(self.job_name, worker))

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        hosts: str | None = None
        if task_name == self.master_name:
            hosts = self.worker_hosts()
            if hosts is None:
                return
        for container in containers(pod):
            add_port(container, int(self.options["port"]), PORT_NAME)
            if hosts is not None:
                add_env(container, {"name": MPI_HOST, "value": hosts})

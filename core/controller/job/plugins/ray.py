"""``ray``: start a Ray cluster, one head and its workers, from a vcjob.

The ``--headContainer`` container of the ``--head`` task runs ``ray start --head --block`` with
the GCS (``--port`` 6379), dashboard (``--dashboardPort`` 8265) and client-server
(``--clientPort`` 10001) ports, which it exposes as ``gcs``, ``dashboard`` and
``client-server``; the ``--workerContainer`` container of the ``--worker`` task runs
``ray start --block --address=<head pod>.<job>:<port>``. A Service ``<job>-head-svc`` selects the
head pod and publishes the three ports. A job without the head task cannot be started.
"""

from __future__ import annotations

from stromboli.core.api import constants as k
from stromboli.core.api.jobflags import Flag
from stromboli.core.controller.job.plugins.base import (
    JobPlugin,
    JobPluginError,
    Obj,
    ObjectRef,
    add_port,
    domain_name,
)

DEFAULT_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_CLIENT_PORT = 10001
GCS_PORT_NAME = "gcs"
DASHBOARD_PORT_NAME = "dashboard"
CLIENT_SERVER_PORT_NAME = "client-server"


class RayPlugin(JobPlugin):
    """See the module docstring."""

    name = "ray"
    flags = (
        Flag("head", "head", "name of the head task"),
        Flag("headContainer", "head", "container of the head pod that runs Ray"),
        Flag("worker", "worker", "name of the worker task"),
        Flag("workerContainer", "worker", "container of the worker pods that runs Ray"),
        Flag("port", DEFAULT_PORT, "GCS port of the head"),
        Flag("dashboardPort", DEFAULT_DASHBOARD_PORT, "port of the Ray dashboard"),
        Flag("clientPort", DEFAULT_CLIENT_PORT, "port of the Ray client server"),
    )

    @property
    def service_name(self) -> str:
        return f"{self.job_name}-head-svc"

    def ports(self) -> list[tuple[str, int]]:
        return [
            (GCS_PORT_NAME, int(self.options["port"])),
            (DASHBOARD_PORT_NAME, int(self.options["dashboardPort"])),
            (CLIENT_SERVER_PORT_NAME, int(self.options["clientPort"])),
        ]

    def head_command(self) -> list[str]:
        o = self.options
        return [
            "sh",
            "-c",
            "ray start --head --block --dashboard-host=0.0.0.0 "
            f"--port={o['port']} --dashboard-port={o['dashboardPort']} "
            f"--ray-client-server-port={o['clientPort']}",
        ]

    def worker_command(self, head_address: str) -> list[str]:
        return ["sh", "-c", f"ray start --block --address={head_address}:{self.options['port']}"]

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        head = self.task(self.options["head"])
        if head is None:
            raise JobPluginError(
                f"ray plugin: job {self.job_name} has no head task {self.options['head']!r}"
            )
        for container in (pod.get("spec") or {}).get("containers") or []:
            name = container.get("name")
            if task_name == self.options["head"] and name == self.options["headContainer"]:
                for port_name, port in self.ports():
                    add_port(container, port, port_name)
                container["command"] = self.head_command()
            if task_name == self.options["worker"] and name == self.options["workerContainer"]:
                container["command"] = self.worker_command(domain_name(self.job_name, head, 0))

    def on_job_add(self) -> list[Obj]:
        spec = {
            "selector": {
                k.JOB_NAME_KEY: self.job_name,
                k.JOB_NAMESPACE_KEY: self.namespace,
                k.TASK_SPEC_KEY: self.options["head"],
            },
            "ports": [
                {"name": name, "port": port, "targetPort": name, "protocol": "TCP"}
                for name, port in self.ports()
            ],
        }
        return [self.owned(k.CORE_V1, "Service", self.service_name, spec=spec)]

    def on_job_delete(self) -> list[ObjectRef]:
        return [(k.CORE_V1, "Service", self.service_name)]

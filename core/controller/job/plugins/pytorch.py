"""``pytorch``: the environment ``torch.distributed`` reads to form its process group.

Every container of a pod gets ``MASTER_ADDR`` (replica 0 of the ``--master`` task,
``<job>-master-0.<job>``), ``MASTER_PORT`` (``--port``, 23456), ``WORLD_SIZE`` (master plus
worker replicas) and, for master and worker pods, ``RANK`` (master 0, worker ``index + 1``), and
exposes the port as ``pytorchjob-port``. With ``--wait-master-enabled`` worker pods also get an
init container (``--wait-master-image``) that waits up to ``--wait-master-timeout`` seconds for
the master's port to accept connections. A job without the master task is left alone.
"""

from __future__ import annotations

import logging

from stromboli.core.api.jobflags import Flag
from stromboli.core.controller.job.plugins.base import (
    JobPlugin,
    Obj,
    add_env,
    add_port,
    containers,
    domain_name,
    replicas,
)

log = logging.getLogger(__name__)

DEFAULT_PORT = 23456
DEFAULT_WAIT_TIMEOUT = 300
DEFAULT_WAIT_IMAGE = "busybox:1.36.1"
PORT_NAME = "pytorchjob-port"
WAIT_CONTAINER = "wait-for-master"
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
WORLD_SIZE = "WORLD_SIZE"
RANK = "RANK"


def wait_script(host: str, port: int, timeout: int) -> str:
    """Shell that polls ``host:port`` every 2 s and fails after ``timeout`` seconds."""
    return "\n".join(
        [
            f'echo "waiting for the master at {host}:{port} (up to {timeout}s)"',
            "waited=0",
            f"while ! {{ nc -z {host} {port} || echo > /dev/tcp/{host}/{port}; }} 2>/dev/null; do",
            f'  if [ "$waited" -ge {timeout} ]; then',
            f'    echo "the master at {host}:{port} did not answer within {timeout}s"',
            "    exit 1",
            "  fi",
            "  sleep 2",
            "  waited=$((waited + 2))",
            "done",
            'echo "the master is up"',
        ]
    )


class PytorchPlugin(JobPlugin):
    """See the module docstring."""

    name = "pytorch"
    flags = (
        Flag("master", "master", "name of the master task"),
        Flag("worker", "worker", "name of the worker task"),
        Flag("port", DEFAULT_PORT, "port of the master (MASTER_PORT), opened on all containers"),
        Flag("wait-master-enabled", False, "give workers an init container that waits for it"),
        Flag("wait-master-timeout", DEFAULT_WAIT_TIMEOUT, "seconds the init container waits"),
        Flag("wait-master-image", DEFAULT_WAIT_IMAGE, "image of the waiting init container"),
    )

    def world_size(self) -> int:
        roles = (self.options["master"], self.options["worker"])
        return sum(replicas(t) for t in self.tasks if t.get("name") in roles)

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        master = self.task(self.options["master"])
        if master is None:
            log.error("job %s has no task %s", self.job_name, self.options["master"])
            return
        address = domain_name(self.job_name, master, 0)
        port = int(self.options["port"])
        rank: int | None = None
        if task_name == self.options["worker"]:
            rank = index + 1
            if self.options["wait-master-enabled"]:
                self.add_wait_container(pod, address, port)
        elif task_name == self.options["master"]:
            rank = 0
        for container in containers(pod, init=False):
            add_port(container, port, PORT_NAME)
            add_env(
                container,
                {"name": MASTER_ADDR, "value": address},
                {"name": MASTER_PORT, "value": str(port)},
                {"name": WORLD_SIZE, "value": str(self.world_size())},
            )
            if rank is not None:
                add_env(container, {"name": RANK, "value": str(rank)})

    def add_wait_container(self, pod: Obj, address: str, port: int) -> None:
        init = pod.setdefault("spec", {}).setdefault("initContainers", [])
        if any(c.get("name") == WAIT_CONTAINER for c in init):
            return
        script = wait_script(address, port, int(self.options["wait-master-timeout"]))
        init.append(
            {
                "name": WAIT_CONTAINER,
                "image": self.options["wait-master-image"],
                "command": ["sh", "-c", script],
            }
        )

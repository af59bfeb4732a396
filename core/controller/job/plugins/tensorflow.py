"""``tensorflow``: the ``TF_CONFIG`` that distributed TensorFlow reads to find its peers.

Every container gets ``TF_CONFIG`` = ``{"cluster": {"ps": [...], "worker": [...], "chief": [...],
"evaluator": [...]}, "task": {"type": <role>, "index": <replica>}}``, each host written
``<pod>.<job>:<port>`` (roles without a task are left out). Task names for the roles come from
``--ps``, ``--worker``, ``--chief`` and ``--evaluator``; a task with another name keeps its own
name as its type. A job of one task with one replica is stand-alone and gets nothing.
"""

from __future__ import annotations

import json

from stromboli.core.api.jobflags import Flag
from stromboli.core.controller.job.plugins.base import (
    JobPlugin,
    Obj,
    add_env,
    containers,
    domain_name,
    replicas,
)

TF_CONFIG = "TF_CONFIG"
DEFAULT_PORT = 2222
ROLES = ("ps", "worker", "chief", "evaluator")


class TensorflowPlugin(JobPlugin):
    """See the module docstring."""

    name = "tensorflow"
    flags = (
        Flag("ps", "ps", "name of the parameter-server task"),
        Flag("worker", "worker", "name of the worker task"),
        Flag("chief", "chief", "name of the chief task"),
        Flag("evaluator", "evaluator", "name of the evaluator task"),
        Flag("port", DEFAULT_PORT, "port every TensorFlow server listens on"),
    )

    def task_type(self, task_name: str) -> str:
        for role in ROLES:
            if self.options[role] == task_name:
                return role
        return task_name

    def cluster_spec(self, task_name: str, index: int) -> dict:
        cluster: dict[str, list[str]] = {}
        for task in self.tasks:
            name = task.get("name")
            hosts = [
                f"{domain_name(self.job_name, task, i)}:{self.options['port']}"
                for i in range(replicas(task))
            ]
            for role in ROLES:
                if self.options[role] == name:
                    cluster[role] = hosts
                    break
        ordered = {role: cluster[role] for role in ROLES if cluster.get(role)}
        return {"cluster": ordered, "task": {"type": self.task_type(task_name), "index": index}}

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        tasks = self.tasks
        if len(tasks) == 1 and replicas(tasks[0]) == 1:
            return
        value = json.dumps(self.cluster_spec(task_name, index), separators=(",", ":"))
        for container in containers(pod, init=False):
            add_env(container, {"name": TF_CONFIG, "value": value})

"""``env``: tell every container which replica it is (``VK_TASK_INDEX`` / ``VC_TASK_INDEX``)."""

from __future__ import annotations

from stromboli.core.controller.job.plugins.base import JobPlugin, Obj, add_env, containers

TASK_VK_INDEX = "VK_TASK_INDEX"
TASK_INDEX = "VC_TASK_INDEX"


class EnvPlugin(JobPlugin):
    """Adds the replica index of the pod within its task to all (init) containers; the old
    ``VK_`` name is kept for images written for Volcano's predecessor."""

    name = "env"

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        for container in containers(pod):
            add_env(
                container,
                {"name": TASK_VK_INDEX, "value": str(index)},
                {"name": TASK_INDEX, "value": str(index)},
            )

"""``hcclrank``: the ``hccl/rankIndex`` annotation Ascend's HCCL collective library needs.

A pod that already has the annotation keeps it. Otherwise the rank is the ``RANK`` environment
variable of its containers when one is set (e.g. by the ``pytorch`` plugin applied first), else
the replica index for the ``--master`` task and the master replica count plus the index for the
``--worker`` task; pods of other tasks get no annotation.
"""

from __future__ import annotations

from stromboli.core.api.jobflags import Flag
from stromboli.core.controller.job.plugins.base import JobPlugin, Obj, env_value, replicas

HCCL_RANK_KEY = "hccl/rankIndex"
RANK = "RANK"


class HcclRankPlugin(JobPlugin):
    """See the module docstring."""

    name = "hcclrank"
    flags = (
        Flag("master", "master", "name of the master task"),
        Flag("worker", "worker", "name of the worker task"),
    )

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        annotations = pod.setdefault("metadata", {}).get("annotations") or {}
        if annotations.get(HCCL_RANK_KEY):
            return
        rank = env_value(pod, RANK)
        if not rank:
            if task_name == self.options["master"]:
                rank = str(index)
            elif task_name == self.options["worker"]:
                master = self.task(self.options["master"])
                rank = str((replicas(master) if master else 0) + index)
            else:
                return
        pod["metadata"].setdefault("annotations", {})[HCCL_RANK_KEY] = rank

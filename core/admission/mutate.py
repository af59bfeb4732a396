"""Volcano's mutating admission rules as plain functions: the defaults its ``mutate`` webhooks
fill in on create (queue, PodGroup, vcjob).

The admission webhook serves these, and the simulator applies them to its input, so an object
is defaulted the same way wherever it enters. Each function returns a new object and leaves
its argument alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from stromboli.core.api import constants as k


def mutate_queue(queue: Mapping) -> dict:
    """Queue CREATE: ``reclaimable`` defaults to true, ``weight`` 0 or missing to 1, and a
    hierarchy path not starting at ``root`` is put under it."""
    out = copy.deepcopy(dict(queue))
    spec = out.setdefault("spec", {})
    if spec is None:
        spec = out["spec"] = {}
    if not isinstance(spec, dict):
        return out  # not an object: validation names the field
    if spec.get("reclaimable") is None:
        spec["reclaimable"] = True
    if not spec.get("weight"):
        spec["weight"] = k.DEFAULT_QUEUE_WEIGHT
    metadata = out.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict):
        return out
    path = annotations.get(k.HIERARCHY_KEY)
    weights = annotations.get(k.HIERARCHY_WEIGHTS_KEY)
    if (
        isinstance(path, str)
        and isinstance(weights, str)
        and path
        and weights
        and not path.startswith(k.ROOT_QUEUE)
    ):
        annotations[k.HIERARCHY_KEY] = f"{k.ROOT_QUEUE}/{path}"
        annotations[k.HIERARCHY_WEIGHTS_KEY] = f"1/{weights}"
    return out


def mutate_podgroup(podgroup: Mapping, namespace_annotations: Mapping[str, str]) -> dict:
    """PodGroup CREATE: a group left in the ``default`` queue goes to its namespace's queue
    when the namespace names one with ``scheduling.volcano.sh/queue-name``."""
    out = copy.deepcopy(dict(podgroup))
    spec = out.setdefault("spec", {})
    if spec is None:
        spec = out["spec"] = {}
    if not isinstance(spec, dict):
        return out  # not an object: validation names the field
    queue = spec.get("queue") or k.DEFAULT_QUEUE
    namespace_queue = namespace_annotations.get(k.QUEUE_NAME_ANNOTATION_KEY)
    if queue == k.DEFAULT_QUEUE and namespace_queue:
        spec["queue"] = namespace_queue
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Job plugins that need the ``svc`` plugin (host names of the other pods).
_PLUGINS_NEEDING_SVC = ("tensorflow", "mpi", "pytorch", "ray")


def mutate_job(job: Mapping, scheduler_name: str = k.DEFAULT_SCHEDULER_NAME) -> dict:
    """Job CREATE: fill what Volcano's job webhook fills.

    ``queue`` (``default``), ``schedulerName`` (the first scheduler name), ``maxRetry`` (3 when
    0 or missing); per task: ``name`` (``default<i>``), ``dnsPolicy`` for host-network
    templates, ``minAvailable`` (``minPartitions × partitionSize`` when a partition policy sets
    ``minPartitions``, else ``replicas``), ``maxRetry`` (3); then ``minAvailable`` of the job
    (the sum of the tasks'), and the ``svc``/``ssh`` plugins the framework plugins rely on.
    Values already set are kept.
    """
    out = copy.deepcopy(dict(job))
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    if not spec.get("queue"):
        spec["queue"] = k.DEFAULT_QUEUE
    if not spec.get("schedulerName"):
        spec["schedulerName"] = scheduler_name
    if not spec.get("maxRetry"):
        spec["maxRetry"] = k.DEFAULT_MAX_RETRY
    tasks = spec.get("tasks")
    total = 0
    for index, task in enumerate(tasks if isinstance(tasks, list) else ()):
        if not isinstance(task, dict):
            continue
        if not task.get("name"):
            task["name"] = f"{k.DEFAULT_TASK_SPEC}{index}"
        template = task.get("template")
        pod_spec = template.get("spec") if isinstance(template, dict) else None
        if (
            isinstance(pod_spec, dict)
            and pod_spec.get("hostNetwork")
            and not pod_spec.get("dnsPolicy")
        ):
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        replicas = task.get("replicas") or 0
        if task.get("minAvailable") is None:
            partition = task.get("partitionPolicy")
            min_partitions = partition.get("minPartitions") if isinstance(partition, dict) else 0
            size = partition.get("partitionSize") if isinstance(partition, dict) else 0
            if _is_int(min_partitions) and min_partitions and _is_int(size or 0):
                task["minAvailable"] = min_partitions * (size or 0)
            else:
                task["minAvailable"] = replicas
        if not task.get("maxRetry"):
            task["maxRetry"] = k.DEFAULT_MAX_RETRY
        minimum = task["minAvailable"]
        total += minimum if isinstance(minimum, int) else 0
    if not spec.get("minAvailable"):
        spec["minAvailable"] = total
    plugins = spec.get("plugins")
    if isinstance(plugins, dict):
        if any(name in plugins for name in _PLUGINS_NEEDING_SVC) and "svc" not in plugins:
            plugins["svc"] = []
        if "mpi" in plugins and "ssh" not in plugins:
            plugins["ssh"] = []
    return out

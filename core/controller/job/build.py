"""The objects the job controller creates for a vcjob, named as Volcano names them.

- the PodGroup ``<job>-<job uid>``: gang size, per-task minimums, queue, priority class,
  network topology, sub-groups of partitioned tasks, and ``minResources``;
- pod ``<job>-<task>-<index>`` from the task's template, with every label and annotation
  Volcano puts on it (group name, task, index, job version, retry count, ...);
- generated PVC names ``<job>-pvc-<12 characters>`` and pod volume names ``<job>-<12>``.

Volcano draws the random parts from a time-seeded generator; here they come from a hash of the
job's uid, so that a simulation (and a replayed reconcile) produces the same names.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.controller.job.spec import JobView, TaskView
from stromboli.core.scheduler.api.quota import quota_list
from stromboli.core.scheduler.api.resource import Resource

PriorityOf = Callable[[str], int | None]
"""The value of a PriorityClass by name, ``None`` when there is no such class."""

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"

#: Job annotations that pods inherit (the jdb pair is exclusive: min-available wins).
INHERITED_ANNOTATIONS = (k.PREEMPTABLE_KEY, k.COOLDOWN_TIME_KEY, k.REVOCABLE_ZONE_KEY)
INHERITED_LABELS = (k.PREEMPTABLE_KEY, k.COOLDOWN_TIME_KEY)


def token(*parts: object, length: int = 12) -> str:
    """A stable name fragment of ``length`` lowercase letters and digits derived from
    ``parts``."""
    digest = int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest(), "big")
    chars = []
    for _ in range(length):
        digest, rest = divmod(digest, len(_ALPHABET))
        chars.append(_ALPHABET[rest])
    return "".join(chars)


def podgroup_name(job_name: str, job_uid: str) -> str:
    return f"{job_name}-{job_uid}"


def pod_name(job_name: str, task_name: str, index: int) -> str:
    return f"{job_name}-{task_name}-{index}"


def pvc_name(job_name: str, job_uid: str, volume_index: int, attempt: int = 0) -> str:
    """Name of the PVC generated for a volume that gives only a claim spec."""
    return f"{job_name}-pvc-{token(job_uid, 'pvc', volume_index, attempt)}"


def volume_name(job_name: str, job_uid: str, claim_name: str) -> str:
    """Name of the pod volume that mounts job volume ``claim_name``."""
    return f"{job_name}-{token(job_uid, 'volume', claim_name)}"


def controller_ref(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


# --- PodGroup ------------------------------------------------------------------------------


def _by_priority(view: JobView, priority_of: PriorityOf) -> list[TaskView]:
    """Tasks by their template's PriorityClass value, highest first (stable); a task naming
    no class, or one that does not exist, counts as 0."""
    return sorted(
        view.tasks,
        key=lambda t: -((priority_of(t.priority_class_name) or 0) if t.priority_class_name else 0),
    )


def min_resources(view: JobView, priority_of: PriorityOf) -> dict[str, str]:
    """Resources the job needs to be admitted: the quota usage of its first ``minAvailable``
    pods (``cpu``, ``memory``, ``pods``, ``count/pods``, ``requests.*``, ...; see ``quota.py``).

    Tasks go by priority, highest first. When the job's minAvailable is below the sum of the
    tasks' minimums, the first minAvailable replicas in that order count; otherwise each
    task's minimum counts, topped up to minAvailable from the remaining replicas.
    """
    tasks = _by_priority(view, priority_of)
    total_minimum = sum(t.replicas if t.min_available is None else t.min_available for t in tasks)
    wanted = view.min_available
    need = Resource()
    if wanted < total_minimum:
        for task in tasks:
            if wanted <= task.replicas:
                need.add(task.quota.clone().multi(wanted))
                break
            need.add(task.quota.clone().multi(task.replicas))
            wanted -= task.replicas
        return quota_list(need)
    counted = 0
    for task in tasks:
        if task.min_available is None:
            continue
        take = min(task.min_available, wanted - counted)
        need.add(task.quota.clone().multi(take))
        counted += take
        if counted >= wanted:
            return quota_list(need)
    left = wanted - counted
    for task in tasks:
        spare = task.replicas
        if task.min_available is not None:
            if task.min_available == task.replicas:
                continue
            spare = task.replicas - task.min_available
        take = min(spare, left)
        need.add(task.quota.clone().multi(take))
        left -= take
        if left <= 0:
            break
    return quota_list(need)


def _topology(spec: Mapping[str, Any] | None, *, exclusive: bool) -> dict[str, Any] | None:
    if spec is None:
        return None
    out: dict[str, Any] = {"mode": spec.get("mode") or k.NetworkTopologyMode.HARD}
    if spec.get("highestTierAllowed") is not None:
        out["highestTierAllowed"] = spec["highestTierAllowed"]
        if exclusive:
            return out
    if spec.get("highestTierName"):
        out["highestTierName"] = spec["highestTierName"]
    return out


def subgroup_policies(view: JobView) -> list[dict[str, Any]]:
    """One sub-group per partitioned task: its partitions, grouped by partition id."""
    policies = []
    for task in view.tasks:
        if not task.partitioned:
            continue
        policy: dict[str, Any] = {
            "name": task.name,
            "subGroupSize": task.partition_size,
            "minSubGroups": task.min_partitions,
            "labelSelector": {"matchLabels": {k.TASK_SPEC_KEY: task.name}},
            "matchLabelKeys": [k.PARTITION_ID_KEY],
        }
        topology = _topology(task.partition_topology, exclusive=False)
        if topology is not None:
            policy["networkTopology"] = topology
        policies.append(policy)
    return policies


def podgroup_spec(view: JobView, priority_of: PriorityOf) -> dict[str, Any]:
    """The PodGroup spec the job asks for (the fields the controller keeps in step)."""
    spec: dict[str, Any] = {
        "minMember": view.min_available,
        "minTaskMember": {t.name: t.min_member for t in view.tasks},
        "queue": view.queue,
        "minResources": min_resources(view, priority_of),
    }
    if view.priority_class_name:
        spec["priorityClassName"] = view.priority_class_name
    topology = _topology(view.network_topology, exclusive=True)
    if topology is not None:
        spec["networkTopology"] = topology
    subgroups = subgroup_policies(view)
    if subgroups:
        spec["subGroupPolicy"] = subgroups
    return spec


def build_podgroup(job: Mapping[str, Any], view: JobView, priority_of: PriorityOf) -> dict:
    meta = job.get("metadata") or {}
    pg_meta: dict[str, Any] = {
        "name": podgroup_name(view.name, view.uid),
        "namespace": view.namespace,
        "ownerReferences": [controller_ref(job)],
    }
    if meta.get("labels"):
        pg_meta["labels"] = dict(meta["labels"])
    if meta.get("annotations"):
        pg_meta["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "PodGroup",
        "metadata": pg_meta,
        "spec": podgroup_spec(view, priority_of),
    }


def podgroup_drift(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The spec fields of an existing PodGroup that differ from what the job asks for
    (minMember, minResources, priorityClassName, minTaskMember, subGroupPolicy), as a merge
    patch of ``spec``; empty when nothing changed. The queue and topology are not updated."""
    patch: dict[str, Any] = {}
    if (current.get("priorityClassName") or "") != (wanted.get("priorityClassName") or ""):
        patch["priorityClassName"] = wanted.get("priorityClassName")
    if current.get("minMember") != wanted["minMember"] or _resources(
        current.get("minResources")
    ) != _resources(wanted["minResources"]):
        patch["minMember"] = wanted["minMember"]
        patch["minResources"] = wanted["minResources"]
    have_tasks = current.get("minTaskMember") or {}
    if any(have_tasks.get(name) != n for name, n in wanted["minTaskMember"].items()):
        patch["minTaskMember"] = {**have_tasks, **wanted["minTaskMember"]}
    if (current.get("subGroupPolicy") or []) != (wanted.get("subGroupPolicy") or []):
        patch["subGroupPolicy"] = wanted.get("subGroupPolicy") or None
    return patch


def _resources(value: Any) -> Resource:
    try:
        return Resource.from_list(value if isinstance(value, Mapping) else None)
    except ValueError:
        return Resource({"<invalid>": 1.0})


# --- pods ----------------------------------------------------------------------------------


def build_pod(
    job: Mapping[str, Any],
    view: JobView,
    task: TaskView,
    index: int,
    *,
    version: int,
    retry_count: int,
    forwarding: bool = False,
) -> dict[str, Any]:
    """Replica ``index`` of ``task`` as Volcano's controller builds it (before job plugins)."""
    template = copy.deepcopy(task.template)
    template_meta = template.get("metadata") or {}
    spec: dict[str, Any] = template.get("spec") or {}
    job_meta = job.get("metadata") or {}
    job_annotations = job_meta.get("annotations") or {}
    job_labels = job_meta.get("labels") or {}
    if not spec.get("schedulerName") and view.scheduler_name:
        spec["schedulerName"] = view.scheduler_name
    if not spec.get("priorityClassName") and view.priority_class_name:
        spec["priorityClassName"] = view.priority_class_name
    _mount_volumes(spec, view)

    position = str(index)
    annotations = dict(template_meta.get("annotations") or {})
    annotations[k.TASK_INDEX_KEY] = position
    annotations[k.TASK_SPEC_KEY] = task.name
    annotations[k.GROUP_NAME_ANNOTATION] = podgroup_name(view.name, view.uid)
    annotations[k.JOB_NAME_KEY] = view.name
    annotations[k.QUEUE_NAME_KEY] = view.queue
    annotations[k.JOB_VERSION_KEY] = str(version)
    annotations[k.TEMPLATE_UID_KEY] = f"{view.name}-{task.name}"
    annotations[k.JOB_RETRY_COUNT_KEY] = str(retry_count)
    if task.topology_policy:
        annotations[k.NUMA_TOPOLOGY_POLICY_KEY] = task.topology_policy
    for key in INHERITED_ANNOTATIONS:
        if key in job_annotations:
            annotations[key] = job_annotations[key]
    if k.JDB_MIN_AVAILABLE_KEY in job_annotations:
        annotations[k.JDB_MIN_AVAILABLE_KEY] = job_annotations[k.JDB_MIN_AVAILABLE_KEY]
    elif k.JDB_MAX_UNAVAILABLE_KEY in job_annotations:
        annotations[k.JDB_MAX_UNAVAILABLE_KEY] = job_annotations[k.JDB_MAX_UNAVAILABLE_KEY]

    labels = dict(template_meta.get("labels") or {})
    labels[k.TASK_INDEX_KEY] = position
    labels[k.JOB_NAME_KEY] = view.name
    labels[k.TASK_SPEC_KEY] = task.name
    labels[k.JOB_NAMESPACE_KEY] = view.namespace
    labels[k.QUEUE_NAME_KEY] = view.queue
    for key in INHERITED_LABELS:
        if key in job_labels:
            labels[key] = job_labels[key]
    if forwarding:
        annotations[k.JOB_FORWARDING_KEY] = "true"
        labels[k.JOB_FORWARDING_KEY] = "true"
    if task.partitioned:
        partition = index // task.partition_size if task.partition_size > 0 else 0
        labels[k.PARTITION_ID_KEY] = str(partition)

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(view.name, task.name, index),
            "namespace": view.namespace,
            "ownerReferences": [controller_ref(job)],
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def _mount_volumes(spec: dict[str, Any], view: JobView) -> None:
    """Mount every job volume (by claim) in every container; a claim listed twice is skipped."""
    seen: set[str] = set()
    for volume in view.volumes:
        claim = str(volume.get("volumeClaimName") or "")
        if not claim or claim in seen:
            continue
        seen.add(claim)
        name = volume_name(view.name, view.uid, claim)
        spec.setdefault("volumes", []).append(
            {"name": name, "persistentVolumeClaim": {"claimName": claim}}
        )
        for container in spec.get("containers") or ():
            container.setdefault("volumeMounts", []).append(
                {"mountPath": volume.get("mountPath"), "name": name}
            )

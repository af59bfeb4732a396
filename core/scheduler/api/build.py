"""Turn stored objects (plain dicts) into the scheduler's node and task records.

Done once per object version in the cache; sessions only clone the results.
"""

from __future__ import annotations

import hashlib

import orjson

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.node import NodeInfo, host_ports
from stromboli.core.scheduler.api.pod import (
    annotation_or_label,
    is_scheduling_gated,
    parse_bool,
    pod_index,
    pod_requests,
    task_priority,
)
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.api.status import status_from_pod

#: Pod spec fields that decide where a pod may go and how it scores: pods equal on these
#: share one equivalence class ("shape"), so per-node feasibility is computed once per shape.
_SHAPE_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priority",
    "schedulingGates",
    "overhead",
)


def node_info_from(node: dict) -> NodeInfo:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    return NodeInfo(
        name=meta["name"],
        position=-1,
        node=node,
        labels=dict(meta.get("labels") or {}),
        taints=list(spec.get("taints") or []),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=Resource.from_list(allocatable, "status.allocatable"),
    )


def pod_shape(pod: dict, requests: Resource) -> str:
    """A digest of everything that makes two pods place alike."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    parts = {name: spec.get(name) for name in _SHAPE_FIELDS if spec.get(name) is not None}
    parts["ns"] = meta.get("namespace", "default")
    parts["labels"] = meta.get("labels") or {}
    parts["req"] = requests.amounts
    parts["ports"] = [c.get("ports") for c in spec.get("containers") or () if c.get("ports")]
    parts["images"] = [c.get("image") for c in spec.get("containers") or ()]
    digest = hashlib.blake2b(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS), digest_size=12)
    return digest.hexdigest()


def score_shape(pod: dict, requests: Resource) -> str:
    """A digest of what per-node scores of a pod depend on."""
    spec = pod.get("spec") or {}
    parts = {
        "req": requests.amounts,
        "node_affinity": (spec.get("affinity") or {}).get("nodeAffinity"),
        "images": [c.get("image") for c in spec.get("containers") or ()],
    }
    digest = hashlib.blake2b(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS), digest_size=12)
    return digest.hexdigest()


def _template(pod: dict) -> tuple:
    """What a task's static facts are computed from: the spec without ``nodeName``, and the
    labels and annotations."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (
        {key: value for key, value in spec.items() if key != "nodeName"},
        meta.get("labels"),
        meta.get("annotations"),
    )


def task_info_from(pod: dict, job_id: str, previous: TaskInfo | None = None) -> TaskInfo:
    """The task record of ``pod``; ``previous`` (the record of the pod's last version) lets
    an update that only moved the pod along its lifecycle skip re-parsing requests and
    shapes, which is most pod updates."""
    if previous is not None and _template(previous.pod) == _template(pod):
        task = previous.clone()
        task.pod = pod
        task.job_id = job_id
        task.status = status_from_pod(pod)
        task.node_name = (pod.get("spec") or {}).get("nodeName") or ""
        task.nominated_node = (pod.get("status") or {}).get("nominatedNodeName") or ""
        task.last_status = None
        task.last_node = ""
        return task
    meta = pod.get("metadata") or {}
    running, scheduling = pod_requests(pod)
    name = meta["name"]
    return TaskInfo(
        uid=meta.get("uid") or f"{meta.get('namespace', 'default')}/{name}",
        name=name,
        namespace=meta.get("namespace", "default"),
        job_id=job_id,
        role=annotation_or_label(pod, k.TASK_SPEC_KEY) or "",
        pod=pod,
        resreq=running,
        init_resreq=scheduling,
        status=status_from_pod(pod),
        priority=task_priority(pod),
        preemptable=parse_bool(annotation_or_label(pod, k.PREEMPTABLE_KEY), True),
        best_effort=scheduling.is_empty(),
        gated=is_scheduling_gated(pod),
        shape=pod_shape(pod, scheduling),
        score_shape=score_shape(pod, scheduling),
        host_ports=tuple(host_ports(pod)),
        creation=meta.get("creationTimestamp") or "",
        index=pod_index(name),
        node_name=(pod.get("spec") or {}).get("nodeName") or "",
        nominated_node=(pod.get("status") or {}).get("nominatedNodeName") or "",
    )

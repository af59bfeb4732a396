"""Turn stored objects (plain dicts) into the scheduler's node and task records.

Done once per object version in the cache; sessions only clone the results.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

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
    without_ignored_devices,
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
        allocatable=Resource.from_list(without_ignored_devices(allocatable), "status.allocatable"),
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


#: Annotations (or labels of the same key) a task's static facts read.
_READ_ANNOTATIONS = (k.TASK_SPEC_KEY, k.PREEMPTABLE_KEY, k.TASK_PRIORITY_KEY)
#: Container fields a task's static facts read (requests, ports, images, sidecar policy).
_READ_CONTAINER_FIELDS = ("resources", "ports", "image", "restartPolicy")
#: Templates remembered; the oldest is forgotten first, so distinct pods cannot grow it.
TEMPLATE_MEMO_SIZE = 4096


@dataclass(slots=True, frozen=True)
class TaskTemplate:
    """What a task record takes from its pod's template rather than from the pod itself:
    equal for every replica of one task, so parsed once and shared (read-only)."""

    role: str
    resreq: Resource
    init_resreq: Resource
    priority: int
    preemptable: bool
    best_effort: bool
    gated: bool
    shape: str
    score_shape: str
    host_ports: tuple[tuple[str, str, int], ...]


def template_of(pod: dict) -> TaskTemplate:
    """A pod's template facts, parsed from scratch."""
    running, scheduling = pod_requests(pod)
    return TaskTemplate(
        role=annotation_or_label(pod, k.TASK_SPEC_KEY) or "",
        resreq=running,
        init_resreq=scheduling,
        priority=task_priority(pod),
        preemptable=parse_bool(annotation_or_label(pod, k.PREEMPTABLE_KEY), True),
        best_effort=scheduling.is_empty(),
        gated=is_scheduling_gated(pod),
        shape=pod_shape(pod, scheduling),
        score_shape=score_shape(pod, scheduling),
        host_ports=tuple(host_ports(pod)),
    )


def _projected_containers(containers: Any) -> list[dict] | None:
    if not isinstance(containers, list):
        return None
    out = []
    for container in containers:
        if not isinstance(container, dict):
            return None
        out.append({f: container[f] for f in _READ_CONTAINER_FIELDS if f in container})
    return out


def template_projection(pod: dict) -> dict | None:
    """The part of ``pod`` that ``template_of`` reads, shaped as a pod (so ``template_of`` of
    it equals ``template_of`` of the pod); None when the pod is too odd to project, which
    only means it is parsed on its own. Leaves out what differs between replicas (name,
    uid, ``nodeName``, env, volumes, other annotations)."""
    meta = pod.get("metadata")
    spec = pod.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return None
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        return None
    projected_spec = {f: spec[f] for f in _SHAPE_FIELDS if f in spec}
    for field_name in ("containers", "initContainers"):
        if field_name in spec:
            containers = _projected_containers(spec[field_name])
            if containers is None:
                return None
            projected_spec[field_name] = containers
    projected_meta: dict[str, Any] = {
        "annotations": {a: annotations[a] for a in _READ_ANNOTATIONS if a in annotations}
    }
    for field_name in ("namespace", "labels"):
        if field_name in meta:
            projected_meta[field_name] = meta[field_name]
    return {"metadata": projected_meta, "spec": projected_spec}


class TemplateMemo:
    """Task templates by the bytes of their projection: two pods with byte-equal projections
    read the same (``template_of`` reads nothing else), so the second is never parsed."""

    def __init__(self, size: int = TEMPLATE_MEMO_SIZE) -> None:
        self.size = size
        self._templates: dict[bytes, TaskTemplate] = {}
        self.hits = 0
        self.misses = 0

    def template(self, pod: dict) -> TaskTemplate:
        projected = template_projection(pod)
        key = None
        if projected is not None:
            try:
                key = orjson.dumps(projected)
            except (TypeError, orjson.JSONEncodeError):
                key = None  # not plain JSON (too deep, huge ints): parse the pod itself
        if key is not None:
            found = self._templates.get(key)
            if found is not None:
                self.hits += 1
                return found
        self.misses += 1
        made = template_of(pod)
        if key is not None:
            if len(self._templates) >= self.size:
                del self._templates[next(iter(self._templates))]
            self._templates[key] = made
        return made


#: Shared by every cache of the process: a template's facts depend on its bytes only.
TEMPLATES = TemplateMemo()


def task_info_from(
    pod: dict, job_id: str, previous: TaskInfo | None = None, memo: TemplateMemo = TEMPLATES
) -> TaskInfo:
    """The task record of ``pod``; ``previous`` (the record of the pod's last version) lets
    an update that only moved the pod along its lifecycle skip re-parsing requests and
    shapes, which is most pod updates; ``memo`` shares the parse between replicas of one
    template, which is most pods of a restart's first list."""
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
    spec = pod.get("spec") or {}
    template = memo.template(pod)
    name = meta["name"]
    return TaskInfo(
        uid=meta.get("uid") or f"{meta.get('namespace', 'default')}/{name}",
        name=name,
        namespace=meta.get("namespace", "default"),
        job_id=job_id,
        role=template.role,
        pod=pod,
        resreq=template.resreq,
        init_resreq=template.init_resreq,
        status=status_from_pod(pod),
        priority=template.priority,
        preemptable=template.preemptable,
        best_effort=template.best_effort,
        gated=template.gated,
        shape=template.shape,
        score_shape=template.score_shape,
        host_ports=template.host_ports,
        creation=meta.get("creationTimestamp") or "",
        index=pod_index(name),
        node_name=spec.get("nodeName") or "",
        nominated_node=(pod.get("status") or {}).get("nominatedNodeName") or "",
    )

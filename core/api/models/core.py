"""Light models of the Kubernetes objects the scheduler reads (core/v1, scheduling.k8s.io/v1).

Only the fields that scheduling depends on are typed (so that a bad quantity or a misspelt
``nodeName`` type fails at the edge); everything else is kept as given, because these are
Kubernetes' types, not ours, and new Kubernetes releases add fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stromboli.core.api.constants import CORE_V1, K8S_SCHEDULING_V1, PodPhase
from stromboli.core.api.models.common import (
    Bool,
    FreeForm,
    Int32,
    Int64,
    LabelSelector,
    LooseModel,
    LooseResource,
    ResourceList,
    Timestamp,
)

# --- Pod -----------------------------------------------------------------------------------------


class ResourceRequirements(LooseModel):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class ContainerPort(LooseModel):
    name: str | None = None
    container_port: Int32 | None = None
    host_port: Int32 | None = None
    host_ip: str | None = Field(None, alias="hostIP")
    protocol: str | None = None


class Container(LooseModel):
    name: str
    image: str | None = None
    resources: ResourceRequirements | None = None
    ports: list[ContainerPort] | None = None


class Toleration(LooseModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: Int64 | None = None


class TopologySpreadConstraint(LooseModel):
    max_skew: Int32
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: Int32 | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


class PodSchedulingGate(LooseModel):
    name: str


class PodSpec(LooseModel):
    containers: list[Container]
    init_containers: list[Container] | None = None
    overhead: ResourceList | None = None
    node_name: str | None = None
    scheduler_name: str | None = None
    priority: Int32 | None = None
    priority_class_name: str | None = None
    affinity: FreeForm | None = None
    tolerations: list[Toleration] | None = None
    node_selector: dict[str, str] | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    scheduling_gates: list[PodSchedulingGate] | None = None


class PodStatus(LooseModel):
    phase: PodPhase | None = None
    start_time: Timestamp | None = None
    nominated_node_name: str | None = None


class Pod(LooseResource):
    api_version: Literal["v1"] = CORE_V1
    kind: Literal["Pod"] = "Pod"
    spec: PodSpec
    status: PodStatus | None = None


# --- Node ----------------------------------------------------------------------------------------


class Taint(LooseModel):
    key: str
    value: str | None = None
    effect: str
    time_added: Timestamp | None = None


class NodeSpec(LooseModel):
    unschedulable: Bool | None = None
    taints: list[Taint] | None = None


class NodeStatus(LooseModel):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None


class Node(LooseResource):
    api_version: Literal["v1"] = CORE_V1
    kind: Literal["Node"] = "Node"
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


# --- Others --------------------------------------------------------------------------------------


class PriorityClass(LooseResource):
    """Priority of pods and, through PodGroup ``priorityClassName``, of whole jobs."""

    api_version: Literal["scheduling.k8s.io/v1"] = K8S_SCHEDULING_V1
    kind: Literal["PriorityClass"] = "PriorityClass"
    value: Int32
    global_default: Bool | None = None
    preemption_policy: str | None = None
    description: str | None = None


class Namespace(LooseResource):
    api_version: Literal["v1"] = CORE_V1
    kind: Literal["Namespace"] = "Namespace"


class ResourceQuotaSpec(LooseModel):
    hard: ResourceList | None = None
    scopes: list[str] | None = None
    scope_selector: FreeForm | None = None


class ResourceQuotaStatus(LooseModel):
    hard: ResourceList | None = None
    used: ResourceList | None = None


class ResourceQuota(LooseResource):
    api_version: Literal["v1"] = CORE_V1
    kind: Literal["ResourceQuota"] = "ResourceQuota"
    spec: ResourceQuotaSpec | None = None
    status: ResourceQuotaStatus | None = None


class KubeObject(LooseResource):
    """Any other known kind: metadata checked, the rest kept as given."""

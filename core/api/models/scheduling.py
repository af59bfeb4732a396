"""``scheduling.volcano.sh/v1beta1``: Queue and PodGroup, the objects the scheduler works on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stromboli.core.api.constants import (
    DEFAULT_QUEUE,
    DEFAULT_QUEUE_WEIGHT,
    MAX_QUEUE_WEIGHT,
    SCHEDULING_V1BETA1,
    ConditionStatus,
    DequeueStrategy,
    NetworkTopologyMode,
    PodGroupConditionType,
    PodGroupPhase,
    QueueState,
)
from stromboli.core.api.models.common import (
    ApiModel,
    Bool,
    Int32,
    LabelSelector,
    OptionalDNSSubdomain,
    Resource,
    ResourceList,
    Timestamp,
)

# --- Queue ---------------------------------------------------------------------------------------


class Guarantee(ApiModel):
    """Resources reserved for a queue and deducted from what the others may use."""

    resource: ResourceList | None = None


class Cluster(ApiModel):
    """A member cluster a queue may forward jobs to (multi-cluster dispatch)."""

    name: str | None = None
    weight: Int32 | None = None
    capacity: ResourceList | None = None


class NodeGroupAffinity(ApiModel):
    """Node groups (node label ``volcano.sh/nodegroup-name``) a queue's jobs must or may use."""

    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class QueueAffinity(ApiModel):
    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class QueueSpec(ApiModel):
    weight: Int32 = Field(
        DEFAULT_QUEUE_WEIGHT,
        ge=1,
        le=MAX_QUEUE_WEIGHT,
        description="Proportional share weight used by the proportion plugin.",
    )
    capability: ResourceList | None = Field(
        None, description="Hard upper limit of the queue's usage; missing dimensions are unlimited."
    )
    deserved: ResourceList | None = Field(
        None, description="Share the queue may lend and reclaim (capacity plugin)."
    )
    guarantee: Guarantee | None = None
    reclaimable: Bool | None = Field(
        None, description="Whether other queues may reclaim from this one; unset means true."
    )
    parent: OptionalDNSSubdomain | None = Field(
        None, description="Parent queue in the hierarchy; empty means root."
    )
    priority: Int32 | None = Field(
        None, ge=0, description="Higher is ordered first and reclaimed later."
    )
    type: str | None = Field(None, max_length=253)
    affinity: QueueAffinity | None = None
    extend_clusters: list[Cluster] | None = None
    dequeue_strategy: DequeueStrategy = DequeueStrategy.TRAVERSE


class Reservation(ApiModel):
    nodes: list[str] | None = None
    resource: ResourceList | None = None


class QueueStatus(ApiModel):
    state: QueueState | None = None
    unknown: Int32 | None = None
    pending: Int32 | None = None
    running: Int32 | None = None
    inqueue: Int32 | None = None
    completed: Int32 | None = None
    reservation: Reservation | None = None
    allocated: ResourceList | None = Field(
        None, description="Resources of allocated tasks, written by the scheduler each session."
    )


class Queue(Resource):
    """A share of the cluster; cluster-scoped, identified by its name."""

    api_version: Literal["scheduling.volcano.sh/v1beta1"] = SCHEDULING_V1BETA1
    kind: Literal["Queue"] = "Queue"
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus | None = None


# --- PodGroup ------------------------------------------------------------------------------------


class NetworkTopologySpec(ApiModel):
    """How tightly a gang must be packed in the HyperNode tree."""

    mode: NetworkTopologyMode = NetworkTopologyMode.HARD
    highest_tier_allowed: Int32 | None = Field(None, ge=0)
    highest_tier_name: str | None = Field(None, max_length=253)


class SubGroupPolicySpec(ApiModel):
    """Splits a PodGroup into sub-gangs by identical values of ``matchLabelKeys``."""

    name: str | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: Int32 = Field(1, ge=1)
    min_sub_groups: Int32 = Field(0, ge=0)
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None


class PodGroupSpec(ApiModel):
    min_member: Int32 | None = Field(
        None, ge=0, description="Gang size: pods that must be schedulable together."
    )
    min_task_member: dict[str, Int32] | None = Field(
        None, description="Per-role minimum, keyed by the volcano.sh/task-spec value."
    )
    queue: OptionalDNSSubdomain = DEFAULT_QUEUE
    priority_class_name: str | None = Field(None, max_length=253)
    min_resources: ResourceList | None = Field(
        None, description="Resources required before the group may be enqueued."
    )
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicySpec] | None = None


class PodGroupCondition(ApiModel):
    type: PodGroupConditionType | None = None
    status: ConditionStatus | None = None
    transition_id: str | None = Field(None, alias="transitionID")
    last_transition_time: Timestamp | None = None
    reason: str | None = None
    message: str | None = None


class PodGroupStatus(ApiModel):
    phase: PodGroupPhase | None = None
    conditions: list[PodGroupCondition] | None = None
    running: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None


class PodGroup(Resource):
    """A gang: pods linked by ``scheduling.k8s.io/group-name`` scheduled all or nothing."""

    api_version: Literal["scheduling.volcano.sh/v1beta1"] = SCHEDULING_V1BETA1
    kind: Literal["PodGroup"] = "PodGroup"
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus | None = None

"""Wire strings of the Volcano API: groups, defaults, annotation and label keys, enums.

Every string that travels over the API lives here exactly once, so that a spelling mistake is
an import error instead of a silent mismatch with what Volcano, KubeRay or the Spark operator
write. Enums are ``StrEnum`` so their members compare equal to the raw strings found in YAML.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

# --- API groups and versions -----------------------------------------------------------------

SCHEDULING_GROUP = "scheduling.volcano.sh"
BATCH_GROUP = "batch.volcano.sh"
BUS_GROUP = "bus.volcano.sh"
FLOW_GROUP = "flow.volcano.sh"
TOPOLOGY_GROUP = "topology.volcano.sh"
NODEINFO_GROUP = "nodeinfo.volcano.sh"

# Spelled out (not built from the groups) and Final, so that type checkers see each as the
# literal the models' ``apiVersion`` fields require.
SCHEDULING_V1BETA1: Final = "scheduling.volcano.sh/v1beta1"
BATCH_V1ALPHA1: Final = "batch.volcano.sh/v1alpha1"
BUS_V1ALPHA1: Final = "bus.volcano.sh/v1alpha1"
FLOW_V1ALPHA1: Final = "flow.volcano.sh/v1alpha1"
TOPOLOGY_V1ALPHA1: Final = "topology.volcano.sh/v1alpha1"
NODEINFO_V1ALPHA1: Final = "nodeinfo.volcano.sh/v1alpha1"

CORE_V1: Final = "v1"
APPS_V1: Final = "apps/v1"
K8S_BATCH_V1: Final = "batch/v1"
POLICY_V1: Final = "policy/v1"
K8S_SCHEDULING_V1: Final = "scheduling.k8s.io/v1"
EVENTS_V1: Final = "events.k8s.io/v1"
COORDINATION_V1: Final = "coordination.k8s.io/v1"
NETWORKING_V1: Final = "networking.k8s.io/v1"
STORAGE_V1: Final = "storage.k8s.io/v1"
APIEXTENSIONS_V1: Final = "apiextensions.k8s.io/v1"

# --- Built-in names and defaults -------------------------------------------------------------

DEFAULT_SCHEDULER_NAME = "volcano"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
DEFAULT_QUEUE_WEIGHT = 1
MAX_QUEUE_WEIGHT = 65535
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_SPEC = "default"
"""Task (role) name assumed for pods without ``volcano.sh/task-spec``."""
DEFAULT_JOB_TYPE = "Batch"
DEFAULT_TASK_PRIORITY = 1
"""TaskInfo priority used when a pod has no ``.spec.priority``."""
MAX_CRONJOB_NAME_LENGTH = 52
"""63 minus the 11 characters of the ``-<minutes since epoch>`` suffix of created jobs."""
CLUSTER_TOP_HYPERNODE = "<cluster-top-hypernode>"
"""Name of the virtual root HyperNode the scheduler adds above all parentless ones."""
HELM_RESOURCE_POLICY_ANNOTATION = "helm.sh/resource-policy"

# --- Pod <-> PodGroup / queue linkage --------------------------------------------------------

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
"""The one link from a pod to its PodGroup (same namespace)."""
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.volcano.sh/group-name"
GROUP_MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
GROUP_MIN_RESOURCES_ANNOTATION = "scheduling.volcano.sh/group-min-resources"
QUEUE_NAME_ANNOTATION_KEY = "scheduling.volcano.sh/queue-name"
"""Pod annotation naming the queue of an auto PodGroup; also a namespace annotation."""
QUEUE_ALLOCATION_GATE_KEY = "scheduling.volcano.sh/queue-allocation-gate"
"""Pod annotation (opt-in ``"true"``) and scheduling-gate name for queue admission."""

QUEUE_NAME_KEY = "volcano.sh/queue-name"
"""Label and annotation on vcjob pods (informational; differs from the pod-level key above)."""
JOB_NAME_KEY = "volcano.sh/job-name"
JOB_NAMESPACE_KEY = "volcano.sh/job-namespace"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_VERSION_KEY = "volcano.sh/job-version"
JOB_RETRY_COUNT_KEY = "volcano.sh/job-retry-count"
TEMPLATE_UID_KEY = "volcano.sh/template-uid"
PARTITION_ID_KEY = "volcano.sh/partition-id"
JOB_TYPE_KEY = "volcano.sh/job-type"
JOB_FORWARDING_KEY = "volcano.sh/job-forwarding"
FORWARD_CLUSTER_KEY = "volcano.sh/forward-cluster"
BURST_NAME_KEY = "volcano.sh/burst-name"
SILO_RESOURCE_KEY = "volcano.sh/silo-resource"
CONTROLLER_OUT_OF_SYNC_KEY = "volcano.sh/controller-out-of-sync"
CRONJOB_SCHEDULED_TIMESTAMP_KEY = "volcano.sh/cronjob-scheduled-timestamp"
CREATED_BY_JOB_TEMPLATE_KEY = "volcano.sh/createdByJobTemplate"
CREATED_BY_JOB_FLOW_KEY = "volcano.sh/createdByJobFlow"

# --- Scheduling behaviour keys ---------------------------------------------------------------

PREEMPTABLE_KEY = "volcano.sh/preemptable"
"""Default true for pods, false for PodGroups/jobs; the annotation wins over the label."""
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
COOLDOWN_TIME_KEY = "volcano.sh/cooldown-time"
JDB_MIN_AVAILABLE_KEY = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE_KEY = "volcano.sh/jdb-max-unavailable"
NUMA_TOPOLOGY_POLICY_KEY = "volcano.sh/numa-topology-policy"
TOPOLOGY_DECISION_KEY = "volcano.sh/topology-decision"
QOS_LEVEL_KEY = "volcano.sh/qos-level"
TASK_PRIORITY_KEY = "volcano.sh/task-priority"
SLA_WAITING_TIME_KEY = "volcano.sh/sla-waiting-time"
SLA_WAITING_TIME_BARE_KEY = "sla-waiting-time"
TASK_TOPOLOGY_KEY = "volcano.sh/task-topology"
TASK_TOPOLOGY_AFFINITY_KEY = "volcano.sh/task-topology-affinity"
TASK_TOPOLOGY_ANTI_AFFINITY_KEY = "volcano.sh/task-topology-anti-affinity"
TASK_TOPOLOGY_TASK_ORDER_KEY = "volcano.sh/task-topology-task-order"
RESOURCE_STRATEGY_SCORING_TYPE_KEY = "volcano.sh/resource-strategy-scoring-type"
RESOURCE_STRATEGY_WEIGHT_KEY = "volcano.sh/resource-strategy-weight"
NETWORK_TOPOLOGY_MODE_KEY = "volcano.sh/network-topology-mode"
NETWORK_TOPOLOGY_HIGHEST_TIER_KEY = "volcano.sh/network-topology-highest-tier"
JOB_ALLOCATED_HYPERNODE_KEY = "volcano.sh/job-allocated-hypernode"
HIERARCHY_KEY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_KEY = "volcano.sh/hierarchy-weights"
NODEGROUP_NAME_KEY = "volcano.sh/nodegroup-name"
NODEGROUP_RESOURCE_LIMITS_KEY = "volcano.sh/nodegroup-resource-limits"
CLOSED_BY_PARENT_KEY = "volcano.sh/closed-by-parent"
RESOURCE_GROUP_KEY = "volcano.sh/resource-group"
NETWORK_TOPOLOGY_SOURCE_KEY = "volcano.sh/network-topology-source"

# vGPU and GPU-share bookkeeping.
VGPU_MODE_KEY = "volcano.sh/vgpu-mode"
VGPU_PODGROUP_POLICY_KEY = "volcano.sh/vgpu-podgroup-policy"
USE_GPU_TYPE_KEY = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE_KEY = "nvidia.com/nouse-gputype"
VGPU_USE_UUID_KEY = "volcano.sh/vgpu-use-gpuuuid"
VGPU_NOUSE_UUID_KEY = "volcano.sh/vgpu-nouse-gpuuuid"
GPU_INDEX_KEY = "volcano.sh/gpu-index"
PREDICATE_TIME_KEY = "volcano.sh/predicate-time"
GPU_UNHEALTHY_IDS_KEY = "volcano.sh/gpu-unhealthy-ids"
VGPU_IDS_NEW_KEY = "volcano.sh/vgpu-ids-new"
DEVICES_TO_ALLOCATE_KEY = "volcano.sh/devices-to-allocate"
VGPU_NODE_KEY = "volcano.sh/vgpu-node"
VGPU_TIME_KEY = "volcano.sh/vgpu-time"
BIND_TIME_KEY = "volcano.sh/bind-time"
BIND_PHASE_KEY = "volcano.sh/bind-phase"
NODE_VGPU_REGISTER_KEY = "volcano.sh/node-vgpu-register"

# Agent / colocation node labels.
OVERSUBSCRIPTION_KEY = "volcano.sh/oversubscription"
OFFLINE_JOB_EVICTING_KEY = "volcano.sh/offline-job-evicting"

# Node labels used by label-based HyperNode discovery.
TOR_LABEL = "volcano.sh/tor"
HYPERCLUSTER_LABEL = "volcano.sh/hypercluster"
HYPERNODE_LABEL = "volcano.sh/hypernode"
HOSTNAME_LABEL = "kubernetes.io/hostname"

# --- Simulator annotations (Stromboli's own) -------------------------------------------------

SIM_SUBMIT_AT_ANNOTATION = "sim.stromboli.dev/submit-at"
SIM_RUNTIME_ANNOTATION = "sim.stromboli.dev/runtime"
SIM_EXIT_CODE_ANNOTATION = "sim.stromboli.dev/exit-code"


# --- Enums -----------------------------------------------------------------------------------


class PodGroupPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    INQUEUE = "Inqueue"
    COMPLETED = "Completed"


class PodGroupConditionType(StrEnum):
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULED = "Scheduled"


class PodGroupConditionReason(StrEnum):
    POD_FAILED = "PodFailed"
    POD_DELETED = "PodDeleted"
    NOT_ENOUGH_RESOURCES = "NotEnoughResources"
    NOT_ENOUGH_TASKS = "NotEnoughTasks"
    NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"


PODGROUP_READY_DETAIL = "pod group is ready"
PODGROUP_NOT_READY_DETAIL = "pod group is not ready"


class QueueState(StrEnum):
    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"


class DequeueStrategy(StrEnum):
    FIFO = "fifo"
    TRAVERSE = "traverse"


class NetworkTopologyMode(StrEnum):
    HARD = "hard"
    SOFT = "soft"


class JobPhase(StrEnum):
    PENDING = "Pending"
    ABORTING = "Aborting"
    ABORTED = "Aborted"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"
    FAILED = "Failed"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class Action(StrEnum):
    """Bus actions: what a policy or a Command asks the controllers to do."""

    ABORT_JOB = "AbortJob"
    RESTART_JOB = "RestartJob"
    RESTART_TASK = "RestartTask"
    RESTART_POD = "RestartPod"
    RESTART_PARTITION = "RestartPartition"
    TERMINATE_JOB = "TerminateJob"
    COMPLETE_JOB = "CompleteJob"
    RESUME_JOB = "ResumeJob"
    SYNC_JOB = "SyncJob"
    ENQUEUE_JOB = "EnqueueJob"
    SYNC_QUEUE = "SyncQueue"
    OPEN_QUEUE = "OpenQueue"
    CLOSE_QUEUE = "CloseQueue"


USER_ACTIONS: frozenset[Action] = frozenset(
    {
        Action.ABORT_JOB,
        Action.RESTART_JOB,
        Action.RESTART_TASK,
        Action.RESTART_POD,
        Action.RESTART_PARTITION,
        Action.TERMINATE_JOB,
        Action.COMPLETE_JOB,
        Action.RESUME_JOB,
    }
)
"""Actions a user may put in a policy or a Command; the rest are internal."""


class Event(StrEnum):
    """Bus events: what happened to a job, matched by lifecycle policies."""

    ANY = "*"
    POD_PENDING = "PodPending"
    POD_RUNNING = "PodRunning"
    POD_FAILED = "PodFailed"
    POD_EVICTED = "PodEvicted"
    UNKNOWN = "Unknown"
    TASK_COMPLETED = "TaskCompleted"
    TASK_FAILED = "TaskFailed"
    OUT_OF_SYNC = "OutOfSync"
    COMMAND_ISSUED = "CommandIssued"
    JOB_UPDATED = "JobUpdated"


USER_EVENTS: frozenset[Event] = frozenset(
    {
        Event.ANY,
        Event.POD_FAILED,
        Event.POD_EVICTED,
        Event.POD_PENDING,
        Event.UNKNOWN,
        Event.TASK_COMPLETED,
        Event.TASK_FAILED,
        Event.JOB_UPDATED,
    }
)
"""Events a user may name in a policy; OutOfSync, CommandIssued and PodRunning are internal."""


class JobEventReason(StrEnum):
    """Reasons of the Kubernetes Events the job controller records."""

    COMMAND_ISSUED = "CommandIssued"
    PLUGIN_ERROR = "PluginError"
    PVC_ERROR = "PVCError"
    POD_GROUP_ERROR = "PodGroupError"
    EXECUTE_ACTION = "ExecuteAction"
    JOB_STATUS_ERROR = "JobStatusError"
    POD_GROUP_PENDING = "PodGroupPending"
    FAILED_CREATE = "FailedCreate"
    SUCCESSFUL_CREATE = "SuccessfulCreate"
    FAILED_DELETE = "FailedDelete"
    SUCCESSFUL_DELETE = "SuccessfulDelete"


class JobPlugin(StrEnum):
    ENV = "env"
    SVC = "svc"
    SSH = "ssh"
    TENSORFLOW = "tensorflow"
    MPI = "mpi"
    PYTORCH = "pytorch"
    RAY = "ray"
    HCCLRANK = "hcclrank"


class NumaTopologyPolicy(StrEnum):
    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"


class DependsOnIteration(StrEnum):
    ANY = "any"
    ALL = "all"


class ConcurrencyPolicy(StrEnum):
    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"


class RetainPolicy(StrEnum):
    RETAIN = "retain"
    DELETE = "delete"


class JobFlowPhase(StrEnum):
    SUCCEED = "Succeed"
    TERMINATING = "Terminating"
    FAILED = "Failed"
    RUNNING = "Running"
    PENDING = "Pending"


class MemberType(StrEnum):
    NODE = "Node"
    HYPERNODE = "HyperNode"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"

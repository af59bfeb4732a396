"""``batch.volcano.sh/v1alpha1``: the vcjob (Job) and CronJob.

Numeric ranges and defaults here are the CRD's; rules that Volcano enforces in its admission
webhook (unique task names, policy combinations, queue state, ...) live with the webhook, so
that each layer reports its own messages.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from stromboli.core.api.constants import (
    BATCH_V1ALPHA1,
    DEFAULT_MAX_RETRY,
    DEFAULT_QUEUE,
    ConcurrencyPolicy,
    DependsOnIteration,
    Event,
    JobPhase,
    NumaTopologyPolicy,
)
from stromboli.core.api.models.common import (
    ApiModel,
    Bool,
    Duration,
    FreeForm,
    Int32,
    Int64,
    ObjectMeta,
    ObjectReference,
    OptionalDNSLabel,
    OptionalDNSSubdomain,
    Resource,
    Timestamp,
    field_error,
)
from stromboli.core.api.models.scheduling import NetworkTopologySpec

# --- Job spec ------------------------------------------------------------------------------------


def _check_mount_path(value: str) -> str:
    if ":" in value:
        raise field_error("mount_path", f"{value!r} must not contain ':'")
    return value


def _no_args(value: object) -> object:
    """``plugins: {env: }`` (YAML null) means the plugin with no arguments, as ``[]`` does."""
    return [] if value is None else value


PluginArgs = Annotated[list[str], BeforeValidator(_no_args)]


class VolumeSpec(ApiModel):
    """A volume mounted in every container of the job; a PVC is made if only a claim is given."""

    mount_path: Annotated[str, AfterValidator(_check_mount_path)]
    volume_claim_name: str | None = None
    volume_claim: FreeForm | None = Field(None, description="A PersistentVolumeClaim spec.")


class DependsOn(ApiModel):
    """Tasks that must be running (``any`` or ``all`` of them) before this task starts."""

    name: list[str] | None = None
    iteration: DependsOnIteration | None = None


class PartitionPolicySpec(ApiModel):
    """Splits a task's replicas into equally sized, topology-packed partitions."""

    total_partitions: Int32 = Field(ge=1)
    partition_size: Int32 = Field(ge=1)
    network_topology: NetworkTopologySpec | None = None
    min_partitions: Int32 = Field(0, ge=0)


class LifecyclePolicy(ApiModel):
    """What to do (``action``) when a job or task sees an event or a container exit code."""

    action: str | None = Field(None, description="A bus action such as RestartJob or AbortJob.")
    event: Event | None = None
    events: list[Event] | None = None
    exit_code: Int32 | None = None
    timeout: Duration | None = Field(None, description="Delay before the action is executed.")


class TaskSpec(ApiModel):
    """One role of a job: a pod template replicated ``replicas`` times."""

    name: OptionalDNSLabel | None = None
    replicas: Int32 | None = Field(None, ge=0)
    min_available: Int32 | None = Field(None, ge=0)
    template: FreeForm | None = Field(None, description="A PodTemplateSpec.")
    policies: list[LifecyclePolicy] | None = None
    topology_policy: NumaTopologyPolicy | None = None
    max_retry: Int32 | None = Field(None, ge=0)
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicySpec | None = None


class JobSpec(ApiModel):
    scheduler_name: str | None = Field(None, max_length=63)
    min_available: Int32 | None = Field(
        None, ge=0, description="Gang size; becomes the PodGroup's minMember."
    )
    volumes: list[VolumeSpec] | None = None
    tasks: list[TaskSpec] | None = Field(None, min_length=1)
    policies: list[LifecyclePolicy] | None = None
    plugins: dict[str, PluginArgs] | None = Field(
        None, description="Job plugins (env, svc, ssh, mpi, ...) with CLI-style arguments."
    )
    running_estimate: Duration | None = None
    queue: OptionalDNSSubdomain = DEFAULT_QUEUE
    max_retry: Int32 = Field(DEFAULT_MAX_RETRY, ge=0)
    ttl_seconds_after_finished: Int32 | None = Field(None, ge=0)
    priority_class_name: OptionalDNSSubdomain | None = None
    min_success: Int32 | None = Field(None, ge=1)
    network_topology: NetworkTopologySpec | None = None


# --- Job status ----------------------------------------------------------------------------------


class JobState(ApiModel):
    phase: JobPhase | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: Timestamp | None = None


class TaskState(ApiModel):
    phase: dict[str, Int32] | None = Field(None, description="Pod count per pod phase.")


class JobCondition(ApiModel):
    status: JobPhase | None = None
    last_transition_time: Timestamp | None = None


class JobStatus(ApiModel):
    state: JobState | None = None
    min_available: Int32 | None = None
    task_status_count: dict[str, TaskState] | None = None
    pending: Int32 | None = None
    running: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None
    terminating: Int32 | None = None
    unknown: Int32 | None = None
    version: Int32 | None = Field(None, description="Bumped on every full kill of the job.")
    retry_count: Int32 | None = None
    running_duration: Duration | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[JobCondition] | None = None


class Job(Resource):
    """A vcjob: tasks of pods scheduled as one gang, with lifecycle policies."""

    api_version: Literal["batch.volcano.sh/v1alpha1"] = BATCH_V1ALPHA1
    kind: Literal["Job"] = "Job"
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus | None = None


# --- CronJob -------------------------------------------------------------------------------------


class JobTemplateSpec(ApiModel):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None


class CronJobSpec(ApiModel):
    schedule: str = Field(description="Cron expression; the time zone goes in timeZone.")
    time_zone: str | None = None
    starting_deadline_seconds: Int64 | None = None
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    suspend: Bool = False
    job_template: JobTemplateSpec
    successful_jobs_history_limit: Int32 = Field(3, ge=0)
    failed_jobs_history_limit: Int32 = Field(1, ge=0)


class CronJobStatus(ApiModel):
    active: list[ObjectReference] | None = None
    last_schedule_time: Timestamp | None = None
    last_successful_time: Timestamp | None = None


class CronJob(Resource):
    """Creates vcjobs on a cron schedule."""

    api_version: Literal["batch.volcano.sh/v1alpha1"] = BATCH_V1ALPHA1
    kind: Literal["CronJob"] = "CronJob"
    spec: CronJobSpec
    status: CronJobStatus | None = None

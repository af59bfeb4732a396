"""``flow.volcano.sh/v1alpha1``: JobTemplate and JobFlow, DAGs of vcjobs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stromboli.core.api.constants import FLOW_V1ALPHA1, JobFlowPhase, JobPhase, RetainPolicy
from stromboli.core.api.models.batch import JobSpec, TaskState
from stromboli.core.api.models.common import (
    ApiModel,
    Duration,
    Int32,
    LooseModel,
    Resource,
    Timestamp,
)

# --- JobTemplate ---------------------------------------------------------------------------------


class JobTemplateStatus(ApiModel):
    job_depends_on_list: list[str] | None = None


class JobTemplate(Resource):
    """A vcjob spec kept for JobFlows to instantiate; creates no job by itself."""

    api_version: Literal["flow.volcano.sh/v1alpha1"] = FLOW_V1ALPHA1
    kind: Literal["JobTemplate"] = "JobTemplate"
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobTemplateStatus | None = None


# --- JobFlow spec --------------------------------------------------------------------------------


class HTTPHeader(LooseModel):
    name: str | None = None
    value: str | None = None


class HttpGet(ApiModel):
    task_name: str | None = Field(None, max_length=253)
    path: str | None = None
    port: Int32 | None = Field(None, ge=0, le=65535)
    http_header: HTTPHeader | None = None


class TcpSocket(ApiModel):
    task_name: str | None = Field(None, max_length=253)
    port: Int32 = Field(ge=0, le=65535)


class TaskStatus(ApiModel):
    task_name: str | None = Field(None, max_length=253)
    phase: str | None = Field(None, max_length=63)


class Probe(ApiModel):
    http_get_list: list[HttpGet] | None = None
    tcp_socket_list: list[TcpSocket] | None = None
    task_status_list: list[TaskStatus] | None = None


class DependsOn(ApiModel):
    """Flows (by name) that must complete before this one's job is created."""

    targets: list[str] | None = None
    probe: Probe | None = None


class Patch(ApiModel):
    job_spec: JobSpec | None = None


class Flow(ApiModel):
    name: str = Field(min_length=1, description="Name of the JobTemplate to instantiate.")
    depends_on: DependsOn | None = None
    patch: Patch | None = None


class JobFlowSpec(ApiModel):
    flows: list[Flow] | None = None
    job_retain_policy: RetainPolicy | None = None


# --- JobFlow status ------------------------------------------------------------------------------


class JobRunningHistory(ApiModel):
    start_timestamp: Timestamp | None = None
    end_timestamp: Timestamp | None = None
    state: JobPhase | None = None


class FlowJobStatus(ApiModel):
    name: str | None = None
    state: JobPhase | None = None
    start_timestamp: Timestamp | None = None
    end_timestamp: Timestamp | None = None
    restart_count: Int32 | None = Field(None, ge=0)
    running_histories: list[JobRunningHistory] | None = None


class FlowCondition(ApiModel):
    phase: JobPhase | None = None
    create_time: Timestamp | None = None
    running_duration: Duration | None = None
    task_status_count: dict[str, TaskState] | None = None


class FlowState(ApiModel):
    phase: JobFlowPhase | None = None


class JobFlowStatus(ApiModel):
    pending_jobs: list[str] | None = None
    running_jobs: list[str] | None = None
    failed_jobs: list[str] | None = None
    completed_jobs: list[str] | None = None
    terminated_jobs: list[str] | None = None
    un_know_jobs: list[str] | None = None
    job_status_list: list[FlowJobStatus] | None = None
    conditions: dict[str, FlowCondition] | None = None
    state: FlowState | None = None


class JobFlow(Resource):
    """Creates a job per flow once the flows it depends on have completed."""

    api_version: Literal["flow.volcano.sh/v1alpha1"] = FLOW_V1ALPHA1
    kind: Literal["JobFlow"] = "JobFlow"
    spec: JobFlowSpec = Field(default_factory=JobFlowSpec)
    status: JobFlowStatus | None = None

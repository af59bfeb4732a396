"""What a session decided, collected for the binder and the status writer."""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo


@dataclass(slots=True)
class Eviction:
    task: TaskInfo
    reason: str
    action: str
    #: The task the eviction makes room for (placed next in the same statement), if any.
    preemptor: TaskInfo | None = None


@dataclass(slots=True, frozen=True)
class EvictionRecord:
    """An eviction carried out, as reports tell it: when, whom, why and for whom."""

    at: str
    victim: str
    victim_job: str
    victim_queue: str
    reason: str
    preemptor: str = ""
    preemptor_job: str = ""
    preemptor_queue: str = ""


@dataclass(slots=True)
class SessionOutcome:
    binds: list[tuple[TaskInfo, str]] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    #: Jobs an action could not work on (an error in a plugin on this job's data): their
    #: statements were discarded, and the scheduler reports them and goes on with the rest.
    set_aside: list[tuple[JobInfo, Exception]] = field(default_factory=list)
    #: Annotations to write on a pod before it is bound, by task uid (device ids chosen by
    #: ``deviceshare``, which the node's device plugin reads).
    pod_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Annotations to write on a PodGroup, by job uid (the HyperNode a topology job was
    #: placed in, ``volcano.sh/job-allocated-hypernode``).
    podgroup_annotations: dict[str, dict[str, str]] = field(default_factory=dict)

"""A vcjob's spec, read once per generation into a typed view, or refused with the field at fault.

The webhook and the CRD schema normally stop malformed jobs at the door; a controller must
still survive one (an old object, a cluster without the webhook). :func:`parse_job` checks the
spec against the Job model and the few things the controller relies on (tasks, names,
templates, quantities) and raises :class:`JobSpecError` naming the field, which the controller
reports as an Event and a status message instead of crashing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stromboli.core.admission.jobsize import oversize
from stromboli.core.api import constants as k
from stromboli.core.api.registry import InvalidObjectError, validate_object
from stromboli.core.controller.job.state import JobFacts, TaskFacts
from stromboli.core.scheduler.api.pod import pod_requests
from stromboli.core.scheduler.api.quota import pod_quota_usage
from stromboli.core.scheduler.api.resource import Resource


class JobSpecError(ValueError):
    """The job's spec cannot be acted on; ``field`` is the path at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


@dataclass(slots=True)
class TaskView:
    index: int
    name: str
    replicas: int
    min_available: int | None
    max_retry: int
    template: dict[str, Any]
    policies: list[dict[str, Any]]
    depends_on: list[str]
    depends_on_any: bool
    partitioned: bool
    partition_size: int
    min_partitions: int
    partition_topology: dict[str, Any] | None
    topology_policy: str
    priority_class_name: str
    #: The scheduling request of one pod (init containers and overhead included).
    request: Resource
    #: What one pod counts against a ResourceQuota (``pods``, ``count/pods``, ``requests.*``,
    #: ``limits.*``): the terms of the PodGroup's ``minResources``.
    quota: Resource

    @property
    def min_member(self) -> int:
        """``minTaskMember`` of the PodGroup for this task."""
        if self.min_available is not None:
            return self.min_available
        if self.min_partitions and self.partition_size:
            return self.min_partitions * self.partition_size
        return self.replicas


@dataclass(slots=True)
class JobView:
    namespace: str
    name: str
    uid: str
    generation: int
    min_available: int
    max_retry: int
    min_success: int | None
    queue: str
    scheduler_name: str
    priority_class_name: str
    ttl_seconds_after_finished: int | None
    network_topology: dict[str, Any] | None
    plugins: dict[str, list[str]]
    volumes: list[dict[str, Any]]
    tasks: list[TaskView] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    def task(self, name: str) -> TaskView | None:
        return next((t for t in self.tasks if t.name == name), None)

    @property
    def facts(self) -> JobFacts:
        return JobFacts(
            min_available=self.min_available,
            max_retry=self.max_retry,
            min_success=self.min_success,
            tasks=tuple(TaskFacts(t.name, t.replicas, t.min_available) for t in self.tasks),
        )


def _int(value: Any, where: str, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise JobSpecError(where, f"expected an integer, got {value!r}")
    return value


def parse_job(job: Mapping[str, Any]) -> JobView:
    """Read ``job`` (a Job object) or raise :class:`JobSpecError`."""
    try:
        validate_object(job)
    except InvalidObjectError as error:
        if error.problems:
            path, message = error.problems[0]
            raise JobSpecError(path, message) from None
        raise JobSpecError("", str(error)) from None
    meta = job.get("metadata") or {}
    spec = job.get("spec")
    if not isinstance(spec, Mapping):
        raise JobSpecError("spec", "required: a Job needs a spec with tasks")
    raw_tasks = spec.get("tasks")
    if not raw_tasks:
        raise JobSpecError("spec.tasks", "no task specified in job spec")
    tasks: list[TaskView] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_tasks):
        task = _parse_task(index, raw)
        if task.name in seen:
            raise JobSpecError(f"spec.tasks[{index}].name", f"duplicated task name {task.name}")
        seen.add(task.name)
        tasks.append(task)
    too_many = oversize(t.replicas for t in tasks)
    if too_many is not None:
        # Stored while the webhook was not in the way: never create that many pods.
        raise JobSpecError(too_many.field, f"{too_many.reason()}; the job is not started")
    for task in tasks:
        for dependency in task.depends_on:
            if dependency not in seen:
                raise JobSpecError(
                    f"spec.tasks[{task.index}].dependsOn.name", f"no task named {dependency!r}"
                )
    _check_policies(spec.get("policies"), "spec.policies")
    min_available = _int(spec.get("minAvailable"), "spec.minAvailable")
    if not min_available:
        # What the webhook would have set: the sum of the tasks' minimums.
        min_available = sum(
            t.replicas if t.min_available is None else t.min_available for t in tasks
        )
    plugins = spec.get("plugins") or {}
    return JobView(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        generation=int(meta.get("generation") or 0),
        min_available=min_available,
        max_retry=_int(spec.get("maxRetry"), "spec.maxRetry", k.DEFAULT_MAX_RETRY) or 0,
        min_success=_int(spec.get("minSuccess"), "spec.minSuccess"),
        queue=str(spec.get("queue") or k.DEFAULT_QUEUE),
        scheduler_name=str(spec.get("schedulerName") or ""),
        priority_class_name=str(spec.get("priorityClassName") or ""),
        ttl_seconds_after_finished=_int(
            spec.get("ttlSecondsAfterFinished"), "spec.ttlSecondsAfterFinished"
        ),
        network_topology=(
            dict(spec["networkTopology"])
            if isinstance(spec.get("networkTopology"), Mapping)
            else None
        ),
        plugins={str(name): [str(a) for a in args or ()] for name, args in plugins.items()},
        volumes=[dict(v) for v in spec.get("volumes") or ()],
        tasks=tasks,
    )


def _check_policies(policies: Any, where: str) -> None:
    """A policy's action must be one a user may ask for: the CRD schema leaves ``action`` a
    free string, and an unknown one would otherwise be run silently as a plain sync."""
    for i, policy in enumerate(policies or ()):
        if not isinstance(policy, Mapping):
            raise JobSpecError(f"{where}[{i}]", "expected a lifecycle policy (a mapping)")
        action = policy.get("action")
        if action not in k.USER_ACTIONS:
            valid = ", ".join(sorted(k.USER_ACTIONS))
            raise JobSpecError(
                f"{where}[{i}].action", f"invalid policy action {action!r}; valid actions: {valid}"
            )


def _parse_task(index: int, raw: Any) -> TaskView:
    where = f"spec.tasks[{index}]"
    if not isinstance(raw, Mapping):
        raise JobSpecError(where, "expected a task (a mapping)")
    name = raw.get("name") or f"{k.DEFAULT_TASK_SPEC}{index}"
    replicas = _int(raw.get("replicas"), f"{where}.replicas", 0) or 0
    if replicas < 0:
        raise JobSpecError(f"{where}.replicas", f"must not be negative, got {replicas}")
    min_available = _int(raw.get("minAvailable"), f"{where}.minAvailable")
    template = raw.get("template")
    if not isinstance(template, Mapping):
        raise JobSpecError(f"{where}.template", "required: a pod template with containers")
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, Mapping) or not pod_spec.get("containers"):
        raise JobSpecError(f"{where}.template.spec.containers", "required: at least one container")
    for i, container in enumerate(pod_spec["containers"]):
        if not isinstance(container, Mapping):
            raise JobSpecError(f"{where}.template.spec.containers[{i}]", "expected a container")
    try:
        _, request = pod_requests({"spec": pod_spec})
        quota = pod_quota_usage(pod_spec, f"{where}.template.spec")
    except ValueError as error:
        raise JobSpecError(f"{where}.template", str(error)) from None
    _check_policies(raw.get("policies"), f"{where}.policies")
    depends = raw.get("dependsOn") or {}
    partition = raw.get("partitionPolicy") or {}
    return TaskView(
        index=index,
        name=str(name),
        replicas=replicas,
        min_available=min_available,
        max_retry=_int(raw.get("maxRetry"), f"{where}.maxRetry", 0) or 0,
        template=dict(template),
        policies=[dict(p) for p in raw.get("policies") or ()],
        depends_on=[str(n) for n in depends.get("name") or ()],
        depends_on_any=depends.get("iteration") == k.DependsOnIteration.ANY,
        partitioned=bool(raw.get("partitionPolicy")),
        partition_size=int(partition.get("partitionSize") or 0),
        min_partitions=int(partition.get("minPartitions") or 0),
        partition_topology=(
            dict(partition["networkTopology"])
            if isinstance(partition.get("networkTopology"), Mapping)
            else None
        ),
        topology_policy=str(raw.get("topologyPolicy") or ""),
        priority_class_name=str(pod_spec.get("priorityClassName") or ""),
        request=request,
        quota=quota,
    )

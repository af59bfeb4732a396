"""Small builders for the scheduler tests.

Cluster objects are plain dicts in the Kubernetes wire shape. ``make_session`` folds objects
into a ``SchedulerCache`` and opens a ``Session`` on its snapshot (no store involved);
``Cluster`` runs the real ``Scheduler`` over a ``MemoryStore`` on a ``VirtualClock``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.clock import EPOCH, VirtualClock
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler.api.build import task_info_from
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.conf import ConfigSource, parse_config
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.scheduler import CycleStats, Scheduler, builtin_queue

SCHEDULING = k.SCHEDULING_V1BETA1

#: The default configuration without the plugins other helpers are still writing
#: (``predicates`` and ``nodeorder``).
BASIC_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: proportion
"""


def conf(actions: str, *tiers: list[str | dict]) -> str:
    """A configuration document: ``conf("allocate", ["gang"], ["drf"])``."""
    lines = [f'actions: "{actions}"', "tiers:"]
    for tier in tiers:
        lines.append("- plugins:")
        for plugin in tier:
            entry = {"name": plugin} if isinstance(plugin, str) else plugin
            first = True
            for key, value in entry.items():
                prefix = "  - " if first else "    "
                first = False
                if isinstance(value, bool):
                    value = "true" if value else "false"
                elif isinstance(value, dict):
                    value = "{" + ", ".join(f'"{a}": {b!r}' for a, b in value.items()) + "}"
                lines.append(f"{prefix}{key}: {value}")
    return "\n".join(lines) + "\n"


# -- objects ---------------------------------------------------------------------------------


def resources(cpu: str | None = None, memory: str | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    if cpu is not None:
        out["cpu"] = cpu
    if memory is not None:
        out["memory"] = memory
    return out


def node(
    name: str,
    cpu: str = "8",
    memory: str = "16Gi",
    pods: str = "110",
    *,
    labels: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"allocatable": dict(allocatable), "capacity": dict(allocatable)},
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def container(
    cpu: str | None = None,
    memory: str | None = None,
    *,
    name: str = "main",
    extra: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    requests = {**resources(cpu, memory), **(extra or {})}
    spec: dict[str, Any] = {"name": name, "image": "busybox"}
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    if res:
        spec["resources"] = res
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def pod(
    name: str,
    *,
    group: str | None = None,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    extra: dict[str, str] | None = None,
    containers: list[dict] | None = None,
    init_containers: list[dict] | None = None,
    phase: str | None = None,
    node_name: str | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    role: str | None = None,
    scheduler: str | None = k.DEFAULT_SCHEDULER_NAME,
    uid: str | None = None,
    created: str | None = None,
    deleting: bool = False,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: dict | None = None,
) -> dict[str, Any]:
    """A pod dict; ``group`` sets the ``scheduling.k8s.io/group-name`` annotation."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    notes = dict(annotations or {})
    if group is not None:
        notes[k.GROUP_NAME_ANNOTATION] = group
    if role is not None:
        notes[k.TASK_SPEC_KEY] = role
    if notes:
        meta["annotations"] = notes
    if labels:
        meta["labels"] = dict(labels)
    if uid is not None:
        meta["uid"] = uid
    if created is not None:
        meta["creationTimestamp"] = created
    if deleting:
        meta["deletionTimestamp"] = "1970-01-01T00:00:00Z"
    if owner is not None:
        meta["ownerReferences"] = [owner]
    spec: dict[str, Any] = {
        "containers": containers
        if containers is not None
        else [container(cpu, memory, extra=extra)],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def podgroup(
    name: str,
    min_member: int = 1,
    *,
    namespace: str = "default",
    queue: str | None = None,
    min_resources: dict[str, str] | None = None,
    min_task_member: dict[str, int] | None = None,
    priority_class: str | None = None,
    phase: str | None = None,
    created: str | None = None,
    uid: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if created is not None:
        meta["creationTimestamp"] = created
    if uid is not None:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"minMember": min_member}
    if queue is not None:
        spec["queue"] = queue
    if min_resources is not None:
        spec["minResources"] = min_resources
    if min_task_member is not None:
        spec["minTaskMember"] = min_task_member
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    obj: dict[str, Any] = {
        "apiVersion": SCHEDULING,
        "kind": "PodGroup",
        "metadata": meta,
        "spec": spec,
    }
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def queue(
    name: str,
    weight: int = 1,
    *,
    capability: dict[str, str] | None = None,
    guarantee: dict[str, str] | None = None,
    state: str | None = None,
    parent: str | None = None,
    priority: int | None = None,
    reclaimable: bool | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {"weight": weight}
    if capability is not None:
        spec["capability"] = capability
    if guarantee is not None:
        spec["guarantee"] = {"resource": guarantee}
    if parent is not None:
        spec["parent"] = parent
    if priority is not None:
        spec["priority"] = priority
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    obj: dict[str, Any] = {
        "apiVersion": SCHEDULING,
        "kind": "Queue",
        "metadata": meta,
        "spec": spec,
    }
    if state is not None:
        obj["status"] = {"state": state}
    return obj


def priority_class(name: str, value: int, *, global_default: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if global_default:
        obj["globalDefault"] = True
    return obj


def timestamp(seconds: int) -> str:
    """An RFC 3339 creation time ``seconds`` after the epoch (orders objects in a session)."""
    return f"1970-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"


# -- scheduler records -----------------------------------------------------------------------


def task(
    name: str,
    status_pod: dict | None = None,
    *,
    job: str = "default/pg",
    **pod_args: Any,
) -> TaskInfo:
    """A TaskInfo built from ``pod(name, **pod_args)`` (uid defaults to ``uid-<name>``)."""
    pod_args.setdefault("uid", f"uid-{name}")
    return task_info_from(status_pod or pod(name, **pod_args), job)


def job_info(
    min_available: int,
    tasks: list[TaskInfo] = (),  # type: ignore[assignment]
    *,
    name: str = "pg",
    min_task_member: dict[str, int] | None = None,
    phase: str = "Inqueue",
) -> JobInfo:
    pg = podgroup(name, min_available, phase=phase, min_task_member=min_task_member)
    job = JobInfo(
        uid=f"default/{name}",
        name=name,
        namespace="default",
        queue="default",
        priority=0,
        min_available=min_available,
        podgroup=pg,
        creation="",
        min_task_member=dict(min_task_member or {}),
    )
    for t in tasks:
        t.job_id = job.uid
        job.add_task(t)
    return job


def _kind(obj: dict) -> tuple[str, str]:
    return (obj["apiVersion"], obj["kind"])


def make_cache(objects: list[dict], *, builtin_queues: bool = True) -> SchedulerCache:
    cache = SchedulerCache()
    if builtin_queues:
        for name in (k.ROOT_QUEUE, k.DEFAULT_QUEUE):
            cache.apply(_kind(builtin_queue(name)), "ADDED", builtin_queue(name))
    for obj in objects:
        cache.apply(_kind(obj), "ADDED", obj)
    return cache


def make_session(
    objects: list[dict],
    config: str = BASIC_CONF,
    *,
    builtin_queues: bool = True,
    open_plugins: bool = True,
    uid: str = "session-1",
    now: datetime = EPOCH,
) -> Session:
    """A session over ``objects`` (nodes, pods, podgroups, queues, priority classes)."""
    cache = make_cache(objects, builtin_queues=builtin_queues)
    ssn = Session(cache.snapshot(), parse_config(config, "<test>"), now, uid=uid)
    if open_plugins:
        ssn.open()
    return ssn


def session_task(ssn: Session, name: str, namespace: str = "default") -> TaskInfo:
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            if t.name == name and t.namespace == namespace:
                return t
    raise KeyError(name)


# -- a store-backed cluster --------------------------------------------------------------------


class Cluster:
    """The real scheduler over an in-memory store; objects are created one virtual second apart
    so that creation order decides ties deterministically."""

    def __init__(self, tmp_path: Path, config: str = BASIC_CONF, start: float = 1000.0) -> None:
        self.clock = VirtualClock(start)
        self.store = MemoryStore(self.clock, seed=11)
        self.conf_path = tmp_path / "scheduler.conf"
        self.conf_path.write_text(config)
        self.config = ConfigSource(self.conf_path)
        self.scheduler = Scheduler(self.store, self.clock, self.config)
        self.last: CycleStats | None = None

    async def start(self) -> Cluster:
        await self.scheduler.start()
        return self

    async def add(self, *objects: dict) -> list[dict]:
        created = []
        for obj in objects:
            status = obj.get("status")
            made = await self.store.create(obj)
            if status and made.get("status") != status and obj["kind"] in ("Pod", "Queue"):
                made["status"] = {**(made.get("status") or {}), **status}
                made = await self.store.update_status(made)
            created.append(made)
            self.clock.advance(1)
        return created

    async def run(self, cycles: int = 1) -> CycleStats:
        for _ in range(cycles):
            self.last = await self.scheduler.run_once()
            self.clock.advance(1)
        assert self.last is not None
        return self.last

    async def get(self, kind: str, name: str, namespace: str | None = "default") -> dict:
        api = {"Pod": "v1", "Node": "v1", "PodGroup": SCHEDULING, "Queue": SCHEDULING}[kind]
        if kind in ("Queue", "Node"):
            namespace = None
        return await self.store.get(api, kind, name, namespace)

    async def pod(self, name: str, namespace: str = "default") -> dict:
        return await self.get("Pod", name, namespace)

    async def pg(self, name: str, namespace: str = "default") -> dict:
        return await self.get("PodGroup", name, namespace)

    async def queue(self, name: str) -> dict:
        return await self.get("Queue", name, None)

    async def exists(self, kind: str, name: str, namespace: str | None = "default") -> bool:
        try:
            await self.get(kind, name, namespace)
        except NotFoundError:
            return False
        return True

    async def node_of(self, name: str, namespace: str = "default") -> str:
        return ((await self.pod(name, namespace)).get("spec") or {}).get("nodeName") or ""

    async def set_phase(self, name: str, phase: str, namespace: str = "default") -> None:
        """What a kubelet would report for a pod."""
        obj = await self.pod(name, namespace)
        obj.setdefault("status", {})["phase"] = phase
        await self.store.update_status(obj)

    async def events(self, *, reason: str | None = None, name: str | None = None) -> list[dict]:
        items = (await self.store.list("v1", "Event")).items
        return [
            e
            for e in items
            if (reason is None or e.get("reason") == reason)
            and (name is None or e["involvedObject"].get("name") == name)
        ]


def pod_condition(obj: dict, kind: str = "PodScheduled") -> dict | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return condition
    return None


def pg_condition(obj: dict, kind: str) -> dict | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return condition
    return None

"""The scheduler's always-current view of the cluster, kept up to date by store events.

Each object is parsed once per version into the scheduler's records (``TaskInfo``,
``NodeInfo``, ``JobInfo``, ``QueueInfo``) and node use is maintained incrementally in numpy
arrays. A snapshot for a session clones only these small records and copies the arrays; pod
and node dicts are shared, never deep-copied per cycle. A job's clone is lent again to a later
snapshot once the session that held it is released and when neither the cache nor that session
changed it, so a cycle clones the jobs that changed, not the thousands that settled (issue 14).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from stromboli.core.api import constants as k
from stromboli.core.api.keys import object_key
from stromboli.core.quarantine import Quarantine
from stromboli.core.scheduler.api.build import node_info_from, task_info_from
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.node import NodeTable, is_counted_on_node
from stromboli.core.scheduler.api.plaingroup import (
    MEMORY,
    OBJECT,
    PlainPodGroups,
    min_member_of,
    plain_group_name,
    podgroup_for,
)
from stromboli.core.scheduler.api.pod import parse_bool, without_ignored_devices
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.changelog import JobChanges
from stromboli.core.scheduler.framework.snapshot import Snapshot

log = logging.getLogger(__name__)

POD = ("v1", "Pod")
NODE = ("v1", "Node")
PODGROUP = (k.SCHEDULING_V1BETA1, "PodGroup")
QUEUE = (k.SCHEDULING_V1BETA1, "Queue")
PRIORITY_CLASS = ("scheduling.k8s.io/v1", "PriorityClass")
RESOURCE_QUOTA = ("v1", "ResourceQuota")
PDB = ("policy/v1", "PodDisruptionBudget")
HYPERNODE = (k.TOPOLOGY_V1ALPHA1, "HyperNode")
NUMATOPOLOGY = (k.NODEINFO_V1ALPHA1, "Numatopology")
#: ``deletionTimestamp`` the cache gives a pod it evicted until the store shows the deletion.
EVICTED_AT = "1970-01-01T00:00:00Z"
#: Kinds the scheduler cache follows.
WATCHED_KINDS = (
    NODE,
    QUEUE,
    PRIORITY_CLASS,
    PODGROUP,
    POD,
    RESOURCE_QUOTA,
    PDB,
    HYPERNODE,
    NUMATOPOLOGY,
)

#: ResourceQuota names a PodGroup's ``minResources`` carries beside the resources themselves
#: (``requests.cpu``, ``limits.memory``, ``count/pods``): Volcano reads past them when it sizes
#: a job for admission, and so does the scheduler here (the resourcequota plugin reads them).
_QUOTA_ONLY_PREFIXES = ("requests.", "limits.", "count/")


def _schedulable_names(resources: Any) -> Any:
    """``minResources`` without its quota-only names; anything but a mapping is returned as it
    is, for ``Resource.from_list`` to refuse naming the field."""
    if not isinstance(resources, Mapping):
        return resources
    return without_ignored_devices(
        {n: v for n, v in resources.items() if not str(n).startswith(_QUOTA_ONLY_PREFIXES)}
    )


@dataclass(slots=True)
class PodRecord:
    """A pod the cache knows: its task record, and whether it belongs to one of our jobs."""

    task: TaskInfo
    job_id: str | None


@dataclass(slots=True)
class Lent:
    """A clone of a job's ``built`` that a snapshot holds, or held."""

    job: JobInfo
    serial: int
    epoch: int


#: Clones kept per job: the sessions whose writes are in flight (two at most, the server's
#: ``commits_in_flight``) and the last session kept for ``explain`` and reports hold one each;
#: the fourth is free to lend.
LENT_PER_JOB = 4


@dataclass(slots=True)
class JobEntry:
    """A PodGroup (possibly not seen yet) and the tasks that name it."""

    podgroup: dict | None = None
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    #: The JobInfo built from the above, kept until either changes; sessions clone it.
    built: JobInfo | None = None
    #: ``podgroup`` is the scheduler's own, for plain pods (``--plain-pod-groups=memory``):
    #: no such object is stored, and a stored one of the same name replaces it.
    in_memory: bool = False
    #: Clones of ``built`` lent to snapshots, each with the serial of the snapshot it was last
    #: lent to and the vector epoch then (``SchedulerCache.snapshot``), oldest first.
    lent: list[Lent] = field(default_factory=list)


def job_id_of(pod: dict) -> str | None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    group = annotations.get(k.GROUP_NAME_ANNOTATION)
    if not group:
        return None
    return f"{pod['metadata'].get('namespace', 'default')}/{group}"


def memory_podgroup(pod: dict) -> dict:
    """The group the controller would create for a plain pod, kept in memory instead: created
    with the pod, and Running already when the pod is bound (a restart finds it so)."""
    pg = podgroup_for(pod, min_member_of(pod))
    meta = pod["metadata"]
    pg["metadata"]["creationTimestamp"] = meta.get("creationTimestamp") or ""
    if (pod.get("spec") or {}).get("nodeName"):
        pg["status"] = {"phase": "Running"}
    return pg


class SchedulerCache:
    def __init__(
        self,
        scheduler_names: tuple[str, ...] = (k.DEFAULT_SCHEDULER_NAME,),
        plain_pod_groups: PlainPodGroups = OBJECT,
    ) -> None:
        self.scheduler_names = set(scheduler_names)
        #: ``memory``: a plain pod's group is built here, never read from a PodGroup object.
        self.plain_pod_groups = plain_pod_groups
        #: Objects the cache could not read: reported, then left out of every snapshot.
        self.quarantine = Quarantine(k.DEFAULT_SCHEDULER_NAME)
        self.nodes = NodeTable()
        self.pods: dict[str, PodRecord] = {}
        self.jobs: dict[str, JobEntry] = {}
        self.queues: dict[str, QueueInfo] = {}
        self.priority_classes: dict[str, int] = {}
        self._global_defaults: dict[str, int] = {}
        self.resource_quotas: dict[tuple[str, str], dict] = {}
        self.pdbs: dict[tuple[str, str], dict] = {}
        self.hypernodes: dict[str, dict] = {}
        self.numatopologies: dict[str, dict] = {}
        #: Pods this scheduler bound whose binding the watch has not shown yet: uid → node.
        self.assumed: dict[str, str] = {}
        #: Pods this scheduler evicted whose deletion the watch has not shown yet (uids).
        self.evicting: set[str] = set()
        #: Pods bound to nodes the cache has not seen yet, by node name.
        self._orphans: dict[str, dict[str, TaskInfo]] = {}
        #: Ids of jobs whose PodGroup or pods changed, for the close of a cycle (settled.py).
        self.job_changes = JobChanges()
        #: Lend a job's clone of a finished session to the next snapshot when neither the
        #: cache nor that session changed it (off: every snapshot clones every job).
        self.reuse_clones = True
        #: Snapshots handed out; serial → the width of their resource index then, for those
        #: not released yet. Nothing is lent again before the first ``release``.
        self._serial = 0
        self._outstanding: dict[int, int] = {}
        self._lending = False
        #: Moves on whenever task vectors computed in one session may not hold in the next
        #: (the resource index grew in the cache, or a session added names of its own).
        self._vector_epoch = 0
        self._index_width = 0

    # -- event intake -------------------------------------------------------------------------

    def apply(self, kind: tuple[str, str], event_type: str, obj: dict) -> None:
        """Fold one store event into the cache. An object that cannot be read raises after
        its old version is gone from the cache (a node or queue no longer known, a pod no
        longer a task), so that nothing is decided on what it was; the informer sets it
        aside and the others go on."""
        deleted = event_type == "DELETED"
        if kind == POD:
            self._pod(obj, deleted)
        elif kind == NODE:
            self._node(obj, deleted)
        elif kind == PODGROUP:
            self._podgroup(obj, deleted)
        elif kind == QUEUE:
            self._queue(obj, deleted)
        elif kind == PRIORITY_CLASS:
            self._priority_class(obj, deleted)
        elif kind == RESOURCE_QUOTA:
            self._keyed(self.resource_quotas, obj, deleted)
        elif kind == PDB:
            self._keyed(self.pdbs, obj, deleted)
        elif kind in (HYPERNODE, NUMATOPOLOGY):
            table = self.hypernodes if kind == HYPERNODE else self.numatopologies
            name = obj["metadata"]["name"]
            if deleted:
                table.pop(name, None)
            else:
                table[name] = obj

    @staticmethod
    def _keyed(table: dict, obj: dict, deleted: bool) -> None:
        if deleted:
            table.pop(object_key(obj), None)
        else:
            table[object_key(obj)] = obj

    def _is_ours(self, pod: dict) -> bool:
        return (pod.get("spec") or {}).get(
            "schedulerName", "default-scheduler"
        ) in self.scheduler_names

    def assume_bound(self, task: TaskInfo, node: str, pod: dict | None = None) -> None:
        """Treat a pod as bound to ``node`` right after a successful binding, until the watch
        confirms it, so that the next cycle neither binds it again nor gives its room away.
        ``pod`` is the pod as the binder last wrote it (with device ids), when it did."""
        self.assumed[task.uid] = node
        record = self.pods.get(task.uid)
        if record is not None:
            self._pod(pod if pod is not None else record.task.pod, deleted=False)

    def assume_evicted(self, task: TaskInfo) -> None:
        """Treat an evicted pod as terminating (Releasing) until the watch shows it deleted
        or marked for deletion, so that the next cycle neither counts its room as used for
        good nor evicts it again."""
        record = self.pods.get(task.uid)
        if record is None:
            return
        self.evicting.add(task.uid)
        self._pod(record.task.pod, deleted=False)

    def _pod(self, pod: dict, deleted: bool) -> None:
        uid = pod["metadata"].get("uid") or "/".join(object_key(pod))
        if uid in self.evicting:
            if deleted or pod["metadata"].get("deletionTimestamp"):
                self.evicting.discard(uid)
            else:
                pod = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": EVICTED_AT}}
        assumed = self.assumed.get(uid)
        if assumed is not None:
            spec = pod.get("spec") or {}
            if deleted or spec.get("nodeName"):
                del self.assumed[uid]
            else:
                pod = {**pod, "spec": {**spec, "nodeName": assumed}}
        old = self.pods.pop(uid, None)
        if old is not None:
            self._forget_task(old)
        if deleted:
            return
        ours = self._is_ours(pod)
        job_id = self._job_id(pod) if ours else None
        assigned = bool((pod.get("spec") or {}).get("nodeName"))
        if not ours and not assigned:
            return
        group = self._memory_group(job_id, pod)
        task = task_info_from(pod, job_id or "", old.task if old is not None else None)
        record = PodRecord(task, job_id)
        self.pods[uid] = record
        if job_id is not None:
            self.job_changes.note(job_id)
            entry = self.jobs.setdefault(job_id, JobEntry())
            if group is not None:
                entry.podgroup, entry.in_memory, entry.built = group, True, None
            entry.tasks[uid] = task
            if entry.built is not None:
                # Keep the built job current instead of rebuilding it: a pod changing phase
                # is by far the most common event.
                entry.built.add_task(task.clone())
        if task.node_name and is_counted_on_node(task.status):
            if task.node_name in self.nodes.position:
                self.nodes.add_task(task.node_name, task)
            else:
                self._orphans.setdefault(task.node_name, {})[uid] = task

    def _job_id(self, pod: dict) -> str | None:
        job_id = job_id_of(pod)
        if job_id is None and self.plain_pod_groups == MEMORY:
            name = plain_group_name(pod)
            if name is not None:
                job_id = f"{pod['metadata'].get('namespace', 'default')}/{name}"
        return job_id

    def _memory_group(self, job_id: str | None, pod: dict) -> dict | None:
        """The in-memory group a plain pod brings, when its job has no group yet (raises,
        before the pod becomes a task, when the pod cannot be read)."""
        if job_id is None or self.plain_pod_groups != MEMORY:
            return None
        entry = self.jobs.get(job_id)
        if entry is not None and entry.podgroup is not None:
            return None
        name = plain_group_name(pod)
        if name is None or job_id != f"{pod['metadata'].get('namespace', 'default')}/{name}":
            return None
        return memory_podgroup(pod)

    def keep_in_memory(
        self, job_id: str, status: dict | None, annotations: dict[str, str] | None = None
    ) -> bool:
        """Fold a session's new status (and annotations) into an in-memory group, which has
        no object to write them to; False when ``job_id`` is not such a group."""
        entry = self.jobs.get(job_id)
        if entry is None or not entry.in_memory or entry.podgroup is None:
            return False
        self.job_changes.note(job_id)
        if status is not None:
            # As the API server would return it: plain JSON values (no enums), a copy of its own.
            status = orjson.loads(orjson.dumps(status))
        pg = entry.podgroup if status is None else {**entry.podgroup, "status": status}
        if annotations:
            meta = pg["metadata"]
            pg = {**pg, "metadata": {**meta, "annotations": {**meta["annotations"], **annotations}}}
        entry.podgroup = pg
        if entry.built is not None:
            entry.built.podgroup = pg
        return True

    def _forget_task(self, record: PodRecord) -> None:
        task = record.task
        if record.job_id is not None:
            self.job_changes.note(record.job_id)
            entry = self.jobs.get(record.job_id)
            if entry is not None:
                entry.tasks.pop(task.uid, None)
                if entry.built is not None:
                    entry.built.remove_task(task.uid)
                if entry.podgroup is None and not entry.tasks:
                    del self.jobs[record.job_id]
        if task.node_name:
            self.nodes.remove_task(task.node_name, task)
            orphans = self._orphans.get(task.node_name)
            if orphans:
                orphans.pop(task.uid, None)

    def _node(self, node: dict, deleted: bool) -> None:
        name = node["metadata"]["name"]
        if deleted:
            if name in self.nodes.position:
                position = self.nodes.position[name]
                tasks = self.nodes.nodes[position].tasks
                self._orphans[name] = dict(tasks)
                self.nodes.remove_node(name)
            return
        try:
            info = node_info_from(node)
        except Exception:
            # Place nothing on a node whose capacity cannot be read; its pods wait as orphans.
            self._node(node, deleted=True)
            raise
        if name in self.nodes.position:
            self.nodes.replace_node(info)
            return
        # Nodes keep arrival order: equal scores go to the earliest node, deterministically.
        self.nodes.add_node(info)
        for task in self._orphans.pop(name, {}).values():
            self.nodes.add_task(name, task)

    def _podgroup(self, pg: dict, deleted: bool) -> None:
        namespace, name = object_key(pg)
        job_id = f"{namespace}/{name}"
        self.job_changes.note(job_id)
        if deleted:
            entry = self.jobs.get(job_id)
            if entry is not None and not entry.in_memory:
                entry.podgroup = None
                entry.built = None
                if not entry.tasks:
                    del self.jobs[job_id]
                else:
                    self._back_in_memory(entry)
            return
        entry = self.jobs.setdefault(job_id, JobEntry())
        entry.podgroup = pg
        entry.in_memory = False
        try:
            # Built now rather than at the next snapshot, so an unreadable group is caught
            # here, where it can be set aside, and never reaches a session.
            entry.built = self.job_info(job_id, entry)
        except Exception:
            entry.podgroup = entry.built = None
            raise

    def _back_in_memory(self, entry: JobEntry) -> None:
        """A stored group of plain pods was deleted: in ``memory`` mode its pods go on in an
        in-memory group again (in ``object`` mode they wait for the controller's new one)."""
        if self.plain_pod_groups != MEMORY:
            return
        for task in entry.tasks.values():
            if plain_group_name(task.pod) is None:
                continue
            try:
                entry.podgroup, entry.in_memory = memory_podgroup(task.pod), True
            except ValueError as err:
                log.warning("pod %s keeps waiting without a group: %s", task.key, err)
                continue
            return

    def _queue(self, queue: dict, deleted: bool) -> None:
        name = queue["metadata"]["name"]
        if deleted:
            self.queues.pop(name, None)
            return
        try:
            info = self._queue_info(name, queue)
        except Exception:
            self.queues.pop(name, None)  # its jobs wait until the queue can be read again
            raise
        self.queues[name] = info

    @staticmethod
    def _queue_info(name: str, queue: dict) -> QueueInfo:
        spec = queue.get("spec") or {}
        status = queue.get("status") or {}
        meta = queue["metadata"]
        if not isinstance(spec, dict) or not isinstance(status, dict):
            raise TypeError("spec and status must be objects")

        def resources(field_name: str) -> Resource | None:
            value = spec.get(field_name)
            if field_name == "guarantee":
                value = (value or {}).get("resource")
            value = without_ignored_devices(value)
            return Resource.from_list(value, f"spec.{field_name}") if value else None

        weight = int(spec.get("weight") or 1)
        if weight < 1:
            raise ValueError(f"spec.weight: Invalid value: {weight}: must be a positive integer")
        return QueueInfo(
            name=name,
            uid=meta.get("uid") or name,
            weight=weight,
            priority=int(spec.get("priority") or 0),
            reclaimable=parse_bool(spec.get("reclaimable"), True),
            state=status.get("state") or "Open",
            parent=spec.get("parent") or ("" if name == k.ROOT_QUEUE else k.ROOT_QUEUE),
            creation=meta.get("creationTimestamp") or "",
            queue=queue,
            capability=resources("capability"),
            deserved=resources("deserved"),
            guarantee=resources("guarantee"),
        )

    def _priority_class(self, pc: dict, deleted: bool) -> None:
        name = pc["metadata"]["name"]
        self.priority_classes.pop(name, None)
        self._global_defaults.pop(name, None)
        for entry in self.jobs.values():
            entry.built = None  # job priorities come from PriorityClasses
        self.job_changes.note_all()
        if deleted:
            return
        value = int(pc.get("value") or 0)
        self.priority_classes[name] = value
        if pc.get("globalDefault"):
            self._global_defaults[name] = value

    @property
    def default_priority(self) -> int:
        """A globalDefault PriorityClass gives its value to groups that name no class."""
        return max(self._global_defaults.values(), default=0)

    # -- snapshot -------------------------------------------------------------------------------

    def job_info(self, job_id: str, entry: JobEntry) -> JobInfo | None:
        """A fresh JobInfo for a PodGroup, or None when it has none yet."""
        pg = entry.podgroup
        if pg is None:
            return None
        spec = pg.get("spec") or {}
        meta = pg["metadata"]
        class_name = spec.get("priorityClassName") or ""
        min_resources = spec.get("minResources")
        job = JobInfo(
            uid=job_id,
            name=meta["name"],
            namespace=meta.get("namespace", "default"),
            queue=spec.get("queue") or k.DEFAULT_QUEUE,
            priority=self.priority_classes.get(class_name, self.default_priority),
            min_available=int(spec.get("minMember") or 0),
            podgroup=pg,
            in_memory=entry.in_memory,
            creation=meta.get("creationTimestamp") or "",
            min_task_member={r: int(n) for r, n in (spec.get("minTaskMember") or {}).items()},
            min_resources=(
                Resource.from_list(_schedulable_names(min_resources), "spec.minResources")
                if min_resources is not None
                else None
            ),
            preemptable=parse_bool(
                ((meta.get("annotations") or {}).get(k.PREEMPTABLE_KEY))
                or ((meta.get("labels") or {}).get(k.PREEMPTABLE_KEY)),
                False,
            ),
        )
        for task in entry.tasks.values():
            job.add_task(task.clone())
        return job

    def release(self, snapshot: Snapshot) -> None:
        """The session of ``snapshot`` is over and nobody reads its jobs any more: the clones
        it holds may be lent to a later snapshot (see ``snapshot``)."""
        width = self._outstanding.pop(snapshot.serial, None)
        self._lending = self.reuse_clones
        if width is not None and len(snapshot.nodes.index.names) != width:
            # The session indexed names of its own: its tasks' vectors may name other
            # columns than a later session's of the same width.
            self._vector_epoch += 1

    def _lend(self, entry: JobEntry, job: JobInfo, serial: int) -> JobInfo:
        """A clone of ``job`` (``entry.built``) for snapshot ``serial``: one lent before to a
        released snapshot when it is still exactly what ``job.clone()`` gives, else a new one.

        A lent clone is still a fresh one when its revision is the built job's (neither the
        cache nor its session moved a task since it was made), its session set none of the
        per-session fields, no PodGroup replaced the one it was made with, and the vector
        epoch has not moved (its tasks' cached request rows hold)."""
        epoch = self._vector_epoch
        outstanding = self._outstanding
        spares = entry.lent
        # Oldest first: in a steady cycle the first is the one whose session was released.
        for i, lent in enumerate(spares):
            clone = lent.job
            if lent.serial in outstanding:
                continue
            if (
                clone.revision == job.revision
                and lent.epoch == epoch
                and clone.podgroup is job.podgroup
                and not clone.fit_errors
                and not clone.job_fit_error
                and clone.invalid is None
            ):
                del spares[i]
                lent.serial = serial
                spares.append(lent)
                return clone
        # Stale for good (revisions are unique, epochs only move on) or spoilt by its session.
        kept = [
            lent
            for lent in spares
            if lent.serial in outstanding
            and lent.job.revision == job.revision
            and lent.epoch == epoch
        ]
        fresh = Lent(job.clone(), serial, epoch)
        kept.append(fresh)
        if len(kept) > LENT_PER_JOB:
            del kept[0]  # held by a snapshot never released (a failed cycle): not lent again
        entry.lent = kept
        return fresh.job

    def snapshot(self) -> Snapshot:
        self._serial += 1
        serial = self._serial
        width = len(self.nodes.index.names)
        if width != self._index_width:
            self._index_width = width
            self._vector_epoch += 1
        lending = self._lending and self.reuse_clones
        if lending:
            self._outstanding[serial] = width
        jobs: dict[str, JobInfo] = {}
        emptied: list[str] = []
        for job_id, entry in self.jobs.items():
            if entry.in_memory and not entry.tasks:
                # Dropped here, not when its last pod goes: a pod's every update leaves and
                # rejoins its group, which must keep its phase meanwhile.
                emptied.append(job_id)
                continue
            if entry.built is None:
                entry.built = self.job_info(job_id, entry)
            job = entry.built
            if job is not None and job.queue in self.queues:
                jobs[job_id] = self._lend(entry, job, serial) if lending else job.clone()
        for job_id in emptied:
            del self.jobs[job_id]
        nodes = self.nodes.copy()
        # Session tasks are clones: point the node maps at them so state stays in one place.
        for job in jobs.values():
            for task in job.tasks.values():
                if task.node_name and task.node_name in nodes.position:
                    node = nodes.nodes[nodes.position[task.node_name]]
                    if task.uid in node.tasks:
                        node.tasks[task.uid] = task
        quotas: dict[str, list[dict]] = {}
        for (namespace, _), quota in self.resource_quotas.items():
            quotas.setdefault(namespace, []).append(quota)
        return Snapshot(
            serial=serial,
            jobs=jobs,
            queues=dict(self.queues),
            nodes=nodes,
            priority_classes=dict(self.priority_classes),
            resource_quotas=quotas,
            pdbs=list(self.pdbs.values()),
            hypernodes=dict(self.hypernodes),
            numatopologies=dict(self.numatopologies),
        )

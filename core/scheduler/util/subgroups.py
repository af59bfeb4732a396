"""A PodGroup's ``subGroupPolicy``: the sub-gangs (partitions) its tasks form.

Each policy selects tasks by ``labelSelector`` and splits them by the values of its
``matchLabelKeys`` (a vcjob's ``partitionPolicy`` becomes one policy per task, split by
``volcano.sh/partition-id``). A sub-group is ready when ``subGroupSize`` of its tasks are
placed, and a job with policies is ready only when, for each policy, at least
``minSubGroups`` of its sub-groups are. A sub-group is placed whole or not at all, and, with a
``networkTopology``, inside one HyperNode of the tier it allows.

The policies come from stored objects: a policy that cannot be read (a broken selector, no
size) is skipped and logged naming the PodGroup and the field, never a failed cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stromboli.core.cluster.selectors import SelectorError, selector_from_dict
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS, READY_STATUS, TaskStatus

log = logging.getLogger(__name__)

#: Most policies read from one PodGroup (Volcano has no limit; a job has a few tasks).
MAX_POLICIES = 64
_PLACED = ALLOCATED_STATUS | TaskStatus.PIPELINED | READY_STATUS


@dataclass(slots=True)
class SubGroup:
    """One sub-gang: the tasks of one policy sharing the values of its ``matchLabelKeys``."""

    policy: str
    #: ``<policy>-<values>``, as Volcano names a SubJob within its job.
    key: str
    size: int
    topology: Mapping[str, Any] | None
    tasks: list[TaskInfo] = field(default_factory=list)

    def placed(self) -> int:
        return sum(1 for t in self.tasks if t.status & _PLACED)

    def ready(self) -> bool:
        return self.placed() >= self.size


@dataclass(slots=True)
class SubGroups:
    groups: list[SubGroup]
    #: Policy name → ``minSubGroups``.
    minimum: dict[str, int]

    def satisfied(self) -> bool:
        """Whether every policy has at least ``minSubGroups`` ready sub-groups."""
        ready: dict[str, int] = {}
        for group in self.groups:
            if group.ready():
                ready[group.policy] = ready.get(group.policy, 0) + 1
        return all(ready.get(name, 0) >= need for name, need in self.minimum.items())


def has_subgroups(job: JobInfo) -> bool:
    policies = (job.podgroup.get("spec") or {}).get("subGroupPolicy")
    return isinstance(policies, list) and bool(policies)


def has_subgroup_topology(job: JobInfo) -> bool:
    """Whether one of the job's ``subGroupPolicy`` entries asks for a ``networkTopology``
    (its sub-groups are then placed HyperNode by HyperNode)."""
    policies = (job.podgroup.get("spec") or {}).get("subGroupPolicy")
    if not isinstance(policies, list):
        return False
    for policy in policies[:MAX_POLICIES]:
        topology = policy.get("networkTopology") if isinstance(policy, Mapping) else None
        if isinstance(topology, Mapping) and topology:
            return True
    return False


def _labels(task: TaskInfo) -> Mapping[str, str]:
    return (task.pod.get("metadata") or {}).get("labels") or {}


def _count(value: Any, default: int) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def job_subgroups(job: JobInfo) -> SubGroups:
    """The job's sub-groups, in policy order then by key; a task joins the first policy that
    selects it."""
    where = f"PodGroup {job.namespace}/{job.name}"
    policies = (job.podgroup.get("spec") or {}).get("subGroupPolicy") or []
    groups: dict[str, SubGroup] = {}
    minimum: dict[str, int] = {}
    taken: set[str] = set()
    tasks = sorted(job.tasks.values(), key=lambda t: (t.index, t.name))
    for i, policy in enumerate(policies[:MAX_POLICIES] if isinstance(policies, list) else ()):
        field_name = f"{where}: spec.subGroupPolicy[{i}]"
        if not isinstance(policy, Mapping):
            log.warning("%s is not an object; skipped", field_name)
            continue
        name = str(policy.get("name") or i)
        size = _count(policy.get("subGroupSize"), 1)
        need = _count(policy.get("minSubGroups"), 0)
        keys = policy.get("matchLabelKeys") or []
        if size is None or size < 1 or need is None:
            log.warning(
                "%s: subGroupSize and minSubGroups must be whole numbers; skipped", field_name
            )
            continue
        if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
            log.warning("%s.matchLabelKeys is not a list of label keys; skipped", field_name)
            continue
        try:
            selector = selector_from_dict(policy.get("labelSelector") or {})
        except SelectorError as err:
            log.warning("%s.labelSelector: %s; skipped", field_name, err)
            continue
        topology = policy.get("networkTopology")
        minimum[name] = need
        for task in tasks:
            labels = _labels(task)
            if task.uid in taken or not selector.matches(labels):
                continue
            if any(key not in labels for key in keys):
                continue
            key = "-".join([name, *(labels[key] for key in keys)])
            group = groups.get(key)
            if group is None:
                group = groups[key] = SubGroup(
                    name, key, size, topology if isinstance(topology, Mapping) else None
                )
            group.tasks.append(task)
            taken.add(task.uid)
    ordered = sorted(groups.values(), key=lambda g: _natural(g.key))
    return SubGroups(ordered, minimum)


def _natural(key: str) -> tuple:
    """``worker-10`` after ``worker-9``."""
    head, _, tail = key.rpartition("-")
    return (head, int(tail), "") if tail.isdigit() else (key, -1, tail)

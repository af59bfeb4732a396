"""nodegroup: queues choose groups of nodes, named by the node label
``volcano.sh/nodegroup-name``.

A queue's ``spec.affinity`` lists node groups its jobs must or should run in
(``nodeGroupAffinity``) and must or should stay away from (``nodeGroupAntiAffinity``), each with
``requiredDuringSchedulingIgnoredDuringExecution`` and
``preferredDuringSchedulingIgnoredDuringExecution`` lists. A node passes when its group is in
the required or preferred affinity, or in the preferred anti-affinity (a preference, not a ban),
and not in the required anti-affinity. A node without a group label fails, as does a grouped
node for a queue with no affinity at all; with ``strict: false`` an ungrouped node is allowed
to queues without affinity. Scores: +100 for a required group, +50 for a preferred one (with
``enablePreferredOrder``, 50·(n−i)/n by its place i in the list of n), and −1 for a group the
queue would rather avoid.

With ``enableHierarchy`` a queue without affinity inherits its nearest ancestor's. A queue may
cap what it uses in each group with the annotation ``volcano.sh/nodegroup-resource-limits``,
a JSON map of group name to ResourceList.

Scores depend on the task's queue, not just its shape, so they are registered as batch scores,
which the session never shares between tasks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import orjson

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.resource import EPSILON, PODS, Resource, to_amount
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import EventHandler, Session

log = logging.getLogger(__name__)

BASE_SCORE = 100.0
AFFINITY_NOT_SPECIFIED = "node group affinity not specified"
LABEL_NOT_FOUND = "node group label not found"
NOT_SATISFIED = "node does not satisfy the node group affinity"
LIMIT_INVALID = "node group resource limit annotation invalid"
LIMIT_EXCEEDED = "node group resource limit exceeded"


@dataclass(slots=True)
class GroupAffinity:
    required: set[str] = field(default_factory=set)
    preferred: list[str] = field(default_factory=list)
    anti_required: set[str] = field(default_factory=set)
    anti_preferred: set[str] = field(default_factory=set)

    @classmethod
    def from_queue(cls, queue: QueueInfo) -> GroupAffinity | None:
        affinity = (queue.queue.get("spec") or {}).get("affinity")
        if not affinity:
            return None
        pro = affinity.get("nodeGroupAffinity") or {}
        anti = affinity.get("nodeGroupAntiAffinity") or {}
        required_key = "requiredDuringSchedulingIgnoredDuringExecution"
        preferred_key = "preferredDuringSchedulingIgnoredDuringExecution"
        return cls(
            required=set(pro.get(required_key) or ()),
            preferred=list(dict.fromkeys(pro.get(preferred_key) or ())),
            anti_required=set(anti.get(required_key) or ()),
            anti_preferred=set(anti.get(preferred_key) or ()),
        )

    def is_empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def admits(self, group: str) -> bool:
        """Required anti-affinity outranks affinity; preferred anti-affinity still admits."""
        if group in self.anti_preferred:
            return True
        if group in self.anti_required:
            return False
        return group in self.required or group in self.preferred

    def score(self, group: str, preferred_order: bool) -> float:
        score = 0.0
        if group in self.required:
            score += BASE_SCORE
        if group in self.preferred:
            if preferred_order:
                n = len(self.preferred)
                score += 0.5 * BASE_SCORE * (n - self.preferred.index(group)) / n
            else:
                score += 0.5 * BASE_SCORE
        if group in self.anti_preferred:
            score = -1.0
        return score


@dataclass(slots=True)
class QueueGroups:
    """One queue's node-group rules and what it uses in each group."""

    affinity: GroupAffinity | None
    limits: dict[str, dict[str, float]] = field(default_factory=dict)
    limit_error: str = ""
    allocated: dict[str, Resource] = field(default_factory=dict)


def parse_limits(queue: QueueInfo) -> tuple[dict[str, dict[str, float]], str]:
    """Per-group limits from the queue annotation, and an error text when it is unreadable."""
    raw = queue.annotations.get(k.NODEGROUP_RESOURCE_LIMITS_KEY)
    if not raw:
        return {}, ""
    try:
        data = orjson.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object of node group name to ResourceList")
        limits: dict[str, dict[str, float]] = {}
        for group, values in data.items():
            if not isinstance(values, dict):
                raise ValueError(f"{group}: expected a ResourceList, got {values!r}")
            limits[str(group)] = {
                name: to_amount(name, value, f"{group}.{name}") for name, value in values.items()
            }
        return limits, ""
    except (ValueError, TypeError, AttributeError) as err:
        return {}, f"queue {queue.name}: {k.NODEGROUP_RESOURCE_LIMITS_KEY}: {err}"


class NodeGroupPlugin(Plugin):
    name = "nodegroup"
    known_arguments: ClassVar[dict[str, object]] = {"strict": True, "enablePreferredOrder": False}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.strict = self.arguments.get_bool("strict", True)
        self.preferred_order = self.arguments.get_bool("enablePreferredOrder", False)
        option = getattr(self, "option", None)
        hierarchy = bool(option is not None and option.hierarchy)
        # Node groups, fixed for the session: the label per node, and group → node mask.
        labels = [node.labels.get(k.NODEGROUP_NAME_KEY) for node in ssn.nodes.nodes]
        self.groups = labels
        self.grouped = np.array([g is not None for g in labels], dtype=bool)
        self.names = sorted({g for g in labels if g is not None})
        self.members = {g: np.array([x == g for x in labels], dtype=bool) for g in self.names}
        self.queues: dict[str, QueueGroups] = {}
        for queue in ssn.queues.values():
            limits, error = parse_limits(queue)
            if error:
                log.error("nodegroup: %s", error)
            self.queues[queue.name] = QueueGroups(GroupAffinity.from_queue(queue), limits, error)
        if hierarchy:
            self._inherit(ssn)
        for job in ssn.jobs.values():
            for task in job.tasks_with(ALLOCATED_STATUS):
                self._account(job.queue, task, 1.0)
        self._masks: dict[str, tuple[np.ndarray, ...]] = {}
        self._scores: dict[str, np.ndarray] = {}
        ssn.register(ExtensionPoint.PREDICATE, self.name, self.predicate)
        ssn.register(ExtensionPoint.BATCH_NODE_ORDER, self.name, self.node_order)
        ssn.add_event_handler(
            EventHandler(
                allocate=lambda task: self._account(self._queue_of(task), task, 1.0),
                deallocate=lambda task: self._account(self._queue_of(task), task, -1.0),
            )
        )

    def _inherit(self, ssn: Session) -> None:
        """Queues without affinity take their nearest ancestor's."""
        for name, groups in self.queues.items():
            if groups.affinity is not None:
                continue
            seen = {name}
            current = ssn.queues[name].parent
            while current and current in ssn.queues and current not in seen:
                seen.add(current)
                ancestor = self.queues[current].affinity
                if ancestor is not None:
                    groups.affinity = ancestor
                    break
                current = ssn.queues[current].parent

    def _queue_of(self, task: TaskInfo) -> str:
        job = self.ssn.jobs.get(task.job_id)
        return job.queue if job is not None else ""

    def _account(self, queue: str, task: TaskInfo, sign: float) -> None:
        groups = self.queues.get(queue)
        if groups is None or not groups.limits or not task.node_name:
            return
        position = self.ssn.nodes.position.get(task.node_name)
        group = self.groups[position] if position is not None else None
        if group is None:
            return
        used = groups.allocated.setdefault(group, Resource())
        if sign > 0:
            used.add(task.resreq)
        else:
            used.sub(task.resreq)

    def _queue_masks(self, queue: str) -> tuple[np.ndarray, ...]:
        """(no label, group but no affinity, group not admitted) node masks for a queue."""
        cached = self._masks.get(queue)
        if cached is not None:
            return cached
        groups = self.queues.get(queue)
        affinity = groups.affinity if groups is not None else None
        unset = affinity is None or affinity.is_empty()
        count = len(self.groups)
        no_label = ~self.grouped if (self.strict or not unset) else np.zeros(count, dtype=bool)
        no_affinity = self.grouped if unset else np.zeros(count, dtype=bool)
        refused = np.zeros(count, dtype=bool)
        if not unset:
            assert affinity is not None
            for name in self.names:
                if not affinity.admits(name):
                    refused |= self.members[name]
        cached = self._masks[queue] = (no_label, no_affinity, refused)
        return cached

    def predicate(self, task: TaskInfo) -> Filter:
        queue = self._queue_of(task)
        result = Filter.all_pass(len(self.groups))
        groups = self.queues.get(queue)
        if groups is not None and groups.limit_error:
            result.fail(np.ones(len(self.groups), dtype=bool), LIMIT_INVALID, True)
            return result
        no_label, no_affinity, refused = self._queue_masks(queue)
        result.fail(no_label, LABEL_NOT_FOUND, True)
        result.fail(no_affinity, AFFINITY_NOT_SPECIFIED, True)
        result.fail(refused, NOT_SATISFIED, True)
        if groups is not None and groups.limits:
            over = np.zeros(len(self.groups), dtype=bool)
            for name, limit in groups.limits.items():
                if name in self.members and self._over_limit(groups, name, limit, task):
                    over |= self.members[name]
            result.fail(over & result.passed, LIMIT_EXCEEDED, True)
        return result

    @staticmethod
    def _over_limit(
        groups: QueueGroups, name: str, limit: dict[str, float], task: TaskInfo
    ) -> bool:
        """Whether the task would take the queue past a limit it has in group ``name``
        (only the resources the limit names count; a limit of zero is a limit)."""
        future = (groups.allocated.get(name) or Resource()) + task.resreq
        return any(
            future.get(resource) > cap + EPSILON
            for resource, cap in limit.items()
            if resource != PODS
        )

    def node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        queue = self._queue_of(task)
        scores = self._scores.get(queue)
        if scores is None:
            scores = np.zeros(len(self.groups))
            groups = self.queues.get(queue)
            affinity = groups.affinity if groups is not None else None
            if affinity is not None:
                for name in self.names:
                    scores[self.members[name]] = affinity.score(name, self.preferred_order)
            self._scores[queue] = scores
        return scores[positions]

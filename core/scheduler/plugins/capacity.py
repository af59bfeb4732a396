"""capacity: queues with explicit ``deserved``, ``capability`` and ``guarantee`` amounts.

Where ``proportion`` computes what each queue deserves from weights, ``capacity`` takes it from
the Queue spec. A queue may use up to its *real capability* (its capability, less what the
other queues are guaranteed), lends what it does not use, and gets back whatever it is owed
above its deserved amount by reclaiming from queues that use more than theirs, never taking a
queue below its guarantee. Queues are ordered by priority, then by how much of their deserved
amount they use (``share``); a queue without a deserved amount is best effort (share 1).

With ``enableHierarchy: true`` the queues form a tree through ``spec.parent``, rooted at
``root``. Only leaf queues accept jobs; every admission and allocation check walks up the
ancestor chain, so a child never goes past any ancestor's capability; a parent's real
capability is shared among its children after their guarantees are set aside. The root is not
limited by the cluster's current size unless it has a capability of its own (Volcano lets users
queue more than the cluster holds and limits queues, not the root).

Resource limits follow Volcano: checks look only at the resources a task or PodGroup asks for;
a capability that does not name a resource leaves it unlimited, and a cpu or memory capability
of zero or less means unlimited too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from stromboli.core.api import constants as k
from stromboli.core.api.quantity import QuantityError
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.resource import (
    CPU,
    EPSILON,
    MEMORY,
    PODS,
    Resource,
    format_amount,
    to_amount,
)
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS, TaskStatus
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import (
    PERMIT,
    REJECT,
    EventHandler,
    Session,
)
from stromboli.core.scheduler.util.inqueue import format_resource_names

log = logging.getLogger(__name__)

ANCESTOR_RECLAIM_LEVEL = "ancestorReclaimLevel"
DRA_ENABLE = "capacity.DynamicResourceAllocationEnable"
DRA_CONSUMABLE_CAPACITY_ENABLE = "capacity.DRAConsumableCapacityEnable"
ROOT = k.ROOT_QUEUE
#: Condition reasons for jobs the hierarchy cannot take.
NOT_LEAF_REASON = "NotLeafQueue"
INVALID_HIERARCHY_REASON = "InvalidQueueHierarchy"
#: Prefix of the PodGroup event when a queue (or an ancestor) has no room to admit a job.
QUOTA_MESSAGE = "queue resource quota insufficient"
#: ResourceQuota-style names (``requests.cpu``, ``count/pods``) that PodGroups may carry in
#: ``minResources`` for the resourcequota plugin; they are not schedulable resources.
_QUOTA_PREFIXES = ("requests.", "limits.", "count/")


def _schedulable(name: str) -> bool:
    return name != PODS and not name.startswith(_QUOTA_PREFIXES)


class Limit:
    """Upper bounds per resource; a resource not listed is bounded by ``default``.

    Without hierarchy a real capability is derived from the cluster total, so a resource no
    node has is bounded by zero; under hierarchy the root is unbounded (``default`` infinity)
    and its descendants inherit that.
    """

    __slots__ = ("amounts", "default")

    def __init__(self, amounts: dict[str, float] | None = None, default: float = 0.0) -> None:
        self.amounts: dict[str, float] = dict(amounts or {})
        self.default = default

    def get(self, name: str) -> float:
        return self.amounts.get(name, self.default)

    def clone(self) -> Limit:
        return Limit(self.amounts, self.default)

    def capped(self, capability: dict[str, float]) -> Limit:
        """Per-name minimum with ``capability``; names it does not list are left alone."""
        out = self.clone()
        for name, cap in capability.items():
            out.amounts[name] = min(out.get(name), cap)
        return out

    def minus(self, amount: Resource) -> Limit:
        """What is left after setting ``amount`` aside (never below zero)."""
        out = self.clone()
        for name, v in amount.amounts.items():
            out.amounts[name] = max(out.get(name) - v, 0.0)
        return out

    def plus(self, amount: Resource) -> Limit:
        out = self.clone()
        for name, v in amount.amounts.items():
            out.amounts[name] = out.get(name) + v
        return out

    def to_list(self) -> dict[str, str]:
        """ResourceList text of the finite bounds (for messages and reports)."""
        return {
            name: format_amount(name, v)
            for name, v in sorted(self.amounts.items())
            if math.isfinite(v) and name != PODS
        }

    def __repr__(self) -> str:
        unlimited = "unlimited" if math.isinf(self.default) else "0"
        return f"Limit({self.to_list()}, others={unlimited})"


def capability_of(queue: QueueInfo) -> dict[str, float]:
    """The queue's capability as bounds: cpu or memory at zero or below means unlimited (the
    name is left out); other resources keep their value, zero included."""
    raw = ((queue.queue.get("spec") or {}).get("capability")) or {}
    out: dict[str, float] = {}
    for name, value in raw.items():
        try:
            amount = to_amount(name, value, f"spec.capability.{name}")
        except QuantityError as err:
            log.warning("queue %s: ignoring capability %s: %s", queue.name, name, err)
            continue
        if name in (CPU, MEMORY) and amount <= 0:
            continue
        out[name] = amount
    return out


def capacity_share(allocated: Resource, deserved: Resource) -> float:
    """Largest fraction of the deserved amount in use; 1 for a queue that deserves nothing
    (best effort: it goes after every queue still below its deserved amount)."""
    if deserved.is_empty():
        return 1.0
    share = 0.0
    for name, fair in deserved.amounts.items():
        if name == PODS or fair < EPSILON:
            continue
        share = max(share, allocated.get(name) / fair)
    return share


def exceeded(future: Resource, limit: Limit, request: Resource) -> list[str]:
    """Resources asked for in ``request`` on which ``future`` would pass ``limit``."""
    return [
        name
        for name, v in request.amounts.items()
        if v > EPSILON and _schedulable(name) and future.get(name) > limit.get(name) + EPSILON
    ]


def _names(resource: Resource) -> set[str]:
    return {n for n, v in resource.amounts.items() if v >= EPSILON and n != PODS}


def has_relevant_deserved(request: Resource, deserved: Resource) -> bool:
    """Whether the queue deserves any of the resources ``request`` uses."""
    return bool(_names(request) & _names(deserved))


def exceeds_deserved(allocated: Resource, deserved: Resource, request: Resource) -> list[str]:
    """Resources used by ``request`` that the queue deserves and has more of than deserved."""
    return [
        name
        for name, v in request.amounts.items()
        if v > EPSILON
        and name != PODS
        and deserved.get(name) >= EPSILON
        and allocated.get(name) > deserved.get(name) + EPSILON
    ]


def within_deserved_partly(future: Resource, deserved: Resource, request: Resource) -> bool:
    """Some resource ``request`` uses stays within the deserved amount (resources that neither
    side has at all are not considered)."""
    for name, v in request.amounts.items():
        if v <= EPSILON or name == PODS:
            continue
        used, fair = future.get(name), deserved.get(name)
        if used < EPSILON and fair < EPSILON:
            continue
        if used <= fair + EPSILON:
            return True
    return False


def guarantee_kept(allocated: Resource, request: Resource, guarantee: Resource) -> bool:
    """Whether the queue still holds its guarantee after giving up ``request``."""
    left = allocated - request
    return all(
        v <= left.get(name) + EPSILON
        for name, v in guarantee.amounts.items()
        if name != PODS and v >= EPSILON
    )


@dataclass(slots=True, eq=False)
class QueueAttr:
    """A queue's amounts in this session."""

    name: str
    priority: int
    deserved: Resource
    guarantee: Resource
    capability: dict[str, float]
    real_capability: Limit = field(default_factory=Limit)
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    share: float = 0.0
    #: Ancestors from the root down to the parent (empty without hierarchy).
    ancestors: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    #: Whether any job of the session names this queue.
    has_jobs: bool = False
    #: Why the hierarchy cannot use this queue (a missing parent, a cycle); empty when fine.
    broken: str = ""

    def update_share(self) -> None:
        self.share = capacity_share(self.allocated, self.deserved)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def ancestor_at(self, depth: int) -> str | None:
        """The ancestor ``depth`` levels up (1 = parent), or None above the root."""
        if depth <= 0 or len(self.ancestors) < depth:
            return None
        return self.ancestors[-depth]


def job_amounts(job: JobInfo) -> tuple[Resource, Resource, Resource, Resource]:
    """(allocated, requested, still to come for admitted minResources, elastic) of a job.

    ``elastic`` is what the job holds beyond its ``minResources`` (everything, for a job that
    names none): enqueue checks discount it, since reclaim may take it back.
    """
    allocated = job.allocated.clone()
    request = allocated.clone()
    for task in (job.by_status.get(TaskStatus.PENDING) or {}).values():
        request.add(task.resreq)
    inqueue = Resource()
    minimum = job.min_resources
    admitted = job.phase == "Inqueue" or (
        job.phase == "Running" and job.count(ALLOCATED_STATUS) >= job.min_available
    )
    if minimum is not None and admitted:
        inqueue = minimum - allocated
    elastic = allocated - (minimum or Resource())
    return allocated, request, inqueue, elastic


def _sum(resources: Iterable[Resource]) -> Resource:
    total = Resource()
    for resource in resources:
        total.add(resource)
    return total


def _common_prefix(left: list[str], right: list[str]) -> int:
    count = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        count += 1
    return count


def _short_of(have: Resource, need: Resource) -> bool:
    return any(have.get(name) < v - EPSILON for name, v in need.amounts.items() if name != PODS)


def _format_names(prefix: str, names: list[str]) -> str:
    return format_resource_names(prefix, "insufficient", names)


class CapacityPlugin(Plugin):
    name = "capacity"
    known_arguments: ClassVar[dict[str, object]] = {
        ANCESTOR_RECLAIM_LEVEL: 0,
        DRA_ENABLE: False,
        DRA_CONSUMABLE_CAPACITY_ENABLE: False,
    }

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        level = self.arguments.get_int(ANCESTOR_RECLAIM_LEVEL, 0)
        if level < 0:
            log.warning(
                "capacity: %s must not be negative, got %d; using 0", ANCESTOR_RECLAIM_LEVEL, level
            )
            level = 0
        self.ancestor_reclaim_level = level
        # Dynamic resource allocation quotas: accepted for compatibility; this scheduler does
        # not model ResourceClaims, so there is nothing to count against them.
        self.dra_enabled = self.arguments.get_bool(DRA_ENABLE, False)
        self.dra_consumable = self.arguments.get_bool(DRA_CONSUMABLE_CAPACITY_ENABLE, False)
        option = getattr(self, "option", None)
        self.hierarchy = bool(option is not None and option.hierarchy)
        self.attrs: dict[str, QueueAttr] = {}
        ssn.queue_accounts[self.name] = self.attrs
        if self.hierarchy:
            self._build_tree(ssn)
        else:
            self._build_flat(ssn)
        self._account_jobs(ssn)
        for attr in self.attrs.values():
            attr.update_share()
        self._publish(ssn)

        ssn.register(ExtensionPoint.QUEUE_ORDER, self.name, self.queue_order)
        ssn.register(ExtensionPoint.ALLOCATABLE, self.name, self.allocatable)
        ssn.register(ExtensionPoint.PREEMPTIVE, self.name, self.preemptive)
        ssn.register(ExtensionPoint.JOB_ENQUEUEABLE, self.name, self.job_enqueueable)
        ssn.register(ExtensionPoint.JOB_ENQUEUED, self.name, self.job_enqueued)
        ssn.register(ExtensionPoint.RECLAIMABLE, self.name, self.reclaimable)
        if self.hierarchy:
            ssn.register(ExtensionPoint.JOB_VALID, self.name, self.job_valid)
            ssn.register(ExtensionPoint.VICTIM_QUEUE_ORDER, self.name, self.victim_queue_order)
        ssn.add_event_handler(
            EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate)
        )

    def on_session_close(self, ssn: Session) -> None:
        self._publish(ssn)

    # -- building the queue attributes ----------------------------------------------------------

    @staticmethod
    def _new_attr(queue: QueueInfo) -> QueueAttr:
        return QueueAttr(
            name=queue.name,
            priority=queue.priority,
            deserved=queue.deserved.clone() if queue.deserved is not None else Resource(),
            guarantee=queue.guarantee.clone() if queue.guarantee is not None else Resource(),
            capability=capability_of(queue),
        )

    def _build_flat(self, ssn: Session) -> None:
        """Every queue on its own: real capability = min(capability, total − Σ guarantees +
        own guarantee); deserved is capped by it and floored at the guarantee."""
        total = ssn.total_resource.clone()
        total.amounts.pop(PODS, None)
        guarantees = _sum(q.guarantee for q in ssn.queues.values() if q.guarantee is not None)
        unreserved = Limit(total.amounts).minus(guarantees)
        for queue in ssn.queues.values():
            attr = self.attrs[queue.name] = self._new_attr(queue)
            attr.real_capability = unreserved.plus(attr.guarantee).capped(attr.capability)
            deserved = attr.deserved
            for name in list(deserved.amounts):
                if name in attr.real_capability.amounts:
                    deserved.amounts[name] = min(
                        deserved.amounts[name], attr.real_capability.get(name)
                    )
            attr.deserved = deserved.max_with(attr.guarantee)

    def _build_tree(self, ssn: Session) -> None:
        """Queues as a tree through ``spec.parent``: ancestors, children, real capabilities
        from the root down."""
        for queue in ssn.queues.values():
            self.attrs[queue.name] = self._new_attr(queue)
        if ROOT not in self.attrs:
            self.attrs[ROOT] = QueueAttr(ROOT, 0, Resource(), Resource(), {})
        for attr in self.attrs.values():
            if attr.name == ROOT:
                continue
            chain: list[str] = []
            seen = {attr.name}  # a set beside the chain: a stored chain may be long
            current = attr.name
            while current != ROOT:
                current_queue = ssn.queues.get(current)
                parent = (current_queue.parent if current_queue is not None else "") or ROOT
                if parent in seen:
                    attr.broken = f"queue {attr.name} is in a cycle of parent queues ({parent})"
                    break
                if parent not in self.attrs:
                    attr.broken = (
                        f"queue {current} names parent queue {parent}, which does not exist"
                    )
                    break
                chain.append(parent)
                seen.add(parent)
                current = parent
            if not attr.broken:
                attr.ancestors = list(reversed(chain))
        for attr in self.attrs.values():
            if attr.ancestors:
                self.attrs[attr.ancestors[-1]].children.append(attr.name)
        root = self.attrs[ROOT]
        root.real_capability = Limit(root.capability, default=math.inf)
        # Parents before children, with a stack of our own: a stored chain of queues may be
        # deeper than Python's recursion limit.
        pending = [root]
        while pending:
            pending.extend(self._settle_children(pending.pop()))

    def _settle_children(self, parent: QueueAttr) -> list[QueueAttr]:
        """Give ``parent``'s children their deserved share and real capability; returns
        them, to be settled in turn."""
        children = [self.attrs[name] for name in parent.children]
        for child in children:
            child.deserved = child.deserved.max_with(child.guarantee)
        deserved = _sum(c.deserved for c in children)
        guarantees = _sum(c.guarantee for c in children)
        if parent.name == ROOT:
            parent.deserved = deserved
            parent.guarantee = guarantees
        elif children:
            if _short_of(parent.deserved, deserved):
                log.debug(
                    "capacity: children of queue %s deserve %s in all, more than its %s",
                    parent.name,
                    deserved,
                    parent.deserved,
                )
            if _short_of(parent.guarantee, guarantees):
                log.debug(
                    "capacity: children of queue %s are guaranteed %s in all, more than its %s; "
                    "not all of them can be met at once",
                    parent.name,
                    guarantees,
                    parent.guarantee,
                )
        shared = parent.real_capability.minus(guarantees)
        for child in children:
            over = [
                name
                for name, cap in child.capability.items()
                if name in parent.capability and cap > parent.capability[name] + EPSILON
            ]
            if over:
                log.debug(
                    "capacity: queue %s capability exceeds its parent %s on %s; the parent's "
                    "limit applies",
                    child.name,
                    parent.name,
                    ", ".join(sorted(over)),
                )
            child.real_capability = shared.plus(child.guarantee).capped(child.capability)
        return children

    def _account_jobs(self, ssn: Session) -> None:
        for job in ssn.jobs.values():
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            attr.has_jobs = True
            allocated, request, inqueue, elastic = job_amounts(job)
            for name in self._chain(attr):
                target = self.attrs[name]
                target.allocated.add(allocated)
                target.request.add(request)
                target.inqueue.add(inqueue)
                target.elastic.add(elastic)

    def _chain(self, attr: QueueAttr) -> list[str]:
        """The queue and its ancestors, leaf first (just the queue without hierarchy)."""
        return [attr.name, *reversed(attr.ancestors)]

    def _publish(self, ssn: Session) -> None:
        for attr in self.attrs.values():
            if attr.has_jobs or (self.hierarchy and not attr.broken):
                ssn.queue_figures[attr.name] = {
                    "deserved": attr.deserved,
                    "allocated": attr.allocated,
                    "request": attr.request,
                    "share": attr.share,
                }

    # -- callbacks --------------------------------------------------------------------------------

    @staticmethod
    def _compare_share(left: QueueAttr, right: QueueAttr) -> int:
        """Smaller share first; on equal shares a queue that deserves something goes first."""
        if left.share != right.share:
            return -1 if left.share < right.share else 1
        left_has, right_has = not left.deserved.is_empty(), not right.deserved.is_empty()
        if left_has == right_has:
            return 0
        return -1 if left_has else 1

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        if la is None or ra is None:
            return 0
        if not self.hierarchy:
            return self._compare_share(la, ra)
        if la.is_leaf != ra.is_leaf:
            return -1 if la.is_leaf else 1
        if not la.is_leaf:
            return self._compare_share(la, ra)
        # Two leaves: compare the branches where their paths from the root part.
        lpath, rpath = [*la.ancestors, la.name], [*ra.ancestors, ra.name]
        split = 0
        while split < min(len(lpath), len(rpath)) and lpath[split] == rpath[split]:
            split += 1
        lbranch = self.attrs[lpath[split]] if split < len(lpath) else la
        rbranch = self.attrs[rpath[split]] if split < len(rpath) else ra
        return self._compare_share(lbranch, rbranch)

    def victim_queue_order(
        self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo | None
    ) -> int:
        """Queues closer to the reclaiming queue in the tree give up resources first."""
        mine = self.attrs.get(preemptor.name) if preemptor is not None else None
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        if mine is None or la is None or ra is None:
            return 0
        lcommon = _common_prefix(la.ancestors, mine.ancestors)
        rcommon = _common_prefix(ra.ancestors, mine.ancestors)
        if lcommon == rcommon:
            return 0
        return -1 if lcommon > rcommon else 1

    def _objection(self, attr: QueueAttr) -> tuple[str, str] | None:
        """Why the hierarchy does not let this queue hold jobs, or None."""
        if attr.broken:
            return INVALID_HIERARCHY_REASON, attr.broken
        if self.hierarchy and not attr.is_leaf:
            children = ", ".join(sorted(attr.children))
            return (
                NOT_LEAF_REASON,
                f"queue {attr.name} is not a leaf queue (its children: {children}); "
                "only leaf queues accept jobs",
            )
        return None

    def job_valid(self, job: JobInfo) -> tuple[str, str] | None:
        attr = self.attrs.get(job.queue)
        return self._objection(attr) if attr is not None else None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if not queue.is_open():
            return False
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        if self._objection(attr) is not None:
            return False
        for name in self._chain(attr):
            target = self.attrs[name]
            if exceeded(target.allocated + task.resreq, target.real_capability, task.resreq):
                return False
        return True

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Whether the queue may reclaim for ``task``: it stays within its real capability and
        within its deserved amount on some resource the task uses (or, with
        ``ancestorReclaimLevel``, one of its near ancestors does)."""
        if not queue.is_open():
            return False
        attr = self.attrs.get(queue.name)
        if attr is None or self._objection(attr) is not None:
            return False
        request = task.resreq
        future = attr.allocated + request
        if exceeded(future, attr.real_capability, request):
            return False
        if within_deserved_partly(future, attr.deserved, request):
            return True
        if self.hierarchy:
            for depth in range(1, self.ancestor_reclaim_level + 1):
                name = attr.ancestor_at(depth)
                if name is None or name == ROOT:
                    continue
                ancestor = self.attrs[name]
                if within_deserved_partly(ancestor.allocated + request, ancestor.deserved, request):
                    return True
        return False

    def job_enqueueable(self, job: JobInfo) -> int:
        queue = self.ssn.queues.get(job.queue)
        attr = self.attrs.get(job.queue)
        if queue is None or attr is None:
            return REJECT
        objection = self._objection(attr)
        if objection is not None:
            self.ssn.job_events.append((job.uid, "Normal", "Unschedulable", objection[1]))
            return REJECT
        if not queue.is_open():
            return REJECT
        minimum = job.min_resources
        if minimum is None:
            return PERMIT
        for name in self._chain(attr):
            target = self.attrs[name]
            wanted = minimum.clone().add(target.allocated).add(target.inqueue).sub(target.elastic)
            short = exceeded(wanted, target.real_capability, minimum)
            if short:
                message = _format_names(QUOTA_MESSAGE, short)
                self.ssn.job_events.append((job.uid, "Normal", "Unschedulable", message))
                return REJECT
        return PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return
        for name in self._chain(attr):
            self.attrs[name].inqueue.add(job.min_resources)

    def _shares_near_ancestor(self, left: QueueAttr, right: QueueAttr) -> bool:
        """Whether two queues have a common ancestor other than the root within
        ``ancestorReclaimLevel`` levels up."""
        level = self.ancestor_reclaim_level
        mine = {left.ancestor_at(d) for d in range(1, level + 1)}
        theirs = {right.ancestor_at(d) for d in range(1, level + 1)}
        return bool((mine & theirs) - {None, ROOT})

    def _ancestor_to_check(
        self, reclaimer: QueueAttr, reclaimee: QueueAttr, depth: int
    ) -> QueueAttr | None:
        """The reclaimee's ancestor ``depth`` levels up, unless it is the root or the
        reclaimer's own ancestor at that depth (no contention between them there)."""
        name = reclaimee.ancestor_at(depth)
        if name is None or name == ROOT or reclaimer.ancestor_at(depth) == name:
            return None
        return self.attrs[name]

    def reclaimable(
        self, reclaimer: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        """Victims among ``candidates``: tasks of queues holding more than they deserve on a
        resource the task uses (or that deserve none of what it uses), never taking a queue
        below its guarantee."""
        ssn = self.ssn
        reclaimer_job = ssn.jobs.get(reclaimer.job_id)
        reclaimer_attr = self.attrs.get(reclaimer_job.queue) if reclaimer_job else None
        if reclaimer_attr is None:
            return [], REJECT
        level = self.ancestor_reclaim_level if self.hierarchy else 0
        wanted = _names(reclaimer.init_resreq) or _names(reclaimer.resreq)
        allocations: dict[str, Resource] = {}
        victims: list[TaskInfo] = []
        for task in candidates:
            job = ssn.jobs.get(task.job_id)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None:
                continue
            queue = ssn.queues.get(attr.name)
            if queue is not None and not queue.reclaimable:
                continue
            if not (_names(task.resreq) & wanted):
                continue  # it holds nothing the reclaimer needs
            allocated = allocations.setdefault(attr.name, attr.allocated.clone())
            if not guarantee_kept(allocated, task.resreq, attr.guarantee):
                continue
            if not has_relevant_deserved(task.resreq, attr.deserved):
                if (
                    level
                    and self._shares_near_ancestor(reclaimer_attr, attr)
                    and not has_relevant_deserved(reclaimer.resreq, reclaimer_attr.deserved)
                ):
                    continue  # neither side deserves anything here: no real contention
            elif not exceeds_deserved(allocated, attr.deserved, task.resreq):
                continue
            ancestors: list[Resource] = []
            eligible = True
            for depth in range(1, level + 1):
                ancestor = self._ancestor_to_check(reclaimer_attr, attr, depth)
                if ancestor is None:
                    continue
                held = allocations.setdefault(ancestor.name, ancestor.allocated.clone())
                ancestors.append(held)
                if not has_relevant_deserved(task.resreq, ancestor.deserved):
                    continue
                if not exceeds_deserved(held, ancestor.deserved, task.resreq):
                    eligible = False
                    break
            if not eligible:
                continue
            allocated.sub(task.resreq)
            for held in ancestors:
                held.sub(task.resreq)
            victims.append(task)
        return victims, PERMIT

    # -- event handlers ---------------------------------------------------------------------------

    def _attr_of(self, task: TaskInfo) -> QueueAttr | None:
        job = self.ssn.jobs.get(task.job_id)
        return self.attrs.get(job.queue) if job is not None else None

    def _on_allocate(self, task: TaskInfo) -> None:
        attr = self._attr_of(task)
        if attr is None:
            return
        for name in self._chain(attr):
            target = self.attrs[name]
            target.allocated.add(task.resreq)
            target.update_share()

    def _on_deallocate(self, task: TaskInfo) -> None:
        attr = self._attr_of(task)
        if attr is None:
            return
        for name in self._chain(attr):
            target = self.attrs[name]
            target.allocated.sub(task.resreq)
            target.update_share()

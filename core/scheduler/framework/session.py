"""One scheduling cycle: plugins' callbacks, their combination rules, and session state.

The combination rules are those of Volcano's scheduler framework: order functions take the
first non-zero verdict across tiers; predicates must all pass; scores add up; ``jobPipelined``
and ``jobEnqueueable`` vote Permit/Abstain/Reject; ``jobStarving`` is decided by the first tier
that has an opinion. The session itself does no I/O: what it decides (bindings, evictions,
status changes, events) is collected and written by the caller.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.closing import CloseSet
from stromboli.core.scheduler.framework.conditions import PodGroupConditionUpdate
from stromboli.core.scheduler.framework.filters import Filter, FitErrors
from stromboli.core.scheduler.framework.options import PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.outcome import SessionOutcome
from stromboli.core.scheduler.framework.plugin import PLUGINS, Plugin
from stromboli.core.scheduler.framework.points import (
    ABSTAIN,
    PERMIT,
    REJECT,
    Callback,
    ExtensionPoint,
    VictimFilter,
    check_callback,
    extension_point,
)
from stromboli.core.scheduler.framework.snapshot import Snapshot
from stromboli.core.scheduler.framework.statement import Statement

P = ExtensionPoint

__all__ = [
    "ABSTAIN",
    "PERMIT",
    "REJECT",
    "EventHandler",
    "ExtensionPoint",
    "Session",
    "VictimFilter",
]


@dataclass(slots=True)
class EventHandler:
    """Called when a task is allocated (or pipelined) and when that is undone."""

    allocate: Callable[[TaskInfo], None] | None = None
    deallocate: Callable[[TaskInfo], None] | None = None


class Session:
    """State and callbacks of one cycle."""

    def __init__(
        self,
        snapshot: Snapshot,
        config: SchedulerConfig,
        now: datetime,
        uid: str | None = None,
    ) -> None:
        self.uid = uid or str(uuid.uuid4())
        self.now = now
        self.config = config
        self.jobs: dict[str, JobInfo] = snapshot.jobs
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.nodes: NodeTable = snapshot.nodes
        self.snapshot = snapshot
        self.priority_classes = snapshot.priority_classes
        self.total_resource: Resource = self.nodes.total_allocatable()
        self.tiers: list[list[PluginOption]] = config.tiers
        self.plugins: dict[str, Plugin] = {}
        self._callbacks: dict[ExtensionPoint, dict[str, Callback]] = {}
        self._chains: dict[ExtensionPoint, list[list[Callable[..., Any]]]] = {}
        self._flats: dict[ExtensionPoint, list[Callable[..., Any]]] = {}
        #: Per request vector: which nodes it fits (later and now), kept by util/placement.
        self.fit_cache: dict[tuple[bytes, bool], Any] = {}
        #: Per task score shape: node-order scores of every node and the node versions they saw.
        self._score_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        #: The read-only mask of a predicate verdict that fails no node (see ``predicate``).
        self._all_pass: np.ndarray | None = None
        self.event_handlers: list[EventHandler] = []
        self.outcome = SessionOutcome()
        #: Plugin timings of this session in seconds, by (plugin, "OnSessionOpen"/"OnSessionClose").
        self.plugin_seconds: dict[tuple[str, str], float] = {}
        #: Per-job messages for the PodGroup ``Unschedulable`` event, by job uid.
        self.unschedulable_events: dict[str, str] = {}
        #: Job-level events emitted by plugins: (job uid, type, reason, message).
        self.job_events: list[tuple[str, str, str, str]] = []
        #: Where the next feasible-node search starts (see ``util.placement.sample``).
        self.next_start_node = 0
        #: Jobs whose PodGroup this session promoted to Inqueue.
        self.enqueued: set[str] = set()
        #: Condition each job's PodGroup should carry after this session (set by gang).
        self.podgroup_conditions: dict[str, PodGroupConditionUpdate] = {}
        #: The jobs the close looks at (see ``framework/closing.py``); None: every job.
        self.closing: CloseSet | None = None
        #: Per-queue figures plugins publish for status, metrics and reports.
        self.queue_figures: dict[str, dict[str, Resource | float]] = {}
        #: Per-queue accounting of a queue plugin (capacity, proportion), by plugin name: queue
        #: name → an object with ``allocated``, ``request``, ``deserved``, ``capability``,
        #: ``real_capability``, ``inqueue`` and ``share`` (what metrics export).
        self.queue_accounts: dict[str, Mapping[str, object]] = {}
        #: Eviction figures for metrics: ``preemption_attempts`` (nodes tried by preempt),
        #: ``preemption_victims`` (victims offered on the last node tried), and
        #: ``transactions/<action>`` (committed statements that evicted something).
        self.eviction_figures: dict[str, int] = {}

    # -- plugin lifecycle -------------------------------------------------------------------

    def open(self) -> None:
        for tier in self.tiers:
            for option in tier:
                plugin = PLUGINS[option.name](option.arguments)
                plugin.option = option
                self.plugins[option.name] = plugin
                started = time.perf_counter()
                plugin.on_session_open(self)
                self.plugin_seconds[(option.name, "OnSessionOpen")] = time.perf_counter() - started
        self._chains.clear()
        self._flats.clear()

    def close(self) -> None:
        for name, plugin in self.plugins.items():
            started = time.perf_counter()
            plugin.on_session_close(self)
            self.plugin_seconds[(name, "OnSessionClose")] = time.perf_counter() - started

    # -- registration -------------------------------------------------------------------------

    def register(self, point: ExtensionPoint | str, plugin: str, fn: Callback) -> None:
        """Register ``fn`` as ``plugin``'s callback on extension ``point``.

        An unknown point, or a callback that cannot take the point's arguments (see
        ``framework/points.py``), is an :class:`ExtensionPointError` naming plugin and point.
        """
        known = extension_point(point, plugin)
        check_callback(known, plugin, fn)
        self._callbacks.setdefault(known, {})[plugin] = fn
        self._chains.pop(known, None)
        self._flats.pop(known, None)

    def callbacks(self, point: ExtensionPoint | str) -> list[tuple[str, Callback]]:
        """(plugin, callback) of every enabled callback on ``point``, in configuration order."""
        try:
            known = ExtensionPoint(point)
        except ValueError:
            return []  # nothing is ever registered on an unknown point
        registered = self._callbacks.get(known, {})
        return [
            (option.name, registered[option.name])
            for tier in self.tiers
            for option in tier
            if option.name in registered and option.enabled(point)
        ]

    def add_event_handler(self, handler: EventHandler) -> None:
        self.event_handlers.append(handler)

    def chain(
        self, point: ExtensionPoint, without: frozenset[str] = frozenset()
    ) -> list[list[Callable[..., Any]]]:
        """Enabled callbacks of ``point``, grouped by tier, in configuration order; the
        plugins named in ``without`` left out (only the full chain is cached).

        These are the callbacks the session calls. A :class:`VictimFilter` is not one of them
        (it is only accepted on ``victim_tasks``, whose dispatch reads :meth:`_tiers`).
        """
        cached = self._chains.get(point) if not without else None
        if cached is not None:
            return cached
        tiers = [
            [fn for fn in tier if not isinstance(fn, VictimFilter)]
            for tier in self._tiers(point, without)
        ]
        if not without:
            self._chains[point] = tiers
        return tiers

    def _tiers(self, point: ExtensionPoint, without: frozenset[str]) -> list[list[Callback]]:
        """Every enabled registration on ``point`` by tier, the plugins in ``without`` left out."""
        registered = self._callbacks.get(point, {})
        return [
            [
                registered[o.name]
                for o in tier
                if o.name in registered and o.enabled(point) and o.name not in without
            ]
            for tier in self.tiers
        ]

    def enabled(self, point: ExtensionPoint, plugin: str) -> bool:
        """Whether ``plugin`` registered a callback on ``point`` and its switch is on."""
        if plugin not in self._callbacks.get(point, {}):
            return False
        return any(o.name == plugin and o.enabled(point) for tier in self.tiers for o in tier)

    def _flat(self, point: ExtensionPoint) -> list[Callable[..., Any]]:
        """Enabled callbacks of ``point`` in order, tiers flattened (cached)."""
        flat = self._flats.get(point)
        if flat is None:
            flat = self._flats[point] = [fn for tier in self.chain(point) for fn in tier]
        return flat

    # -- ordering -------------------------------------------------------------------------------

    def _compare(self, point: ExtensionPoint, left: Any, right: Any) -> int:
        for fn in self._flat(point):
            verdict = fn(left, right)
            if verdict:
                return verdict
        return 0

    def job_compare(self, left: JobInfo, right: JobInfo) -> int:
        verdict = self._compare(P.JOB_ORDER, left, right)
        if verdict:
            return verdict
        return _fallback(left.creation, right.creation, left.uid, right.uid)

    def queue_compare(self, left: QueueInfo, right: QueueInfo) -> int:
        verdict = self._compare(P.QUEUE_ORDER, left, right)
        if verdict:
            return verdict
        return _fallback(left.creation, right.creation, left.uid, right.uid)

    def task_compare(self, left: TaskInfo, right: TaskInfo) -> int:
        verdict = self._compare(P.TASK_ORDER, left, right)
        if verdict:
            return verdict
        if left.index != right.index:
            return -1 if left.index < right.index else 1
        return _fallback(left.creation, right.creation, left.uid, right.uid)

    def job_less(self, left: JobInfo, right: JobInfo) -> bool:
        return self.job_compare(left, right) < 0

    def queue_less(self, left: QueueInfo, right: QueueInfo) -> bool:
        return self.queue_compare(left, right) < 0

    def task_less(self, left: TaskInfo, right: TaskInfo) -> bool:
        return self.task_compare(left, right) < 0

    def sorted_tasks(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        return sorted(tasks, key=functools.cmp_to_key(self.task_compare))

    # -- job verdicts ---------------------------------------------------------------------------

    def job_valid(self, job: JobInfo) -> tuple[str, str] | None:
        """The first plugin objection (reason, message), or None when the job is valid."""
        for fn in self._flat(P.JOB_VALID):
            result = fn(job)
            if result is not None:
                return result
        return None

    def _all(self, point: ExtensionPoint, *args: Any) -> bool:
        for fn in self._flat(point):  # noqa: SIM110 - a plain loop: asked once per task placed
            if not fn(*args):
                return False
        return True

    def job_ready(self, job: JobInfo) -> bool:
        return self._all(P.JOB_READY, job)

    def _vote(self, point: ExtensionPoint, *args: Any) -> bool:
        for tier in self.chain(point):
            permitted = False
            for fn in tier:
                vote = fn(*args)
                if vote < 0:
                    return False
                if vote > 0:
                    permitted = True
            if permitted:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote(P.JOB_PIPELINED, job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote(P.JOB_ENQUEUEABLE, job)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self._flat(P.JOB_ENQUEUED):
            fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self.chain(P.JOB_STARVING):
            if tier:
                return all(fn(job) for fn in tier)
        return False

    # -- queue verdicts -------------------------------------------------------------------------

    def overused(self, queue: QueueInfo) -> bool:
        return any(fn(queue) for fn in self._flat(P.OVERUSED))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self._all(P.ALLOCATABLE, queue, task)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self._all(P.PREEMPTIVE, queue, task)

    # -- nodes ------------------------------------------------------------------------------------

    def pre_predicate(self, task: TaskInfo) -> str | None:
        """First objection of a pre-predicate, or None."""
        for fn in self._flat(P.PRE_PREDICATE):
            error = fn(task)
            if error:
                return error
        return None

    def predicate(self, task: TaskInfo) -> Filter:
        """All plugin predicates for ``task`` over every node, combined.

        A result without reasons passes every node (a ``Filter`` only loses nodes through
        ``fail``) and adds nothing; when no predicate fails a node, which is most calls, the
        answer shares one read-only all-pass mask instead of allocating one per task.
        """
        combined: Filter | None = None
        for fn in self._flat(P.PREDICATE):
            result: Filter = fn(task)
            if not result.reasons:
                continue
            if combined is None:
                combined = Filter.all_pass(len(self.nodes))
            for mask, reason, unresolvable in result.reasons:
                combined.fail(mask & combined.passed, reason, unresolvable)
        if combined is not None:
            return combined
        everywhere = self._all_pass
        if everywhere is None or everywhere.shape[0] != len(self.nodes):
            everywhere = self._all_pass = np.ones(len(self.nodes), dtype=bool)
            everywhere.flags.writeable = False
        return Filter(everywhere)

    def node_scores(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        """Summed node-order and batch-node-order scores for the candidate ``positions``.

        A node-order score depends only on the task's shape and that one node (Volcano calls
        it per node), so it is kept per shape and recomputed only for nodes whose use changed
        since; batch scores may compare nodes with each other and are always computed fresh.
        """
        positions = np.asarray(positions, dtype=np.intp)
        total = np.zeros(positions.shape[0])
        per_node = self._flat(P.NODE_ORDER)
        if per_node:
            versions = self.nodes.versions
            key = task.score_shape or task.shape
            cached = self._score_cache.get(key)
            if cached is None:
                count = len(self.nodes)
                cached = (np.zeros(count), np.full(count, -1, dtype=np.int64))
                self._score_cache[key] = cached
            scores, seen = cached
            stale = positions[seen[positions] != versions[positions]]
            if stale.shape[0]:
                if len(per_node) == 1:
                    scores[stale] = per_node[0](task, stale)
                else:
                    fresh = np.zeros(stale.shape[0])
                    for fn in per_node:
                        fresh += fn(task, stale)
                    scores[stale] = fresh
                seen[stale] = versions[stale]
            total += scores[positions]
        for fn in self._flat(P.BATCH_NODE_ORDER):
            total += fn(task, positions)
        return total

    def best_node(self, task: TaskInfo, positions: np.ndarray, scores: np.ndarray) -> int | None:
        """A plugin's choice among the scored candidate ``positions``: the first callback that
        names one of them decides; None leaves the choice to the highest score."""
        for fn in self._flat(P.BEST_NODE):
            chosen = fn(task, positions, scores)
            if chosen is not None:
                chosen = int(chosen)
                if chosen not in positions:
                    raise ValueError(
                        f"best_node: a plugin chose node position {chosen}, which is not one "
                        f"of the {positions.shape[0]} candidates of task {task.uid}"
                    )
                return chosen
        return None

    def hyper_node_score(self, job: JobInfo, hypernode: str, positions: np.ndarray) -> float:
        """Summed ``hyper_node_order`` scores of the job's trial placement in ``hypernode``
        (``positions``: rows of its nodes); 0 when no plugin scores HyperNodes."""
        return float(sum(fn(job, hypernode, positions) for fn in self._flat(P.HYPER_NODE_ORDER)))

    def has_best_node(self) -> bool:
        return bool(self._flat(P.BEST_NODE))

    def has_scorers(self) -> bool:
        return bool(self._flat(P.NODE_ORDER)) or bool(self._flat(P.BATCH_NODE_ORDER))

    # -- state changes outside statements ---------------------------------------------------------

    def fire_allocate(self, task: TaskInfo) -> None:
        for handler in self.event_handlers:
            if handler.allocate:
                handler.allocate(task)

    def fire_deallocate(self, task: TaskInfo) -> None:
        for handler in self.event_handlers:
            if handler.deallocate:
                handler.deallocate(task)

    def allocate(self, task: TaskInfo, node_name: str) -> None:
        """Allocate outside a statement (backfill); dispatches the job once it is ready."""
        job = self.jobs[task.job_id]
        job.update_status(task, TaskStatus.ALLOCATED)
        task.node_name = node_name
        self.nodes.add_task(node_name, task)
        self.fire_allocate(task)
        if self.job_ready(job):
            for allocated in job.tasks_with(TaskStatus.ALLOCATED):
                self.dispatch(allocated)

    def dispatch(self, task: TaskInfo) -> None:
        """Hand an allocated task to the binder."""
        self.jobs[task.job_id].update_status(task, TaskStatus.BINDING)
        self.outcome.binds.append((task, task.node_name))

    def record_fit_error(self, job: JobInfo, task: TaskInfo, errors: FitErrors | str) -> None:
        job.fit_errors[task.uid] = errors if isinstance(errors, str) else errors.message()

    def statement(self) -> Statement:
        return Statement(self)

    # -- victims ----------------------------------------------------------------------------------

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Which of ``candidates`` the plugins let ``preemptor`` evict (same-queue preemption)."""
        return self._victims(P.PREEMPTABLE, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Which of ``candidates`` the plugins let ``reclaimer`` take back across queues."""
        return self._victims(P.RECLAIMABLE, reclaimer, candidates)

    def victims_without(
        self,
        point: ExtensionPoint,
        evictor: TaskInfo,
        candidates: list[TaskInfo],
        without: frozenset[str],
    ) -> list[TaskInfo]:
        """The verdict of ``point`` (``preemptable``/``reclaimable``) with the plugins named in
        ``without`` not voting: the gang-aware actions decide gang minima themselves."""
        return self._victims(point, evictor, candidates, without)

    def _victims(
        self,
        point: ExtensionPoint,
        evictor: TaskInfo,
        candidates: list[TaskInfo],
        without: frozenset[str] = frozenset(),
    ) -> list[TaskInfo]:
        """Volcano's victim combination: within a tier the plugins that vote intersect their
        answers and one empty answer leaves the tier with none; the first tier left with victims
        decides; abstaining plugins are skipped.

        An intersection that comes out empty also ends its tier with none. (Volcano's loop
        reads such an empty intersection as "nobody voted yet" and lets the next plugin of the
        tier start afresh, undoing the filters before it; that is a known bug, not copied.)
        """
        if not candidates:
            return []
        for tier in self.chain(point, without):
            victims: list[TaskInfo] | None = None
            for fn in tier:
                chosen, vote = fn(evictor, candidates)
                if vote == ABSTAIN:
                    continue
                if not chosen:
                    victims = None
                    break
                if victims is None:
                    victims = list(chosen)
                    continue
                keep = {task.uid for task in chosen}
                victims = [task for task in victims if task.uid in keep]
                if not victims:
                    victims = None
                    break
            if victims:
                return victims
        return []

    def victims_possible(
        self, point: ExtensionPoint, evictor: TaskInfo, candidates: list[TaskInfo]
    ) -> bool:
        """False when no part of ``candidates`` can yield victims on ``point``: every tier
        has no voting plugin or one that refuses the whole set.

        Lets an action skip asking node by node. It relies on what every victim callback
        does: one that refuses a whole set of candidates also refuses each part of it (a
        refusal is never reversed by taking candidates away).
        """
        for tier in self.chain(point):
            voted = refused = False
            for fn in tier:
                chosen, vote = fn(evictor, candidates)
                if vote == ABSTAIN:
                    continue
                voted = True
                if not chosen:
                    refused = True
                    break
            if voted and not refused:
                return True
        return False

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """Tasks the plugins want evicted (the ``shuffle`` action's victims).

        Nominations are united within a tier and the first tier that nominates anything
        decides, as in Volcano's framework. Callbacks registered wrapped in
        :class:`VictimFilter` do not nominate: they may only remove nominated tasks (``pdb``
        keeps disruption budgets), in every tier, after the nominations are known.
        """
        nominated: dict[str, TaskInfo] = {}
        filters: list[VictimFilter] = []
        decided = False
        for tier in self._tiers(P.VICTIM_TASKS, frozenset()):
            for fn in tier:
                if isinstance(fn, VictimFilter):
                    filters.append(fn)
                elif not decided:
                    for task in fn(tasks):
                        nominated.setdefault(task.uid, task)
            decided = decided or bool(nominated)
        victims = list(nominated.values())
        for victim_filter in filters:
            if not victims:
                break
            victims = victim_filter.fn(victims)
        return victims

    def victim_queue_compare(
        self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo | None
    ) -> int:
        """Which of two victims' queues gives up resources first: the first plugin verdict
        (``victim_queue_order`` callbacks take the preemptor's queue too), else the reverse of
        the queue order."""
        for fn in self._flat(P.VICTIM_QUEUE_ORDER):
            verdict = fn(left, right, preemptor)
            if verdict:
                return verdict
        return -self.queue_compare(left, right)


def _fallback(left_time: str, right_time: str, left_uid: str, right_uid: str) -> int:
    if left_time != right_time:
        return -1 if left_time < right_time else 1
    if left_uid != right_uid:
        return -1 if left_uid < right_uid else 1
    return 0

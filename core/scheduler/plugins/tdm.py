"""tdm: time-division multiplexing of revocable nodes.

Nodes labelled ``volcano.sh/revocable-zone: <zone>`` belong to a revocable zone, lent to batch
work only during the zone's daily window, given by the argument
``tdm.revocable-zone.<zone>: "HH:MM-HH:MM"`` (a window whose end is not after its start runs
past midnight). During the window the zone's nodes take only tasks that may be revoked: pods
annotated ``volcano.sh/revocable-zone: "*"``, or, without that annotation, annotated
``volcano.sh/preemptable: "true"``; such tasks score the maximum (100) there, so they go to
revocable nodes first. Outside the window, or for a zone without a window, nobody may use the
zone's nodes, and the ``shuffle`` action evicts preemptable running tasks from them, at most
once per ``tdm.evict.period`` (default 1m) and within each job's disruption budget
(``volcano.sh/jdb-min-available`` or ``volcano.sh/jdb-max-unavailable`` on the PodGroup,
else one pod per job per round; a job already at or below its minimum loses none, where
Volcano would still take one).

Non-preemptable jobs are ordered first and are starving while they have pending tasks;
preemptable jobs never preempt. Windows are read in the session clock's zone (UTC).

Scores depend on the pod's annotations, not just its shape, so they are registered as batch
scores, which the session never shares between tasks.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import ClassVar

import numpy as np

from stromboli.core.api import constants as k
from stromboli.core.api.durations import go_duration
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.pod import parse_bool
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session

log = logging.getLogger(__name__)

ZONE_PREFIX = "tdm.revocable-zone."
EVICT_PERIOD = "tdm.evict.period"
DEFAULT_EVICT_PERIOD = timedelta(minutes=1)
MAX_NODE_SCORE = 100.0
NOT_ALLOWED = "not allow to dispatch to revocable node"
DEFAULT_EVICT_NUM = 1


@dataclass(frozen=True, slots=True)
class Window:
    """A daily window ``HH:MM-HH:MM``; it crosses midnight when the end is not after the
    start."""

    start: time
    end: time
    text: str

    @classmethod
    def parse(cls, text: str) -> Window:
        parts = str(text).strip().split("-")
        if len(parts) != 2:
            raise ValueError(f"revocable zone window {text!r} must look like HH:MM-HH:MM")
        try:
            start, end = (datetime.strptime(p.strip(), "%H:%M").time() for p in parts)
        except ValueError:
            raise ValueError(f"revocable zone window {text!r} must look like HH:MM-HH:MM") from None
        return cls(start, end, str(text))

    def active(self, now: datetime) -> bool:
        """Whether ``now`` falls in today's window or in one that began yesterday and runs
        past midnight (bounds included, to the minute)."""
        for day in (now.date(), now.date() - timedelta(days=1)):
            opens = datetime.combine(day, self.start, now.tzinfo)
            closes = datetime.combine(day, self.end, now.tzinfo)
            if self.end <= self.start:
                closes += timedelta(days=1)
            if opens <= now <= closes:
                return True
        return False


def task_revocable_zone(task: TaskInfo) -> str:
    """``*`` when the pod may run on revocable nodes, else empty."""
    annotations = (task.pod.get("metadata") or {}).get("annotations") or {}
    if k.REVOCABLE_ZONE_KEY in annotations:
        return "*" if annotations[k.REVOCABLE_ZONE_KEY] == "*" else ""
    if parse_bool(annotations.get(k.PREEMPTABLE_KEY), False):
        return "*"
    return ""


def budget_evictions(job: JobInfo) -> int:
    """How many running pods of the job may go in one round, from its disruption budget."""
    annotations = (job.podgroup.get("metadata") or {}).get("annotations") or {}
    total = len(job.tasks)
    running = job.count(TaskStatus.RUNNING)
    max_unavailable = annotations.get(k.JDB_MAX_UNAVAILABLE_KEY)
    min_available = annotations.get(k.JDB_MIN_AVAILABLE_KEY)
    if min_available is not None:
        return max(running - int_or_percent(min_available, total), 0)
    if max_unavailable is not None:
        allowed = int_or_percent(max_unavailable, total)
        finished = job.count(TaskStatus.SUCCEEDED | TaskStatus.FAILED)
        unavailable = total - finished - running
        return max(allowed - unavailable, 0)
    return DEFAULT_EVICT_NUM


def int_or_percent(value: object, total: int) -> int:
    """An integer, or a percentage of ``total`` rounded up; unreadable values count 0."""
    text = str(value).strip()
    try:
        if text.endswith("%"):
            return math.ceil(int(text[:-1]) * total / 100)
        return int(text)
    except ValueError:
        log.warning("tdm: disruption budget %r is neither an integer nor a percentage", value)
        return 0


class TdmPlugin(Plugin):
    name = "tdm"
    known_arguments: ClassVar[dict[str, object]] = {EVICT_PERIOD: "1m"}
    argument_prefixes: ClassVar[tuple[str, ...]] = (ZONE_PREFIX,)
    #: When victims were last chosen; kept across sessions (plugins are made per session).
    last_evict_at: ClassVar[datetime | None] = None

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.windows: dict[str, Window] = {}
        for key, value in self.arguments.values.items():
            if key.startswith(ZONE_PREFIX):
                zone = key[len(ZONE_PREFIX) :]
                try:
                    self.windows[zone] = Window.parse(str(value))
                except ValueError as err:
                    log.error("tdm: %s: %s", key, err)
        self.evict_period = DEFAULT_EVICT_PERIOD
        if EVICT_PERIOD in self.arguments:
            try:
                self.evict_period = go_duration(str(self.arguments.get(EVICT_PERIOD)))
            except ValueError as err:
                log.error("tdm: %s: %s; using 1m", EVICT_PERIOD, err)
        now = ssn.now
        self.zones = [node.labels.get(k.REVOCABLE_ZONE_KEY) or "" for node in ssn.nodes.nodes]
        self.revocable = np.array([bool(z) for z in self.zones], dtype=bool)
        # Per zone node mask and, for nodes of closed zones, the reason.
        self.closed = np.zeros(len(self.zones), dtype=bool)
        self.closed_reasons: list[tuple[np.ndarray, str]] = []
        for zone in sorted({z for z in self.zones if z}):
            mask = np.array([z == zone for z in self.zones], dtype=bool)
            window = self.windows.get(zone)
            if window is None:
                reason = f"revocable zone {zone} not support"
            elif not window.active(now):
                reason = f"current time beyond revocable zone {zone}:{window.text}"
            else:
                continue
            self.closed |= mask
            self.closed_reasons.append((mask, reason))
        self.open = self.revocable & ~self.closed
        ssn.register(ExtensionPoint.PREDICATE, self.name, self.predicate)
        ssn.register(ExtensionPoint.BATCH_NODE_ORDER, self.name, self.node_order)
        ssn.register(ExtensionPoint.PREEMPTABLE, self.name, self.preemptable)
        ssn.register(ExtensionPoint.VICTIM_TASKS, self.name, self.victim_tasks)
        ssn.register(ExtensionPoint.JOB_ORDER, self.name, self.job_order)
        ssn.register(ExtensionPoint.JOB_PIPELINED, self.name, self.job_pipelined)
        ssn.register(ExtensionPoint.JOB_STARVING, self.name, self.job_starving)

    def zone_active(self, zone: str) -> bool:
        window = self.windows.get(zone)
        return window is not None and window.active(self.ssn.now)

    def predicate(self, task: TaskInfo) -> Filter:
        result = Filter.all_pass(len(self.zones))
        for mask, reason in self.closed_reasons:
            result.fail(mask, reason, True)
        if not task_revocable_zone(task):
            result.fail(self.open, NOT_ALLOWED, True)
        return result

    def node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        if not task_revocable_zone(task):
            return np.zeros(positions.shape[0])
        return np.where(self.open[positions], MAX_NODE_SCORE, 0.0)

    def _on_revocable_node(self, task: TaskInfo) -> bool:
        position = self.ssn.nodes.position.get(task.node_name)
        return position is not None and bool(self.revocable[position])

    def preemptable(
        self, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        """Work that may be revoked does not preempt; others may take preemptable running
        tasks off ordinary nodes, within each job's budget."""
        if preemptor.preemptable or task_revocable_zone(preemptor):
            return [], REJECT
        by_job: dict[str, list[TaskInfo]] = {}
        for task in candidates:
            if not task.preemptable or task.status != TaskStatus.RUNNING:
                continue
            if task.node_name not in self.ssn.nodes.position or self._on_revocable_node(task):
                continue
            by_job.setdefault(task.job_id, []).append(task)
        return self._within_budgets(by_job), PERMIT

    def _within_budgets(self, by_job: dict[str, list[TaskInfo]]) -> list[TaskInfo]:
        victims: list[TaskInfo] = []
        for job_id, tasks in by_job.items():
            job = self.ssn.jobs.get(job_id)
            if job is not None:
                victims.extend(tasks[: budget_evictions(job)])
        return victims

    def victim_tasks(self, _tasks: list[TaskInfo]) -> list[TaskInfo]:
        """Preemptable running tasks on nodes of zones whose window is closed, at most once
        per evict period."""
        now = self.ssn.now
        last = TdmPlugin.last_evict_at
        if last is not None and last <= now and last + self.evict_period > now:
            return []
        by_job: dict[str, list[TaskInfo]] = {}
        for zone in sorted(self.windows):
            if self.zone_active(zone):
                continue
            for position, node_zone in enumerate(self.zones):
                if node_zone != zone:
                    continue
                for task in self.ssn.nodes.nodes[position].tasks.values():
                    if task.preemptable and task.status == TaskStatus.RUNNING:
                        by_job.setdefault(task.job_id, []).append(task)
        TdmPlugin.last_evict_at = now
        return self._within_budgets(by_job)

    @staticmethod
    def job_order(left: JobInfo, right: JobInfo) -> int:
        """Jobs that may not be revoked first."""
        if left.preemptable == right.preemptable:
            return 0
        return 1 if left.preemptable else -1

    @staticmethod
    def job_pipelined(job: JobInfo) -> int:
        return PERMIT if job.is_pipelined() else REJECT

    @staticmethod
    def job_starving(job: JobInfo) -> bool:
        if job.preemptable:
            return False
        return bool(job.by_status.get(TaskStatus.PENDING))

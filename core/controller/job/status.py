"""The vcjob status as the controller computes it (the fields of Volcano's ``JobStatus``).

:class:`JobStatus` is a typed, mutable view of ``status`` that the state machine works on; it
reads and writes the wire shape, where (as with Go's ``omitempty``) zero counts and empty maps
are left out. Pod counting, the condition list and Go-style durations live here too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stromboli.core.api.constants import PodPhase

#: Pod phases the controller counts, and the status field each one is counted in.
COUNTED_PHASES: dict[str, str] = {
    PodPhase.PENDING: "pending",
    PodPhase.RUNNING: "running",
    PodPhase.SUCCEEDED: "succeeded",
    PodPhase.FAILED: "failed",
}


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(slots=True)
class JobStatus:
    """``status`` of a vcjob; ``phase`` ``""`` means the controller has not seen the job yet."""

    phase: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    min_available: int = 0
    task_status_count: dict[str, dict[str, int]] = field(default_factory=dict)
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    version: int = 0
    retry_count: int = 0
    running_duration: str = ""
    controlled_resources: dict[str, str] = field(default_factory=dict)
    conditions: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, status: Mapping[str, Any] | None) -> JobStatus:
        status = status if isinstance(status, Mapping) else {}
        raw_state = status.get("state")
        state: Mapping[str, Any] = raw_state if isinstance(raw_state, Mapping) else {}
        counts = status.get("taskStatusCount")
        task_counts: dict[str, dict[str, int]] = {}
        if isinstance(counts, Mapping):
            for task, entry in counts.items():
                phases = entry.get("phase") if isinstance(entry, Mapping) else None
                if isinstance(phases, Mapping):
                    task_counts[str(task)] = {str(p): _int(n) for p, n in phases.items()}
        resources = status.get("controlledResources")
        conditions = status.get("conditions")
        return cls(
            phase=str(state.get("phase") or ""),
            reason=str(state.get("reason") or ""),
            message=str(state.get("message") or ""),
            last_transition_time=str(state.get("lastTransitionTime") or ""),
            min_available=_int(status.get("minAvailable")),
            task_status_count=task_counts,
            pending=_int(status.get("pending")),
            running=_int(status.get("running")),
            succeeded=_int(status.get("succeeded")),
            failed=_int(status.get("failed")),
            terminating=_int(status.get("terminating")),
            unknown=_int(status.get("unknown")),
            version=_int(status.get("version")),
            retry_count=_int(status.get("retryCount")),
            running_duration=str(status.get("runningDuration") or ""),
            controlled_resources=(
                {str(k): str(v) for k, v in resources.items()}
                if isinstance(resources, Mapping)
                else {}
            ),
            conditions=(
                [dict(c) for c in conditions if isinstance(c, Mapping)]
                if isinstance(conditions, list)
                else []
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """The wire shape, leaving out zero counts and empty collections (Go's omitempty)."""
        state: dict[str, Any] = {}
        for key, value in (
            ("phase", self.phase),
            ("reason", self.reason),
            ("message", self.message),
            ("lastTransitionTime", self.last_transition_time),
        ):
            if value:
                state[key] = value
        out: dict[str, Any] = {}
        if state:
            out["state"] = state
        if self.min_available:
            out["minAvailable"] = self.min_available
        if self.task_status_count:
            out["taskStatusCount"] = {
                task: {"phase": dict(phases)} for task, phases in self.task_status_count.items()
            }
        for key in ("pending", "running", "succeeded", "failed", "terminating", "unknown"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.version:
            out["version"] = self.version
        if self.retry_count:
            out["retryCount"] = self.retry_count
        if self.running_duration:
            out["runningDuration"] = self.running_duration
        if self.controlled_resources:
            out["controlledResources"] = dict(self.controlled_resources)
        if self.conditions:
            out["conditions"] = copy.deepcopy(self.conditions)
        return out

    def copy(self) -> JobStatus:
        return JobStatus.from_dict(self.to_dict())

    @property
    def alive(self) -> int:
        """Pods that still hold (or are about to hold) resources."""
        return self.pending + self.running + self.terminating

    def set_counts(self, counts: PodCounts) -> None:
        """Replace the pod counts (not ``terminating``, which the caller decides)."""
        self.pending = counts.pending
        self.running = counts.running
        self.succeeded = counts.succeeded
        self.failed = counts.failed
        self.unknown = counts.unknown
        self.task_status_count = {t: dict(p) for t, p in counts.by_task.items()}

    def transition(self, now: str, created: str, seconds_since_created: float) -> None:
        """Record that the phase was (re)entered at ``now``: the time, the condition list and
        ``runningDuration`` (time from the job's creation to this transition)."""
        del created  # the caller computed the difference; kept for call-site clarity
        self.last_transition_time = now
        self.conditions = append_condition(self.conditions, self.phase, now)
        self.running_duration = go_duration(max(seconds_since_created, 0.0))


def append_condition(
    conditions: list[dict[str, str]], phase: str, now: str
) -> list[dict[str, str]]:
    """One condition per phase: re-entering a phase moves its entry to the end with a new time."""
    kept = [c for c in conditions if c.get("status") != phase]
    kept.append({"status": phase, "lastTransitionTime": now})
    return kept


@dataclass(slots=True)
class PodCounts:
    """Pods of a job by phase, overall and per task (``taskStatusCount``)."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    by_task: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, task: str | None, phase: str | None) -> None:
        known = phase or ""
        name = COUNTED_PHASES.get(known)
        bucket = known if name is not None else PodPhase.UNKNOWN
        if name is None:
            self.unknown += 1
        else:
            setattr(self, name, getattr(self, name) + 1)
        if task is not None:
            phases = self.by_task.setdefault(task, {})
            phases[bucket] = phases.get(bucket, 0) + 1


def count_pods(pods: Iterable[Mapping[str, Any]], task_key: str) -> PodCounts:
    """Count ``pods`` by phase; the task of a pod is its ``task_key`` annotation."""
    counts = PodCounts()
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        counts.add(annotations.get(task_key), (pod.get("status") or {}).get("phase"))
    return counts


def go_duration(seconds: float) -> str:
    """``seconds`` as Go's ``time.Duration.String()`` writes it (``0s``, ``1.5s``, ``1h2m3s``,
    ``250ms``), which is how ``metav1.Duration`` travels."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    nanos = round(abs(seconds) * 1e9)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _trim(nanos / size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    secs = _trim(rest / 1e9)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"

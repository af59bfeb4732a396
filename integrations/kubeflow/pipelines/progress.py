"""What a pipeline step says about the vcjob it follows: phase changes, why it waits, why it
failed, and the status it hands on as an artifact. Pure functions of API objects (dicts).

The job's ``status.conditions`` list every phase it entered, so the step reports each change
once, in order, even the short ones (Completing, Restarting) that fall between two reads. The
reasons a job waits are the scheduler's: the PodGroup's ``Unschedulable`` condition, its latest
``Unschedulable`` events and the pods' ``PodScheduled`` messages, the sentences ``stromboli
explain`` prints. A gang held at enqueue has no condition (as in Volcano): the scheduler's
refusal (``queue resource quota insufficient: insufficient cpu``) is only a Normal event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.logsafe import log_safe

#: Phases after which the job never changes again by itself.
FINISHED = frozenset({"Completed", "Failed", "Terminated"})
#: Phases in which the job waits for something outside it (the scheduler, a resume).
WAITING = frozenset({"", "Pending", "Aborted"})
#: Failed pods named in a failure message; the rest are counted.
FAILED_PODS_SHOWN = 3
#: Characters of one event message kept in the step's log (anyone may post events).
EVENT_MESSAGE_LIMIT = 500
#: Volcano's reason for both the enqueue refusal (Normal) and the gang warning (Warning).
UNSCHEDULABLE_REASON = "Unschedulable"
_OLDEST = datetime.min.replace(tzinfo=UTC)


def phase_of(job: Mapping[str, Any] | None) -> str:
    state = ((job or {}).get("status") or {}).get("state") or {}
    return str(state.get("phase") or "")


def job_key(job: Mapping[str, Any]) -> str:
    meta = job.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name') or meta.get('generateName', '')}"


def podgroup_name(job: Mapping[str, Any]) -> str:
    """The PodGroup the controller makes for the job (Volcano's ``<job>-<uid>``)."""
    meta = job.get("metadata") or {}
    return f"{meta.get('name', '')}-{meta.get('uid', '')}"


def counts(status: Mapping[str, Any]) -> str:
    """``running 2, succeeded 1`` from the job's pod counters (the non-zero ones)."""
    parts = [
        f"{name} {status[name]}"
        for name in ("pending", "running", "succeeded", "failed", "terminating", "unknown")
        if status.get(name)
    ]
    return ", ".join(parts)


class PhaseLog:
    """Turns successive reads of one job into one line per phase it entered."""

    def __init__(self) -> None:
        self._seen = 0
        self._phase = ""
        self._retries = 0

    def lines(self, job: Mapping[str, Any]) -> list[str]:
        status = job.get("status") or {}
        conditions = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
        phases = [str(c.get("status") or "") for c in conditions]
        if len(phases) < self._seen:  # a rewritten history (restored object): start over
            self._seen = 0
        entered = [p for p in phases[self._seen :] if p]
        self._seen = len(phases)
        current = phase_of(job)
        if not entered and current and current != self._phase:
            entered = [current]  # a status without conditions (an older controller)
        out: list[str] = []
        for i, phase in enumerate(entered):
            line = f"vcjob {job_key(job)}: {phase}"
            if i == len(entered) - 1:
                detail = counts(status)
                retries = int(status.get("retryCount") or 0)
                if retries > self._retries:
                    detail = ", ".join(filter(None, [detail, f"retry {retries}"]))
                    self._retries = retries
                if detail:
                    line += f" ({detail})"
            out.append(line)
        if current:
            self._phase = current
        return out


def _event_time(event: Mapping[str, Any]) -> datetime:
    for field in ("lastTimestamp", "eventTime", "firstTimestamp"):
        text = event.get(field)
        if isinstance(text, str) and text:
            try:
                when = datetime.fromisoformat(text)
            except ValueError:
                continue
            return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return _OLDEST


def _event_version(event: Mapping[str, Any]) -> int:
    meta = event.get("metadata")
    text = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return int(text) if isinstance(text, str) and text.isdigit() and len(text) < 40 else -1


def scheduler_events(
    events: Iterable[Any], components: Iterable[str], podgroup_uid: str = ""
) -> dict[str, str]:
    """The message of the latest ``Unschedulable`` event of each type (``Warning``,
    ``Normal``) that one of ``components`` (the scheduler's names) posted on the PodGroup.
    One per type, not the single latest: the scheduler posts both every cycle while a gang
    waits at enqueue, and the newest of the two alternates."""
    wanted = set(components)
    latest: dict[str, tuple[datetime, int, str]] = {}
    for event in events:
        if not isinstance(event, Mapping) or event.get("reason") != UNSCHEDULABLE_REASON:
            continue
        kind = event.get("type")
        message = event.get("message")
        if kind not in ("Warning", "Normal") or not isinstance(message, str) or not message:
            continue
        source = event.get("source") or {}
        component = event.get("reportingComponent") or (
            source.get("component") if isinstance(source, Mapping) else None
        )
        if component not in wanted:
            continue
        involved = event.get("involvedObject") or {}
        uid = involved.get("uid") if isinstance(involved, Mapping) else None
        if podgroup_uid and uid and uid != podgroup_uid:
            continue  # about an earlier PodGroup of that name
        order = (_event_time(event), _event_version(event), message)
        if kind not in latest or order[:2] > latest[kind][:2]:
            latest[kind] = order
    return {kind: log_safe(found[2], EVENT_MESSAGE_LIMIT) for kind, found in latest.items()}


def pending_reason(
    podgroup: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    events: Mapping[str, str] | None = None,
) -> str | None:
    """Why the job's pods are not running yet, in the scheduler's words; None if unknown.
    ``events``: :func:`scheduler_events` of the PodGroup; the Normal one (an enqueue refusal)
    counts only while the group is Pending, the stage it speaks of."""
    if podgroup is None:
        return None if pods else "waiting for the controller to create the job's PodGroup"
    status = podgroup.get("status") or {}
    events = events or {}
    phase = status.get("phase") or "Pending"
    refusal = events.get("Normal") if phase == "Pending" else None
    parts: list[str] = []
    for condition in status.get("conditions") or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == k.PodGroupConditionType.UNSCHEDULABLE
            and condition.get("status") == "True"
            and condition.get("message")
        ):
            parts.append(str(condition["message"]))
    warning = events.get("Warning")
    if warning and not any(warning in part or part in warning for part in parts):
        parts.append(warning)
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if (
                isinstance(condition, Mapping)
                and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("message")
            ):
                message = str(condition["message"])
                if not any(message in part for part in parts):
                    name = (pod.get("metadata") or {}).get("name", "")
                    parts.append(f"pod {name}: {message}")
                break
        if len(parts) >= 2:
            break
    if phase == "Pending" and (refusal or not parts):
        queue = (podgroup.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE
        held = f"PodGroup Pending: the scheduler has not admitted the gang into queue {queue}"
        parts.insert(0, f"{held}: {refusal}" if refusal else held)
    return "; ".join(parts) if parts else None


def failure_message(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
    """The job's own reason and message, and what its failed pods exited with."""
    status = job.get("status") or {}
    state = status.get("state") or {}
    parts = [phase_of(job) or "unknown phase"]
    said = ": ".join(str(state[key]) for key in ("reason", "message") if state.get(key))
    if said:
        parts[0] += f": {said}"
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    for pod in failed[:FAILED_PODS_SHOWN]:
        parts.append(f"pod {(pod.get('metadata') or {}).get('name', '')} {_exit(pod)}")
    if len(failed) > FAILED_PODS_SHOWN:
        parts.append(f"{len(failed) - FAILED_PODS_SHOWN} more pods failed")
    detail = counts(status)
    if detail:
        parts.append(detail)
    return "; ".join(parts)


def _exit(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or ():
        terminated = ((container or {}).get("state") or {}).get("terminated") or {}
        if terminated:
            code = terminated.get("exitCode")
            reason = terminated.get("reason") or ""
            text = f"exited with code {code}"
            return f"{text} ({reason})" if reason else text
    reason = status.get("reason") or status.get("message")
    return f"failed ({reason})" if reason else "failed"


def final_status(job: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact a step writes: the job's identity, its gang and queue, and its status."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    return {
        "apiVersion": job.get("apiVersion", k.BATCH_V1ALPHA1),
        "kind": job.get("kind", "Job"),
        "metadata": {
            key: meta[key]
            for key in ("name", "namespace", "uid", "creationTimestamp")
            if key in meta
        },
        "spec": {
            key: spec[key] for key in ("queue", "minAvailable", "schedulerName") if key in spec
        },
        "status": dict(job.get("status") or {}),
    }

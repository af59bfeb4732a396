"""What a pipeline step says about the vcjob it follows: phase changes, why it waits, why it
failed, and the status it hands on as an artifact. Pure functions of API objects (dicts).

The job's ``status.conditions`` list every phase it entered, so the step reports each change
once, in order, even the short ones (Completing, Restarting) that fall between two reads. The
reasons a job waits are the scheduler's: the PodGroup's ``Unschedulable`` condition and the
pods' ``PodScheduled`` messages, the sentences ``stromboli explain`` prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stromboli.core.api import constants as k

#: Phases after which the job never changes again by itself.
FINISHED = frozenset({"Completed", "Failed", "Terminated"})
#: Phases in which the job waits for something outside it (the scheduler, a resume).
WAITING = frozenset({"", "Pending", "Aborted"})
#: Failed pods named in a failure message; the rest are counted.
FAILED_PODS_SHOWN = 3


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


def pending_reason(
    podgroup: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why the job's pods are not running yet, in the scheduler's words; None if unknown."""
    if podgroup is None:
        return None if pods else "waiting for the controller to create the job's PodGroup"
    status = podgroup.get("status") or {}
    parts: list[str] = []
    for condition in status.get("conditions") or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == k.PodGroupConditionType.UNSCHEDULABLE
            and condition.get("status") == "True"
            and condition.get("message")
        ):
            parts.append(str(condition["message"]))
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
    if parts:
        return "; ".join(parts)
    phase = status.get("phase") or "Pending"
    if phase == "Pending":
        queue = (podgroup.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE
        return f"PodGroup Pending: the scheduler has not admitted the gang into queue {queue}"
    return None


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

"""From what happened to what to do: Volcano's lifecycle policies (event or exit code → action).

Changes to a job's pods and PodGroup become :class:`Request`\\ s carrying a bus event
(``PodFailed``, ``TaskCompleted``, ...); :func:`resolve` turns a request into an action by the
job's lifecycle policies — the pod's task's policies first, then the job's — possibly delayed
by the policy's ``timeout``. Pure functions over plain dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, Event, PodPhase
from stromboli.core.api.durations import parse_duration

INTERNAL_EVENTS = frozenset({Event.OUT_OF_SYNC, Event.COMMAND_ISSUED, Event.POD_RUNNING})
"""Events that never trigger a policy: they only ask for a sync."""
INTERNAL_ACTIONS = frozenset(
    {
        Action.SYNC_JOB,
        Action.ENQUEUE_JOB,
        Action.SYNC_QUEUE,
        Action.OPEN_QUEUE,
        Action.CLOSE_QUEUE,
    }
)
POD_EVENTS = frozenset({Event.POD_PENDING, Event.POD_RUNNING, Event.POD_FAILED, Event.POD_EVICTED})
DEFAULT_TASK_MAX_RETRY = 3
"""Container restarts of a task's pods that make a ``TaskFailed`` when the task sets none."""


@dataclass(frozen=True, slots=True)
class Request:
    """One reason to look at a job; equal requests queued together are handled once."""

    namespace: str
    job_name: str
    event: str = ""
    action: str = ""
    job_uid: str = ""
    task_name: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    partition_id: str = ""
    exit_code: int = 0
    job_version: int = 0

    @property
    def job_key(self) -> tuple[str, str]:
        return (self.namespace, self.job_name)

    @property
    def is_pod_event(self) -> bool:
        return self.event in POD_EVENTS


@dataclass(frozen=True, slots=True)
class Resolution:
    """The action a request asks for, with the pod it concerns (for targeted actions)."""

    action: str
    event: str = ""
    delay: float = 0.0
    task_name: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    partition_id: str = ""


class ActionScope(Enum):
    """What a delayed action is about, for cancelling the ones an executed action supersedes."""

    JOB = "job"
    TASK = "task"
    POD = "pod"
    PARTITION = "partition"


def action_scope(action: str) -> ActionScope:
    if action == Action.RESTART_TASK:
        return ActionScope.TASK
    if action == Action.RESTART_POD:
        return ActionScope.POD
    if action == Action.RESTART_PARTITION:
        return ActionScope.PARTITION
    return ActionScope.JOB


def supersedes(executed: Resolution, pending: Resolution) -> bool:
    """Whether executing ``executed`` cancels the delayed ``pending``: same scope, and for
    task/pod/partition scopes the same task/pod/partition."""
    scope = action_scope(executed.action)
    if action_scope(pending.action) != scope:
        return False
    if scope is ActionScope.TASK:
        return pending.task_name == executed.task_name
    if scope is ActionScope.POD:
        return pending.pod_name == executed.pod_name
    if scope is ActionScope.PARTITION:
        return pending.partition_id == executed.partition_id
    return True


def cancelled_by(pending: Resolution, request: Request) -> bool:
    """Whether a new pod event makes a delayed action for the same pod moot: any non-Pending
    event of the same pod cancels a PodPending timeout, and the pod running again cancels a
    PodFailed or PodEvicted one."""
    if not request.is_pod_event or request.event == Event.POD_PENDING:
        return False
    if pending.event == Event.POD_PENDING and request.pod_uid == pending.pod_uid:
        return True
    return pending.event in (Event.POD_FAILED, Event.POD_EVICTED) and (
        request.event == Event.POD_RUNNING
    )


def policy_events(policy: Mapping[str, Any]) -> list[str]:
    events = [str(e) for e in policy.get("events") or ()]
    if policy.get("event"):
        events.append(str(policy["event"]))
    return events


def policy_delay(policy: Mapping[str, Any]) -> float:
    timeout = policy.get("timeout")
    if timeout in (None, ""):
        return 0.0
    return parse_duration(timeout, "timeout")


def _match(policies: Iterable[Mapping[str, Any]], request: Request) -> Mapping[str, Any] | None:
    """The first policy that fires for the request's event or exit code.

    ``*`` matches any event; a ``PodPending`` event only fires policies that have a timeout
    (a pod is pending at first by nature). Exit codes match failed pods' first container.
    """
    for policy in policies:
        if not isinstance(policy, Mapping):
            continue
        events = policy_events(policy)
        if (
            events
            and request.event
            and (request.event in events or Event.ANY in events)
            and (request.event != Event.POD_PENDING or policy.get("timeout") is not None)
        ):
            return policy
        exit_code = policy.get("exitCode")
        if exit_code is not None and int(exit_code) == request.exit_code:
            return policy
    return None


def resolve(job: Mapping[str, Any], request: Request, status_version: int) -> Resolution:
    """The action for ``request`` on ``job`` (whose ``status.version`` is ``status_version``).

    An explicit action (a Command) wins. Internal events, requests about another job of the
    same name (uid mismatch) and requests from pods of an older job version only sync. Then
    the task's policies, then the job's; nothing matching means SyncJob.
    """
    sync = Resolution(
        action=Action.SYNC_JOB,
        event=request.event,
        task_name=request.task_name,
        pod_name=request.pod_name,
        pod_uid=request.pod_uid,
        partition_id=request.partition_id,
    )
    if request.action:
        return replace(sync, action=request.action)
    if request.event in INTERNAL_EVENTS:
        return sync
    meta = job.get("metadata") or {}
    if request.job_uid and meta.get("uid") and request.job_uid != meta["uid"]:
        return sync
    if request.job_version < status_version:
        return sync
    spec = job.get("spec") or {}
    matched = None
    if request.task_name:
        for task in spec.get("tasks") or ():
            if isinstance(task, Mapping) and task.get("name") == request.task_name:
                matched = _match(task.get("policies") or (), request)
                break
    if matched is None:
        matched = _match(spec.get("policies") or (), request)
    if matched is None or not matched.get("action"):
        return sync
    return replace(sync, action=str(matched["action"]), delay=policy_delay(matched))


# --- pod changes as events -----------------------------------------------------------------


def pod_phase(pod: Mapping[str, Any] | None) -> str:
    return str(((pod or {}).get("status") or {}).get("phase") or "")


def is_out_of_sync(pod: Mapping[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return k.CONTROLLER_OUT_OF_SYNC_KEY in annotations


def exit_code(pod: Mapping[str, Any]) -> int:
    """Exit code of the pod's first container (Volcano supports one container per pod)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    if not statuses:
        return 0
    terminated = ((statuses[0] or {}).get("state") or {}).get("terminated") or {}
    try:
        return int(terminated.get("exitCode") or 0)
    except (TypeError, ValueError):
        return 0


def restarts(pod: Mapping[str, Any]) -> int:
    status = pod.get("status") or {}
    total = 0
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or ():
            total += int((container or {}).get("restartCount") or 0)
    return total


def task_completed(task_pods: Iterable[Mapping[str, Any]], replicas: int) -> bool:
    """Every replica of the task has succeeded."""
    if replicas <= 0:
        return False
    succeeded = sum(1 for p in task_pods if pod_phase(p) == PodPhase.SUCCEEDED)
    return succeeded >= replicas


def task_failed(task_pods: Iterable[Mapping[str, Any]], replicas: int, max_retry: int) -> bool:
    """The task's live pods have restarted containers ``maxRetry`` times in total
    (``-1``: never; ``0``: the default 3)."""
    if replicas == 0 or max_retry == -1:
        return False
    limit = max_retry or DEFAULT_TASK_MAX_RETRY
    retried = sum(
        restarts(p) for p in task_pods if pod_phase(p) in (PodPhase.RUNNING, PodPhase.PENDING)
    )
    return retried >= limit


def pod_update_event(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    completed: Callable[[], bool],
    failed: Callable[[], bool],
) -> tuple[str, int]:
    """The event (and exit code) of a pod update; ``completed()``/``failed()`` tell whether
    the pod's task as a whole has completed / failed after this update (asked only when the
    answer matters)."""
    event: str = Event.OUT_OF_SYNC
    code = 0
    before, after = pod_phase(old), pod_phase(new)
    if after == PodPhase.FAILED:
        if before != PodPhase.FAILED:
            event, code = Event.POD_FAILED, exit_code(new)
    elif after == PodPhase.SUCCEEDED:
        if before != PodPhase.SUCCEEDED and completed():
            event = Event.TASK_COMPLETED
    elif after in (PodPhase.RUNNING, PodPhase.PENDING):
        if before != after:
            event = Event.POD_RUNNING if after == PodPhase.RUNNING else Event.POD_PENDING
        elif failed():
            event = Event.TASK_FAILED
    if is_out_of_sync(new):
        event = Event.OUT_OF_SYNC
    return event, code

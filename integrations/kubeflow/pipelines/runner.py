"""Submit a vcjob and follow it to its end: what the pipeline component runs.

The order is what keeps a bad step from leaving debris: the job is built and checked, the
cluster reached and the queue looked up *before* anything is created; once the job exists,
any way out of the step other than the job finishing (SIGTERM when the run is cancelled or
the pod's deadline passes, the step's own timeout, losing the API server) deletes it.
A job that finished is kept, with its pods, for its logs (``ttl_seconds_after_finished``
removes it later if asked).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from stromboli.core.api import constants as k
from stromboli.integrations.kubeflow.pipelines import progress
from stromboli.integrations.kubeflow.pipelines.cluster import (
    Cluster,
    TransportError,
    api_message,
    is_transient,
)
from stromboli.integrations.kubeflow.pipelines.errors import Cancelled, JobFailed, ParameterError
from stromboli.integrations.kubeflow.pipelines.spec import JobRequest, build_job

Log = Callable[[str], None]
#: Tries of the delete when the step stops (a SIGKILL follows SIGTERM after the grace period,
#: 30 s by default, so this stays short).
DELETE_TRIES = 3


@dataclass(frozen=True, slots=True)
class Follow:
    """How the step follows the job."""

    #: Seconds between two reads of the job (each read: one GET; three more while it waits).
    poll_seconds: float = 2.0
    #: Give up (and delete the job) after this many seconds; 0: wait as long as it takes.
    timeout_seconds: float = 0.0
    #: How long the API server may be unreachable before the step gives up (and deletes).
    api_patience_seconds: float = 120.0

    def __post_init__(self) -> None:
        if not 0.05 <= self.poll_seconds <= 3600:
            raise ParameterError("poll_seconds", f"expected 0.05 to 3600, got {self.poll_seconds}")
        if self.timeout_seconds < 0:
            raise ParameterError(
                "timeout_seconds", f"must not be negative, got {self.timeout_seconds}"
            )


class JobTimedOut(JobFailed):
    """The step's ``timeout_seconds`` passed before the job finished."""


def submit(cluster: Cluster, request: JobRequest, log: Log) -> dict[str, Any]:
    """Check everything, then create the job; returns it as stored (with name and uid)."""
    job = build_job(request)
    cluster.check_reachable()
    check_queue(cluster, job["spec"]["queue"], log)
    origin = "template" if request.template.strip() else "tasks"
    namespace = job["metadata"]["namespace"]
    try:
        with deferred() as held:  # a signal now would lose the job the server is creating
            created = cluster.create_job(job)
    except ApiException as error:
        message = api_message(error)
        if error.status == 409:
            raise ParameterError(
                "name", f"a vcjob {job['metadata'].get('name')} already exists in {namespace}"
            ) from None
        if error.status in (401, 403):
            raise ParameterError(
                "namespace",
                f"the step may not create vcjobs in {namespace} ({message}): give its service "
                "account create, get and delete on jobs.batch.volcano.sh",
            ) from None
        if error.status == 404:
            raise ParameterError("namespace", f"{namespace}: {message}") from None
        if error.status in (400, 422):
            raise ParameterError(origin, f"the API server refused the vcjob: {message}") from None
        raise JobFailed(progress.job_key(job), f"could not be created: {message}") from None
    except TransportError as error:
        raise JobFailed(progress.job_key(job), f"could not be created: {error}") from None
    spec = created.get("spec") or {}
    pods = sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or ())
    gang = spec.get("minAvailable") or pods
    log(
        f"vcjob {progress.job_key(created)} created in queue {spec.get('queue')}: "
        f"{len(spec.get('tasks') or ())} task(s), {pods} pod(s), gang of {gang}"
    )
    if held:
        raise CancelledAfterCreate(signal.Signals(held[0]).name, created)
    return created


def check_queue(cluster: Cluster, name: str, log: Log) -> None:
    """The queue must exist and be Open, as Volcano's webhook requires; a step that may not
    read queues (RBAC) goes on without the check and says so."""
    try:
        queue = cluster.get_queue(name)
    except ApiException as error:
        if error.status in (401, 403):
            log(f"queue {name} not checked: the step may not read Queues ({api_message(error)})")
            return
        if error.status != 404:
            raise ParameterError(
                "queue", f"cannot read Queue {name}: {api_message(error)}"
            ) from None
        raise ParameterError("queue", _missing_queue(cluster, name)) from None
    state = (queue.get("status") or {}).get("state")
    if state and state != k.QueueState.OPEN:
        raise ParameterError(
            "queue", f"Queue {name} is {state}: vcjobs are admitted only to Open queues"
        )


def _missing_queue(cluster: Cluster, name: str) -> str:
    try:
        names = cluster.queue_names()
    except ApiException as error:
        if error.status == 404:
            return (
                f"the cluster has no Queue API ({k.SCHEDULING_V1BETA1}): install Stromboli "
                "(or Volcano) before running this step"
            )
        names = []
    known = f"; its queues: {', '.join(names)}" if names else ""
    return f"Queue {name} does not exist on the cluster{known}"


def follow(
    cluster: Cluster,
    job: Mapping[str, Any],
    settings: Follow,
    log: Log,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_read: Callable[[dict[str, Any]], None] = lambda _job: None,
) -> dict[str, Any]:
    """Read the job every ``poll_seconds`` until it finishes; returns it finished.

    Logs each phase it enters and, while it waits, each new reason the scheduler gives (its
    PodGroup's condition and latest events, its pods' messages): a reason is logged when it
    changes, not at every read.
    Raises :class:`JobFailed` if it is deleted by someone else, :class:`JobTimedOut` when
    the step's timeout passes, and :class:`JobFailed` when the API stays away too long.
    """
    meta = job["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta.get("uid", "")
    key = f"{namespace}/{name}"
    phases = progress.PhaseLog()
    last_reason: str | None = None
    last_seen: Mapping[str, Any] = job
    started = clock()
    unreachable_since: float | None = None
    while True:
        try:
            current = cluster.get_job(namespace, name)
        except (ApiException, TransportError) as error:
            if isinstance(error, ApiException) and error.status == 404:
                raise JobFailed(
                    key, f"deleted before it finished (last phase {progress.phase_of(last_seen)})"
                ) from None
            if not is_transient(error):
                raise
            now = clock()
            if unreachable_since is None:
                unreachable_since = now
                log(f"vcjob {key}: cannot read it ({_short(error)}); trying again")
            elif now - unreachable_since > settings.api_patience_seconds:
                raise JobFailed(
                    key, f"the API server stayed unreachable for {settings.api_patience_seconds:g}s"
                ) from None
        else:
            unreachable_since = None
            if uid and current["metadata"].get("uid") != uid:
                raise JobFailed(key, "deleted and replaced by another job of the same name")
            last_seen = current
            on_read(current)
            for line in phases.lines(current):
                log(line)
            phase = progress.phase_of(current)
            if phase in progress.FINISHED:
                return current
            reason = _waiting_reason(cluster, current, phase)
            if reason is not None and reason != last_reason:
                log(f"vcjob {key}: waiting: {reason}")
            last_reason = reason
        if settings.timeout_seconds and clock() - started >= settings.timeout_seconds:
            raise JobTimedOut(
                key,
                f"not finished after timeout_seconds={settings.timeout_seconds:g} "
                f"(last phase {progress.phase_of(last_seen) or 'none'})",
            )
        sleep(settings.poll_seconds)


def _waiting_reason(cluster: Cluster, job: Mapping[str, Any], phase: str) -> str | None:
    if phase == "Aborted":
        return "suspended (Aborted); resume it with `vcctl job resume` or a Resume Command"
    if phase not in progress.WAITING and not (job.get("status") or {}).get("pending"):
        return None  # running with every pod placed: nothing to explain
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    group_name = progress.podgroup_name(job)
    try:
        podgroup = cluster.get_podgroup(namespace, group_name)
        pods = cluster.job_pods(namespace, name)
    except (ApiException, TransportError):
        return None  # only the reason is missing; the next read tries again
    events: dict[str, str] = {}
    if podgroup is not None:
        try:
            listed = cluster.podgroup_events(namespace, group_name)
        except (ApiException, TransportError):
            listed = []  # events not readable (RBAC, a busy server): the rest still says why
        scheduler = (job.get("spec") or {}).get("schedulerName") or k.DEFAULT_SCHEDULER_NAME
        uid = str((podgroup.get("metadata") or {}).get("uid") or "")
        events = progress.scheduler_events(listed, {scheduler, k.DEFAULT_SCHEDULER_NAME}, uid)
    return progress.pending_reason(podgroup, pods, events)


def delete_quietly(cluster: Cluster, job: Mapping[str, Any], why: str, log: Log) -> None:
    """Delete the job the step created, a few tries; reports what happened, raises nothing:
    this runs while the step is already on its way out."""
    meta = job["metadata"]
    key = f"{meta['namespace']}/{meta['name']}"
    for attempt in range(1, DELETE_TRIES + 1):
        try:
            cluster.delete_job(meta["namespace"], meta["name"], meta.get("uid", ""))
        except ApiException as error:
            if error.status in (404, 409):  # gone already, or the name is someone else's now
                log(f"vcjob {key}: already deleted ({why})")
                return
            failure = api_message(error)
        except TransportError as error:
            failure = _short(error)
        else:
            log(f"vcjob {key}: deleted ({why})")
            return
        if attempt == DELETE_TRIES:
            log(f"vcjob {key}: could NOT be deleted ({why}): {failure}; delete it by hand")
            return
        time.sleep(0.5 * attempt)


def _short(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return api_message(error)
    return " ".join(str(getattr(error, "reason", None) or error).split())[:300]


# --- signals -----------------------------------------------------------------------------------


@contextlib.contextmanager
def cancellable() -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`Cancelled` in the step (main thread only: a step
    called from another thread is stopped by whoever owns it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise Cancelled(signal.Signals(signum).name)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class CancelledAfterCreate(Cancelled):
    """A signal came while the job was being created: the job exists and must go."""

    def __init__(self, signal_name: str, job: dict[str, Any]) -> None:
        super().__init__(signal_name)
        self.job = job


@contextlib.contextmanager
def deferred() -> Iterator[list[int]]:
    """Hold SIGTERM/SIGINT during the block; yields the signals that came meanwhile. Around
    the create request, so that a cancelled step always knows the job it made."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield held
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """A second SIGTERM while the job is being deleted must not cut the delete short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run(
    cluster: Cluster,
    request: JobRequest,
    settings: Follow,
    log: Log,
    on_status: Callable[[Mapping[str, Any]], None] = lambda _job: None,
) -> dict[str, Any]:
    """Submit, follow, hand the last status seen to ``on_status``; returns the Completed job.

    Raises :class:`ParameterError` (nothing created), :class:`JobFailed` (the job failed,
    was deleted, timed out) or :class:`Cancelled` (the job was deleted first).
    """
    with cancellable():
        late: CancelledAfterCreate | None = None
        try:
            created = submit(cluster, request, log)
        except CancelledAfterCreate as error:
            created, late = error.job, error
        seen: list[dict[str, Any]] = [created]
        try:
            if late is not None:
                raise late
            finished = follow(
                cluster, created, settings, log, on_read=lambda j: seen.__setitem__(0, j)
            )
        except BaseException as error:
            with shielded():
                delete_quietly(cluster, created, _why(error), log)
                on_status(seen[0])
            raise
        on_status(finished)
        if progress.phase_of(finished) != "Completed":
            pods = _pods(cluster, finished)
            raise JobFailed(progress.job_key(finished), progress.failure_message(finished, pods))
        return finished


def _why(error: BaseException) -> str:
    if isinstance(error, Cancelled):
        return f"step stopped by {error.signal_name}"
    if isinstance(error, JobFailed):
        return error.detail
    return f"step failed: {type(error).__name__}: {error}"


def _pods(cluster: Cluster, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    try:
        return cluster.job_pods(job["metadata"]["namespace"], job["metadata"]["name"])
    except (ApiException, TransportError):
        return []

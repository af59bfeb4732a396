"""How a kfp step submits and follows its vcjob, and when it deletes it, against an in-memory
stand-in for :class:`Cluster` (the seam the step talks through) and a fake clock.

The same paths run against the real API server in tests/controlplane/test_kfp_component.py;
here each way out of the step is driven on purpose: timeout, deletion by someone else, an
API server that goes away, a signal, a refusal at creation.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from kubernetes.client.rest import ApiException

from stromboli.integrations.kubeflow.pipelines.errors import Cancelled, JobFailed, ParameterError
from stromboli.integrations.kubeflow.pipelines.runner import (
    Follow,
    JobTimedOut,
    cancellable,
    check_queue,
    follow,
    run,
    submit,
)
from stromboli.integrations.kubeflow.pipelines.spec import JobRequest

REQUEST = JobRequest(namespace="ns", name="train", image="img", replicas=2)


def api_error(status: int, message: str = "") -> ApiException:
    error = ApiException(status=status, reason="Reason")
    error.body = json.dumps({"message": message or f"status {status}"})
    return error


def state(phase: str, *history: str, uid: str = "u-1", **counts: int) -> dict[str, Any]:
    phases = [*history, phase]
    return {
        "metadata": {"name": "train", "namespace": "ns", "uid": uid},
        "spec": {"queue": "default"},
        "status": {
            "state": {"phase": phase},
            "conditions": [{"status": p} for p in phases],
            **counts,
        },
    }


class FakeCluster:
    """Answers ``get_job`` from a script: each item a job, or an exception to raise."""

    def __init__(self, script: list[Any] | None = None) -> None:
        self.script = list(script or [])
        self.deleted: list[tuple[str, str, str]] = []
        self.created: list[dict[str, Any]] = []
        self.queues: dict[str, dict[str, Any]] = {"default": {"status": {"state": "Open"}}}
        self.queue_error: ApiException | None = None
        self.create_error: ApiException | None = None
        self.delete_errors: list[BaseException] = []
        self.on_read: Callable[[], None] | None = None
        #: The PodGroup's events, one list per read (the last repeats), or an error to raise.
        self.events: list[Any] = [[]]
        self.group: dict[str, Any] = {
            "metadata": {"uid": "pg-1"},
            "spec": {"queue": "default"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "Unschedulable", "status": "True", "message": "no room for 2"}
                ],
            },
        }

    def check_reachable(self) -> None:
        pass

    def get_queue(self, name: str) -> dict[str, Any]:
        if self.queue_error is not None:
            raise self.queue_error
        if name not in self.queues:
            raise api_error(404)
        return self.queues[name]

    def queue_names(self) -> list[str]:
        return sorted(self.queues)

    def create_job(self, job: dict[str, Any]) -> dict[str, Any]:
        if self.create_error is not None:
            raise self.create_error
        self.created.append(job)
        return {**job, "metadata": {**job["metadata"], "uid": "u-1"}}

    def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        if self.on_read is not None:
            self.on_read()
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        return item

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        if self.delete_errors:
            raise self.delete_errors.pop(0)
        self.deleted.append((namespace, name, uid))

    def get_podgroup(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.group

    def podgroup_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        assert name == "train-u-1"
        item = self.events.pop(0) if len(self.events) > 1 else self.events[0]
        if isinstance(item, BaseException):
            raise item
        return list(item)

    def job_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [
            {
                "metadata": {"name": "train-worker-0"},
                "status": {
                    "phase": "Failed",
                    "containerStatuses": [{"state": {"terminated": {"exitCode": 2}}}],
                },
            }
        ]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def lines() -> list[str]:
    return []


def follow_fake(cluster: FakeCluster, lines: list[str], **settings: float) -> dict[str, Any]:
    clock = Clock()
    return follow(
        cluster,  # type: ignore[arg-type]
        state("Pending"),
        Follow(poll_seconds=1, **settings),
        lines.append,
        clock=clock,
        sleep=clock.sleep,
    )


# --- following --------------------------------------------------------------------------------


def test_follows_to_the_end_and_says_why_it_waited(lines: list[str]) -> None:
    cluster = FakeCluster(
        [
            state("Pending"),
            state("Pending"),
            state("Completed", "Pending", "Running", succeeded=2),
        ]
    )
    finished = follow_fake(cluster, lines)
    assert finished["status"]["state"]["phase"] == "Completed"
    assert lines == [
        "vcjob ns/train: Pending",
        "vcjob ns/train: waiting: no room for 2",  # said once while it stays the same
        "vcjob ns/train: Running",
        "vcjob ns/train: Completed (succeeded 2)",
    ]


def scheduler_event(kind: str, message: str, second: int) -> dict[str, Any]:
    return {
        "metadata": {"resourceVersion": str(second)},
        "involvedObject": {"kind": "PodGroup", "name": "train-u-1", "uid": "pg-1"},
        "type": kind,
        "reason": "Unschedulable",
        "message": message,
        "source": {"component": "volcano"},
        "lastTimestamp": f"2026-01-01T00:00:{second:02d}Z",
    }


REFUSAL = "queue resource quota insufficient: insufficient cpu"
GANG = "0/2 tasks in gang unschedulable: pod group is not ready, 2 minAvailable"


def test_enqueue_refusal_is_said_once_though_the_scheduler_repeats_it(lines: list[str]) -> None:
    cluster = FakeCluster([state("Pending")] * 5 + [state("Completed", "Pending", succeeded=2)])
    cluster.group = {"metadata": {"uid": "pg-1"}, "spec": {"queue": "default"}, "status": {}}
    # Every cycle the scheduler posts both events again; which one is newest alternates.
    cluster.events = [
        [scheduler_event("Normal", REFUSAL, 1)],
        [scheduler_event("Normal", REFUSAL, 3), scheduler_event("Warning", GANG, 2)],
        [scheduler_event("Normal", REFUSAL, 3), scheduler_event("Warning", GANG, 4)],
        [scheduler_event("Normal", REFUSAL, 5), scheduler_event("Warning", GANG, 4)],
        [scheduler_event("Normal", "queue resource quota insufficient: insufficient memory", 6)],
    ]
    follow_fake(cluster, lines)
    held = "PodGroup Pending: the scheduler has not admitted the gang into queue default"
    assert lines == [
        "vcjob ns/train: Pending",
        f"vcjob ns/train: waiting: {held}: {REFUSAL}",
        f"vcjob ns/train: waiting: {held}: {REFUSAL}; {GANG}",
        f"vcjob ns/train: waiting: {held}: queue resource quota insufficient: insufficient memory",
        "vcjob ns/train: Completed (succeeded 2)",
    ]


def test_unreadable_events_leave_the_other_reasons(lines: list[str]) -> None:
    cluster = FakeCluster([state("Pending"), state("Completed", "Pending", succeeded=2)])
    cluster.events = [api_error(403, "events is forbidden")]
    follow_fake(cluster, lines)
    assert "vcjob ns/train: waiting: no room for 2" in lines


def test_timeout(lines: list[str]) -> None:
    cluster = FakeCluster([state("Pending")])
    with pytest.raises(JobTimedOut, match=r"not finished after timeout_seconds=5 \(last phase"):
        follow_fake(cluster, lines, timeout_seconds=5)


def test_deleted_by_someone_else(lines: list[str]) -> None:
    cluster = FakeCluster([state("Running", "Pending"), api_error(404)])
    with pytest.raises(JobFailed, match=r"deleted before it finished \(last phase Running\)"):
        follow_fake(cluster, lines)


def test_replaced_by_a_job_of_the_same_name(lines: list[str]) -> None:
    cluster = FakeCluster([state("Running", uid="u-2")])
    with pytest.raises(JobFailed, match="replaced by another job"):
        follow_fake(cluster, lines)


def test_api_away_for_a_while_is_waited_out(lines: list[str]) -> None:
    refused = urllib3.exceptions.NewConnectionError(None, "refused")  # type: ignore[arg-type]
    cluster = FakeCluster([refused, api_error(503), api_error(429), state("Completed", "Running")])
    assert follow_fake(cluster, lines)["status"]["state"]["phase"] == "Completed"
    assert sum("trying again" in line for line in lines) == 1


def test_api_away_too_long(lines: list[str]) -> None:
    cluster = FakeCluster([api_error(503)])
    with pytest.raises(JobFailed, match="unreachable for 10s"):
        follow_fake(cluster, lines, api_patience_seconds=10)


def test_forbidden_is_not_waited_out(lines: list[str]) -> None:
    cluster = FakeCluster([api_error(403)])
    with pytest.raises(ApiException):
        follow_fake(cluster, lines)


@pytest.mark.parametrize(
    ("settings", "parameter"),
    [({"poll_seconds": 0}, "poll_seconds"), ({"timeout_seconds": -1}, "timeout_seconds")],
)
def test_follow_settings_checked(settings: dict[str, float], parameter: str) -> None:
    with pytest.raises(ParameterError) as caught:
        Follow(**settings)
    assert caught.value.parameter == parameter


# --- run: when the job is deleted -------------------------------------------------------------


def run_fake(cluster: FakeCluster, lines: list[str], **settings: float) -> list[dict[str, Any]]:
    statuses: list[dict[str, Any]] = []
    run(
        cluster,  # type: ignore[arg-type]
        REQUEST,
        Follow(poll_seconds=0.05, **settings),
        lines.append,
        statuses.append,
    )
    return statuses


def test_completed_job_is_kept(lines: list[str]) -> None:
    cluster = FakeCluster([state("Completed", "Pending", "Running", succeeded=2)])
    statuses = run_fake(cluster, lines)
    assert cluster.deleted == []
    assert [s["status"]["state"]["phase"] for s in statuses] == ["Completed"]
    assert lines[0] == "vcjob ns/train created in queue default: 1 task(s), 2 pod(s), gang of 2"


def test_failed_job_is_kept_and_fails_with_its_message(lines: list[str]) -> None:
    cluster = FakeCluster([state("Failed", "Pending", "Running", failed=1)])
    with pytest.raises(JobFailed) as caught:
        run_fake(cluster, lines)
    assert cluster.deleted == []
    assert str(caught.value) == (
        "vcjob ns/train: Failed; pod train-worker-0 exited with code 2; failed 1"
    )


def test_timed_out_job_is_deleted_and_its_last_status_kept(lines: list[str]) -> None:
    cluster = FakeCluster([state("Running", "Pending", running=2)])
    statuses: list[dict[str, Any]] = []
    with pytest.raises(JobTimedOut):
        run(
            cluster,
            REQUEST,
            Follow(poll_seconds=0.05, timeout_seconds=0.2),  # type: ignore[arg-type]
            lines.append,
            statuses.append,
        )
    assert cluster.deleted == [("ns", "train", "u-1")]  # this very job (uid precondition)
    assert statuses[-1]["status"]["state"]["phase"] == "Running"
    assert any(line.startswith("vcjob ns/train: deleted (not finished after") for line in lines)


def test_job_deleted_when_the_api_is_lost(lines: list[str]) -> None:
    cluster = FakeCluster([api_error(403, "forbidden")])
    with pytest.raises(ApiException):
        run_fake(cluster, lines)
    assert cluster.deleted == [("ns", "train", "u-1")]
    assert "vcjob ns/train: deleted (step failed: ApiException" in lines[-1]


def test_delete_is_tried_again_and_a_failure_is_said(lines: list[str]) -> None:
    cluster = FakeCluster([api_error(403)])
    cluster.delete_errors = [api_error(500), api_error(500), api_error(500, "etcd down")]
    with pytest.raises(ApiException):
        run_fake(cluster, lines)
    assert cluster.deleted == []
    assert "could NOT be deleted" in lines[-1] and "etcd down" in lines[-1]


def test_sigterm_deletes_the_job() -> None:
    """A real SIGTERM to this process while the step waits (pytest runs in the main thread)."""
    lines: list[str] = []
    cluster = FakeCluster([state("Running", "Pending", running=2)])
    sent = []

    def signal_once() -> None:
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)

    cluster.on_read = signal_once
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Cancelled) as caught:
        run_fake(cluster, lines)
    assert caught.value.signal_name == "SIGTERM"
    assert cluster.deleted == [("ns", "train", "u-1")]
    assert lines[-1] == "vcjob ns/train: deleted (step stopped by SIGTERM)"
    assert signal.getsignal(signal.SIGTERM) == before  # handlers put back


def test_cancellable_outside_the_main_thread_changes_nothing() -> None:
    import threading

    seen: list[object] = []

    def body() -> None:
        with cancellable():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before]


# --- before anything is created ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "parameter", "detail"),
    [
        (409, "name", "a vcjob train already exists in ns"),
        (403, "namespace", "give its service account create, get and delete"),
        (404, "namespace", "ns: status 404"),
        (422, "tasks", "the API server refused the vcjob: status 422"),
    ],
)
def test_creation_refused(status: int, parameter: str, detail: str, lines: list[str]) -> None:
    cluster = FakeCluster()
    cluster.create_error = api_error(status)
    with pytest.raises(ParameterError) as caught:
        submit(cluster, REQUEST, lines.append)  # type: ignore[arg-type]
    assert caught.value.parameter == parameter
    assert detail in caught.value.detail


def test_missing_queue_lists_the_queues(lines: list[str]) -> None:
    cluster = FakeCluster()
    cluster.queues["research"] = {}
    with pytest.raises(ParameterError) as caught:
        check_queue(cluster, "nowhere", lines.append)  # type: ignore[arg-type]
    assert caught.value.detail == (
        "Queue nowhere does not exist on the cluster; its queues: default, research"
    )
    assert cluster.created == []


def test_closed_queue(lines: list[str]) -> None:
    cluster = FakeCluster()
    cluster.queues["shut"] = {"status": {"state": "Closed"}}
    with pytest.raises(ParameterError, match="Queue shut is Closed"):
        check_queue(cluster, "shut", lines.append)  # type: ignore[arg-type]


def test_unreadable_queues_are_not_checked(lines: list[str]) -> None:
    cluster = FakeCluster()
    cluster.queue_error = api_error(403, "queues is forbidden")
    check_queue(cluster, "any", lines.append)  # type: ignore[arg-type]
    assert lines == ["queue any not checked: the step may not read Queues (queues is forbidden)"]


def test_no_queue_api(lines: list[str]) -> None:
    class NoVolcano(FakeCluster):
        def queue_names(self) -> list[str]:
            raise api_error(404)

    with pytest.raises(ParameterError, match="the cluster has no Queue API"):
        check_queue(NoVolcano(), "default2", lines.append)  # type: ignore[arg-type]


def test_sigterm_during_creation_still_deletes_the_job() -> None:
    """The signal is held while the create request is out, so the job it made is known."""
    lines: list[str] = []

    class SignalledWhileCreating(FakeCluster):
        def create_job(self, job: dict[str, Any]) -> dict[str, Any]:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives before the answer does
            return super().create_job(job)

    cluster = SignalledWhileCreating([state("Pending")])
    with pytest.raises(Cancelled):
        run_fake(cluster, lines)
    assert len(cluster.created) == 1
    assert cluster.deleted == [("ns", "train", "u-1")]
    assert lines[-1] == "vcjob ns/train: deleted (step stopped by SIGTERM)"

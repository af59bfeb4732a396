"""Events → actions (reference §5.2): lifecycle policies, pod event classification, delays."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.core.api.constants import Action, Event
from stromboli.core.controller.job.policies import (
    Request,
    Resolution,
    cancelled_by,
    pod_update_event,
    resolve,
    supersedes,
    task_completed,
    task_failed,
)


def job(policies: list | None = None, task_policies: list | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "default", "uid": "u1"},
        "spec": {
            "policies": policies or [],
            "tasks": [{"name": "worker", "replicas": 2, "policies": task_policies or []}],
        },
    }


def request(event: str = "", **fields: Any) -> Request:
    fields.setdefault("task_name", "worker")
    fields.setdefault("pod_name", "j-worker-0")
    return Request("default", "j", event=event, **fields)


def test_nothing_matching_syncs() -> None:
    assert resolve(job(), request(Event.POD_FAILED), 0).action == Action.SYNC_JOB


def test_job_policy_matches_its_event() -> None:
    policies = [{"event": Event.POD_FAILED, "action": Action.RESTART_JOB}]
    assert resolve(job(policies), request(Event.POD_FAILED), 0).action == Action.RESTART_JOB
    assert resolve(job(policies), request(Event.POD_EVICTED), 0).action == Action.SYNC_JOB


def test_events_list_matches_any_of_them() -> None:
    policies = [{"events": [Event.POD_EVICTED, Event.POD_FAILED], "action": Action.TERMINATE_JOB}]
    for event in (Event.POD_EVICTED, Event.POD_FAILED):
        assert resolve(job(policies), request(event), 0).action == Action.TERMINATE_JOB


def test_task_policies_come_before_job_policies() -> None:
    resolved = resolve(
        job(
            policies=[{"event": Event.POD_FAILED, "action": Action.ABORT_JOB}],
            task_policies=[{"event": Event.POD_FAILED, "action": Action.RESTART_JOB}],
        ),
        request(Event.POD_FAILED),
        0,
    )
    assert resolved.action == Action.RESTART_JOB


def test_job_policies_apply_when_the_task_has_none_matching() -> None:
    resolved = resolve(
        job(
            policies=[{"event": Event.POD_EVICTED, "action": Action.ABORT_JOB}],
            task_policies=[{"event": Event.POD_FAILED, "action": Action.RESTART_JOB}],
        ),
        request(Event.POD_EVICTED),
        0,
    )
    assert resolved.action == Action.ABORT_JOB


def test_any_event_policy_matches_everything_but_internal_events() -> None:
    policies = [{"event": Event.ANY, "action": Action.RESTART_JOB}]
    for event in (Event.POD_FAILED, Event.POD_EVICTED, Event.TASK_COMPLETED, Event.UNKNOWN):
        assert resolve(job(policies), request(event), 0).action == Action.RESTART_JOB
    for event in (Event.OUT_OF_SYNC, Event.POD_RUNNING, Event.COMMAND_ISSUED):
        assert resolve(job(policies), request(event), 0).action == Action.SYNC_JOB


def test_pod_pending_fires_only_policies_with_a_timeout() -> None:
    without = [{"event": Event.POD_PENDING, "action": Action.RESTART_JOB}]
    assert resolve(job(without), request(Event.POD_PENDING), 0).action == Action.SYNC_JOB
    any_without = [{"event": Event.ANY, "action": Action.RESTART_JOB}]
    assert resolve(job(any_without), request(Event.POD_PENDING), 0).action == Action.SYNC_JOB
    timed = [{"event": Event.POD_PENDING, "action": Action.RESTART_JOB, "timeout": "5m"}]
    resolved = resolve(job(timed), request(Event.POD_PENDING), 0)
    assert (resolved.action, resolved.delay) == (Action.RESTART_JOB, 300.0)


def test_timeout_delays_the_action() -> None:
    policies = [{"event": Event.POD_EVICTED, "action": Action.TERMINATE_JOB, "timeout": "90s"}]
    resolved = resolve(job(policies), request(Event.POD_EVICTED), 0)
    assert (resolved.action, resolved.delay, resolved.event) == (
        Action.TERMINATE_JOB,
        90.0,
        Event.POD_EVICTED,
    )


def test_exit_code_policy_matches_the_failed_pods_code() -> None:
    policies = [{"exitCode": 3, "action": Action.RESTART_JOB}]
    assert resolve(job(policies), request(Event.POD_FAILED, exit_code=3), 0).action == (
        Action.RESTART_JOB
    )
    assert resolve(job(policies), request(Event.POD_FAILED, exit_code=1), 0).action == (
        Action.SYNC_JOB
    )


def test_task_exit_code_policy() -> None:
    resolved = resolve(
        job(task_policies=[{"exitCode": 137, "action": Action.RESTART_TASK}]),
        request(Event.POD_FAILED, exit_code=137),
        0,
    )
    assert (resolved.action, resolved.task_name) == (Action.RESTART_TASK, "worker")


def test_command_action_wins() -> None:
    policies = [{"event": Event.ANY, "action": Action.RESTART_JOB}]
    command = Request("default", "j", event=Event.COMMAND_ISSUED, action=Action.ABORT_JOB)
    assert resolve(job(policies), command, 5).action == Action.ABORT_JOB


def test_requests_from_older_job_versions_only_sync() -> None:
    policies = [{"event": Event.POD_FAILED, "action": Action.RESTART_JOB}]
    assert resolve(job(policies), request(Event.POD_FAILED, job_version=1), 2).action == (
        Action.SYNC_JOB
    )
    assert resolve(job(policies), request(Event.POD_FAILED, job_version=2), 2).action == (
        Action.RESTART_JOB
    )


def test_requests_about_another_job_of_the_same_name_only_sync() -> None:
    policies = [{"event": Event.POD_FAILED, "action": Action.RESTART_JOB}]
    assert resolve(job(policies), request(Event.POD_FAILED, job_uid="old"), 0).action == (
        Action.SYNC_JOB
    )


# --- pod updates as events ---------------------------------------------------------------


def pod(phase: str, *, exit_code: int | None = None, out_of_sync: bool = False) -> dict:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [
            {"name": "main", "state": {"terminated": {"exitCode": exit_code}}}
        ]
    annotations = {"volcano.sh/controller-out-of-sync": "true"} if out_of_sync else {}
    return {"metadata": {"name": "p", "annotations": annotations}, "status": status}


def event_of(old: dict, new: dict, completed: bool = False, failed: bool = False) -> tuple:
    return pod_update_event(old, new, completed=lambda: completed, failed=lambda: failed)


def test_pod_failure_carries_the_exit_code() -> None:
    assert event_of(pod("Running"), pod("Failed", exit_code=3)) == (Event.POD_FAILED, 3)
    assert event_of(pod("Failed", exit_code=3), pod("Failed", exit_code=3)) == (
        Event.OUT_OF_SYNC,
        0,
    )


def test_last_success_of_a_task_is_task_completed() -> None:
    assert event_of(pod("Running"), pod("Succeeded"), completed=True)[0] == Event.TASK_COMPLETED
    assert event_of(pod("Running"), pod("Succeeded"), completed=False)[0] == Event.OUT_OF_SYNC


def test_phase_changes_to_running_and_pending() -> None:
    assert event_of(pod("Pending"), pod("Running"))[0] == Event.POD_RUNNING
    assert event_of(pod("Running"), pod("Pending"))[0] == Event.POD_PENDING
    assert event_of(pod("Running"), pod("Running"))[0] == Event.OUT_OF_SYNC


def test_restarting_containers_make_task_failed() -> None:
    assert event_of(pod("Running"), pod("Running"), failed=True)[0] == Event.TASK_FAILED
    assert event_of(pod("Pending"), pod("Pending"), failed=True)[0] == Event.TASK_FAILED


def test_out_of_sync_pods_report_nothing() -> None:
    assert event_of(pod("Running"), pod("Failed", exit_code=1, out_of_sync=True))[0] == (
        Event.OUT_OF_SYNC
    )


def with_restarts(phase: str, restarts: int) -> dict:
    return {"status": {"phase": phase, "containerStatuses": [{"restartCount": restarts}]}}


def test_task_failed_counts_restarts_of_live_pods() -> None:
    assert not task_failed([with_restarts("Running", 2)], replicas=2, max_retry=3)
    assert task_failed([with_restarts("Running", 2), with_restarts("Pending", 1)], 2, 3)
    assert not task_failed([with_restarts("Failed", 5)], 2, 3)
    assert task_failed([with_restarts("Running", 3)], 2, 0)  # 0 means the default, 3
    assert not task_failed([with_restarts("Running", 30)], 2, -1)  # -1: unlimited


def test_task_completed_needs_every_replica() -> None:
    done = {"status": {"phase": "Succeeded"}}
    assert task_completed([done, done], 2)
    assert not task_completed([done, {"status": {"phase": "Running"}}], 2)
    assert not task_completed([], 0)


# --- cancelling delayed actions ----------------------------------------------------------


def delayed(event: str, action: str = Action.RESTART_JOB, **fields: Any) -> Resolution:
    return Resolution(action=action, event=event, delay=60, **fields)


@pytest.mark.parametrize(
    ("pending_event", "new_event", "cancelled"),
    [
        (Event.POD_PENDING, Event.POD_RUNNING, True),
        (Event.POD_PENDING, Event.POD_FAILED, True),
        (Event.POD_PENDING, Event.POD_PENDING, False),
        (Event.POD_FAILED, Event.POD_RUNNING, True),
        (Event.POD_EVICTED, Event.POD_RUNNING, True),
        (Event.POD_FAILED, Event.POD_EVICTED, False),
        (Event.POD_FAILED, Event.OUT_OF_SYNC, False),
    ],
)
def test_pod_events_cancel_moot_delays(pending_event: str, new_event: str, cancelled: bool) -> None:
    assert cancelled_by(delayed(pending_event, pod_uid="p1"), request(new_event, pod_uid="p1")) is (
        cancelled
    )


def test_pending_timeout_of_a_replaced_pod_is_not_cancelled_by_the_new_pod() -> None:
    assert not cancelled_by(delayed(Event.POD_PENDING, pod_uid="old"), request(Event.POD_RUNNING))


def test_executed_actions_supersede_delays_of_their_scope() -> None:
    executed = Resolution(Action.TERMINATE_JOB)
    assert supersedes(executed, delayed(Event.POD_FAILED, Action.RESTART_JOB))
    assert not supersedes(executed, delayed(Event.POD_FAILED, Action.RESTART_POD, pod_name="a"))
    pod_restart = Resolution(Action.RESTART_POD, pod_name="a")
    assert supersedes(pod_restart, delayed(Event.POD_FAILED, Action.RESTART_POD, pod_name="a"))
    assert not supersedes(pod_restart, delayed(Event.POD_FAILED, Action.RESTART_POD, pod_name="b"))
    task_restart = Resolution(Action.RESTART_TASK, task_name="x")
    assert supersedes(task_restart, delayed(Event.POD_FAILED, Action.RESTART_TASK, task_name="x"))
    assert not supersedes(
        task_restart, delayed(Event.POD_FAILED, Action.RESTART_TASK, task_name="y")
    )

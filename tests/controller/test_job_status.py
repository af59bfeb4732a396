"""The Job status: wire shape, counts, conditions and Go-style durations."""

from __future__ import annotations

import pytest

from stromboli.core.controller.job.status import (
    JobStatus,
    append_condition,
    count_pods,
    go_duration,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (59, "59s"),
        (61, "1m1s"),
        (3600, "1h0m0s"),
        (3723, "1h2m3s"),
        (-2, "-2s"),
    ],
)
def test_durations_are_written_as_go_does(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_status_round_trips_and_leaves_out_zeros() -> None:
    wire = {
        "state": {"phase": "Running", "lastTransitionTime": "1970-01-01T00:00:05Z"},
        "minAvailable": 2,
        "running": 2,
        "taskStatusCount": {"worker": {"phase": {"Running": 2}}},
        "version": 1,
        "retryCount": 1,
        "runningDuration": "5s",
        "controlledResources": {"plugin-svc": "svc"},
        "conditions": [{"status": "Running", "lastTransitionTime": "1970-01-01T00:00:05Z"}],
    }
    status = JobStatus.from_dict(wire)
    assert status.to_dict() == wire
    assert JobStatus().to_dict() == {}
    assert JobStatus.from_dict(None).phase == ""


def test_reentering_a_phase_moves_its_condition_to_the_end() -> None:
    conditions = append_condition([], "Pending", "t0")
    conditions = append_condition(conditions, "Running", "t1")
    conditions = append_condition(conditions, "Pending", "t2")
    assert conditions == [
        {"status": "Running", "lastTransitionTime": "t1"},
        {"status": "Pending", "lastTransitionTime": "t2"},
    ]


def test_transition_stamps_time_condition_and_duration() -> None:
    status = JobStatus(phase="Completed")
    status.transition("1970-01-01T00:01:30Z", "", 90)
    assert status.last_transition_time == "1970-01-01T00:01:30Z"
    assert status.conditions == [
        {"status": "Completed", "lastTransitionTime": "1970-01-01T00:01:30Z"}
    ]
    assert status.running_duration == "1m30s"


def test_pods_are_counted_by_phase_and_task() -> None:
    def pod(task: str, phase: str | None) -> dict:
        status = {"phase": phase} if phase else {}
        return {"metadata": {"annotations": {"volcano.sh/task-spec": task}}, "status": status}

    counts = count_pods(
        [pod("a", "Running"), pod("a", "Succeeded"), pod("b", "Failed"), pod("b", None)],
        "volcano.sh/task-spec",
    )
    assert (counts.running, counts.succeeded, counts.failed, counts.unknown) == (1, 1, 1, 1)
    assert counts.by_task == {
        "a": {"Running": 1, "Succeeded": 1},
        "b": {"Failed": 1, "Unknown": 1},
    }

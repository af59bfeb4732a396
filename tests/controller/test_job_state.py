"""The job state machine (reference §5.3): every phase × action cell, as pure logic."""

from __future__ import annotations

import pytest

from stromboli.core.api.constants import Action, JobPhase
from stromboli.core.controller.job.state import (
    RETAIN_NONE,
    RETAIN_SOFT,
    JobFacts,
    Op,
    TaskFacts,
    is_finished,
    plan,
    retained_phases,
)
from stromboli.core.controller.job.status import JobStatus

FACTS = JobFacts(min_available=2, max_retry=3, tasks=(TaskFacts("worker", 2, 2),))
TARGETED = (Action.RESTART_TASK, Action.RESTART_POD, Action.RESTART_PARTITION)
ALL_ACTIONS = (
    Action.RESTART_JOB,
    *TARGETED,
    Action.ABORT_JOB,
    Action.TERMINATE_JOB,
    Action.COMPLETE_JOB,
    Action.RESUME_JOB,
    Action.SYNC_JOB,
)


def apply(phase: str, action: str, facts: JobFacts = FACTS, **counts: int) -> tuple:
    """(op, retain, new phase, retry count, changed) of ``action`` on a job in ``phase``."""
    step = plan(phase, action)
    status = JobStatus(phase=phase, min_available=facts.min_available, **counts)
    changed = step.update(status, facts) if step.update is not None else False
    return step.op, step.retain, status.phase, status.retry_count, changed


# --- Pending and Running: the kills ------------------------------------------------------


@pytest.mark.parametrize("phase", [JobPhase.PENDING, JobPhase.RUNNING, ""])
def test_restart_job_kills_every_pod_and_counts_a_retry(phase: str) -> None:
    assert apply(phase, Action.RESTART_JOB) == (
        Op.KILL_JOB,
        RETAIN_NONE,
        JobPhase.RESTARTING,
        1,
        True,
    )


@pytest.mark.parametrize("phase", [JobPhase.PENDING, JobPhase.RUNNING])
@pytest.mark.parametrize("action", TARGETED)
def test_restart_task_pod_partition_kill_their_target(phase: str, action: str) -> None:
    assert apply(phase, action) == (Op.KILL_TARGET, RETAIN_SOFT, JobPhase.RESTARTING, 1, True)


@pytest.mark.parametrize("phase", [JobPhase.PENDING, JobPhase.RUNNING])
@pytest.mark.parametrize(
    ("action", "to"),
    [
        (Action.ABORT_JOB, JobPhase.ABORTING),
        (Action.TERMINATE_JOB, JobPhase.TERMINATING),
        (Action.COMPLETE_JOB, JobPhase.COMPLETING),
    ],
)
def test_abort_terminate_complete_keep_finished_pods(phase: str, action: str, to: str) -> None:
    assert apply(phase, action) == (Op.KILL_JOB, RETAIN_SOFT, to, 0, True)


@pytest.mark.parametrize("phase", [JobPhase.PENDING, JobPhase.RUNNING])
def test_resume_on_a_live_job_is_a_sync(phase: str) -> None:
    assert plan(phase, Action.RESUME_JOB).op is Op.SYNC


# --- Pending sync ------------------------------------------------------------------------


def test_pending_stays_until_min_available_pods_started() -> None:
    assert apply(JobPhase.PENDING, Action.SYNC_JOB, running=1, pending=1)[2:] == (
        JobPhase.PENDING,
        0,
        False,
    )


@pytest.mark.parametrize(
    "counts", [{"running": 2}, {"running": 1, "succeeded": 1}, {"failed": 1, "succeeded": 1}]
)
def test_pending_becomes_running_once_min_available_started(counts: dict) -> None:
    assert apply(JobPhase.PENDING, Action.SYNC_JOB, **counts)[2] == JobPhase.RUNNING


def test_unknown_phase_is_treated_as_pending() -> None:
    assert apply("", Action.SYNC_JOB, running=2)[2] == JobPhase.RUNNING


# --- Running sync ------------------------------------------------------------------------


def test_running_keeps_its_phase_while_pods_run() -> None:
    assert apply(JobPhase.RUNNING, Action.SYNC_JOB, running=1, succeeded=1)[2:] == (
        JobPhase.RUNNING,
        0,
        False,
    )


def test_running_completes_when_all_pods_succeeded() -> None:
    result = apply(
        JobPhase.RUNNING,
        Action.SYNC_JOB,
        succeeded=2,
        task_status_count={"worker": {"Succeeded": 2}},
    )
    assert result[2] == JobPhase.COMPLETED


def test_running_fails_when_a_task_misses_its_min_available() -> None:
    result = apply(
        JobPhase.RUNNING,
        Action.SYNC_JOB,
        succeeded=1,
        failed=1,
        task_status_count={"worker": {"Succeeded": 1, "Failed": 1}},
    )
    assert result[2] == JobPhase.FAILED


def test_running_completes_with_min_available_successes_when_tasks_allow_it() -> None:
    # minAvailable 1 of 2 replicas (below Σ task minimums): one success is enough.
    facts = JobFacts(min_available=1, max_retry=3, tasks=(TaskFacts("worker", 2, 2),))
    result = apply(JobPhase.RUNNING, Action.SYNC_JOB, facts, succeeded=1, failed=1)
    assert result[2] == JobPhase.COMPLETED
    result = apply(JobPhase.RUNNING, Action.SYNC_JOB, facts, failed=2)
    assert result[2] == JobPhase.FAILED


def test_min_success_completes_early() -> None:
    facts = JobFacts(min_available=2, max_retry=3, min_success=2, tasks=(TaskFacts("w", 4, 2),))
    assert apply(JobPhase.RUNNING, Action.SYNC_JOB, facts, succeeded=2, running=2)[2] == (
        JobPhase.COMPLETED
    )


def test_min_success_not_reached_fails_when_all_finished() -> None:
    facts = JobFacts(min_available=1, max_retry=3, min_success=3, tasks=(TaskFacts("w", 4, None),))
    assert apply(JobPhase.RUNNING, Action.SYNC_JOB, facts, succeeded=2, failed=2)[2] == (
        JobPhase.FAILED
    )


def test_running_goes_back_to_pending_when_too_many_pods_wait() -> None:
    assert apply(JobPhase.RUNNING, Action.SYNC_JOB, pending=1, running=1)[2] == JobPhase.PENDING


def test_running_job_scaled_to_zero_keeps_its_phase() -> None:
    facts = JobFacts(min_available=0, max_retry=3, tasks=(TaskFacts("w", 0, 0),))
    assert apply(JobPhase.RUNNING, Action.SYNC_JOB, facts)[2:] == (JobPhase.RUNNING, 0, False)


# --- Restarting ----------------------------------------------------------------------------


def test_restarting_sync_waits_while_pods_terminate() -> None:
    assert apply(JobPhase.RESTARTING, Action.SYNC_JOB, terminating=2, retry_count=1)[2:] == (
        JobPhase.RESTARTING,
        1,
        False,
    )


def test_restarting_becomes_pending_when_pods_are_gone() -> None:
    op, _, phase, _, _ = apply(JobPhase.RESTARTING, Action.SYNC_JOB, retry_count=1)
    assert (op, phase) == (Op.SYNC, JobPhase.PENDING)


def test_restarting_fails_once_retries_are_used_up() -> None:
    assert apply(JobPhase.RESTARTING, Action.SYNC_JOB, retry_count=3)[2] == JobPhase.FAILED


@pytest.mark.parametrize(
    "action",
    [
        Action.RESTART_JOB,
        Action.ABORT_JOB,
        Action.TERMINATE_JOB,
        Action.COMPLETE_JOB,
        Action.RESUME_JOB,
    ],
)
def test_restarting_kills_everything_on_other_actions(action: str) -> None:
    op, retain, phase, retries, _ = apply(JobPhase.RESTARTING, action, retry_count=1)
    assert (op, retain, phase, retries) == (Op.KILL_JOB, RETAIN_NONE, JobPhase.PENDING, 1)


@pytest.mark.parametrize("action", TARGETED)
def test_restarting_kills_targets_on_targeted_restarts(action: str) -> None:
    assert plan(JobPhase.RESTARTING, action).op is Op.KILL_TARGET


# --- Aborting / Aborted --------------------------------------------------------------------


@pytest.mark.parametrize("phase", [JobPhase.ABORTING, JobPhase.ABORTED])
def test_resume_restarts_an_aborted_job(phase: str) -> None:
    assert apply(phase, Action.RESUME_JOB) == (
        Op.KILL_JOB,
        RETAIN_SOFT,
        JobPhase.RESTARTING,
        1,
        True,
    )


@pytest.mark.parametrize("action", [a for a in ALL_ACTIONS if a != Action.RESUME_JOB])
def test_aborting_becomes_aborted_once_drained(action: str) -> None:
    assert apply(JobPhase.ABORTING, action, running=1)[2] == JobPhase.ABORTING
    assert apply(JobPhase.ABORTING, action, terminating=1)[2] == JobPhase.ABORTING
    assert apply(JobPhase.ABORTING, action, succeeded=1)[:3] == (
        Op.KILL_JOB,
        RETAIN_SOFT,
        JobPhase.ABORTED,
    )


@pytest.mark.parametrize("action", [a for a in ALL_ACTIONS if a != Action.RESUME_JOB])
def test_aborted_only_cleans_up(action: str) -> None:
    assert apply(JobPhase.ABORTED, action) == (Op.KILL_JOB, RETAIN_SOFT, JobPhase.ABORTED, 0, False)


# --- Completing / Terminating and the finished phases ------------------------------------


@pytest.mark.parametrize(
    ("phase", "to"),
    [(JobPhase.COMPLETING, JobPhase.COMPLETED), (JobPhase.TERMINATING, JobPhase.TERMINATED)],
)
@pytest.mark.parametrize("action", ALL_ACTIONS)
def test_completing_and_terminating_finish_once_drained(phase: str, to: str, action: str) -> None:
    assert apply(phase, action, pending=1)[:3] == (Op.KILL_JOB, RETAIN_SOFT, phase)
    assert apply(phase, action, failed=2)[2] == to


@pytest.mark.parametrize("phase", [JobPhase.COMPLETED, JobPhase.TERMINATED, JobPhase.FAILED])
@pytest.mark.parametrize("action", ALL_ACTIONS)
def test_finished_jobs_stay_finished(phase: str, action: str) -> None:
    assert apply(phase, action) == (Op.KILL_JOB, RETAIN_SOFT, phase, 0, False)
    assert is_finished(phase)


def test_last_retry_keeps_finished_pods() -> None:
    assert retained_phases(RETAIN_NONE, retry_count=0, max_retry=3) == RETAIN_NONE
    assert retained_phases(RETAIN_NONE, retry_count=2, max_retry=3) == RETAIN_SOFT
    assert retained_phases(RETAIN_SOFT, retry_count=0, max_retry=3) == RETAIN_SOFT

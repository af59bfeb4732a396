"""Job counters and gang rules (reference §3.3 "Job counters")."""

from __future__ import annotations

import pytest

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.status import TaskStatus

from .builders import job_info, task

S = TaskStatus


def tasks_in(*statuses: TaskStatus, role: str | None = None, best_effort: bool = False) -> list:
    out = []
    for i, status in enumerate(statuses):
        name = f"{role or 't'}-{status.label.lower()}-{i}"
        t = task(name, role=role, cpu=None if best_effort else "1")
        t.status = status
        if status & (S.BOUND | S.BINDING | S.RUNNING | S.ALLOCATED | S.PIPELINED):
            t.node_name = "n1"
        out.append(t)
    return out


def job(min_available: int, *statuses: TaskStatus, **kw) -> JobInfo:
    return job_info(min_available, tasks_in(*statuses), **kw)


# -- counters --------------------------------------------------------------------------------


def test_ready_counts_allocated_statuses_and_succeeded() -> None:
    j = job(
        0,
        S.BOUND,
        S.BINDING,
        S.RUNNING,
        S.ALLOCATED,
        S.SUCCEEDED,
        S.PIPELINED,
        S.PENDING,
        S.FAILED,
        S.RELEASING,
    )
    assert j.ready_task_num() == 5
    assert j.waiting_task_num() == 1


def test_valid_counts_allocated_succeeded_pipelined_pending() -> None:
    j = job(0, S.RUNNING, S.SUCCEEDED, S.PIPELINED, S.PENDING, S.FAILED, S.RELEASING, S.UNKNOWN)
    assert j.valid_task_num() == 4


def test_is_ready_needs_min_available_ready() -> None:
    assert job(2, S.RUNNING, S.ALLOCATED).is_ready()
    assert not job(3, S.RUNNING, S.ALLOCATED, S.PENDING).is_ready()


def test_pending_best_effort_counts_toward_ready() -> None:
    j = job_info(2, tasks_in(S.RUNNING) + tasks_in(S.PENDING, best_effort=True))
    assert j.pending_best_effort_num() == 1
    assert j.is_ready()
    assert j.is_pipelined()
    # ... but not toward starving: it has no place yet.
    assert j.is_starving()


def test_pipelined_counts_waiting_tasks() -> None:
    j = job(3, S.RUNNING, S.PIPELINED, S.PIPELINED)
    assert not j.is_ready()
    assert j.is_pipelined()
    assert not j.is_starving()


def test_starving_when_ready_plus_waiting_short() -> None:
    assert job(3, S.RUNNING, S.PIPELINED, S.PENDING).is_starving()
    assert not job(2, S.RUNNING, S.PIPELINED, S.PENDING).is_starving()


def test_min_available_zero_is_always_ready() -> None:
    j = job(0, S.PENDING)
    assert j.is_ready()
    assert not j.is_starving()


# -- bookkeeping -----------------------------------------------------------------------------


def test_update_status_moves_index_and_allocated() -> None:
    j = job(1, S.PENDING)
    t = next(iter(j.tasks.values()))
    assert j.allocated.milli_cpu == 0
    j.update_status(t, S.ALLOCATED)
    assert t.status == S.ALLOCATED
    assert j.allocated.milli_cpu == 1000
    assert j.count(S.PENDING) == 0
    assert j.tasks_with(S.ALLOCATED) == [t]
    j.update_status(t, S.PENDING)
    assert j.allocated.milli_cpu == 0
    assert j.count(S.ALLOCATED) == 0


def test_total_request_counts_every_task() -> None:
    j = job(1, S.PENDING, S.RUNNING, S.SUCCEEDED)
    assert j.total_request.milli_cpu == 3000
    assert j.allocated.milli_cpu == 1000


def test_phase_defaults_to_pending() -> None:
    j = job(1, S.PENDING)
    j.podgroup = {"metadata": {"name": "pg"}, "spec": {}}
    assert j.phase == "Pending"
    assert j.is_pending()
    j.podgroup = {"status": {"phase": ""}}
    assert j.is_pending()
    j.podgroup = {"status": {"phase": "Inqueue"}}
    assert not j.is_pending()


def test_clone_is_independent() -> None:
    j = job(1, S.PENDING)
    copy = j.clone()
    t = next(iter(copy.tasks.values()))
    copy.update_status(t, S.ALLOCATED)
    original = next(iter(j.tasks.values()))
    assert original.status == S.PENDING
    assert j.allocated.milli_cpu == 0
    assert copy.allocated.milli_cpu == 1000


# -- per-role minimums (minTaskMember) -----------------------------------------------------------


def roles(
    min_available: int,
    min_task_member: dict[str, int],
    **by_role: list[TaskStatus],
) -> JobInfo:
    tasks: list[TaskInfo] = []
    for role, statuses in by_role.items():
        tasks.extend(tasks_in(*statuses, role=role))
    return job_info(min_available, tasks, min_task_member=min_task_member)


def test_task_valid_when_every_role_has_enough_pods() -> None:
    j = roles(3, {"ps": 1, "worker": 2}, ps=[S.PENDING], worker=[S.PENDING, S.PENDING])
    assert j.check_task_valid()


def test_task_invalid_when_a_role_lacks_pods() -> None:
    j = roles(3, {"ps": 1, "worker": 2}, ps=[S.PENDING], worker=[S.PENDING, S.FAILED])
    assert not j.check_task_valid()


def test_task_invalid_when_a_role_is_missing() -> None:
    j = roles(3, {"ps": 1, "worker": 2}, worker=[S.PENDING, S.PENDING, S.PENDING])
    assert not j.check_task_valid()


def test_task_ready_per_role() -> None:
    ready = roles(3, {"ps": 1, "worker": 2}, ps=[S.ALLOCATED], worker=[S.RUNNING, S.ALLOCATED])
    assert ready.check_task_ready()
    short = roles(
        3, {"ps": 1, "worker": 2}, ps=[S.PENDING], worker=[S.RUNNING, S.ALLOCATED, S.BOUND]
    )
    assert not short.check_task_ready()
    # Total is enough, a role is not: the job is not ready under the per-role rule.
    assert short.is_ready()


def test_task_pipelined_per_role_counts_pipelined() -> None:
    j = roles(3, {"ps": 1, "worker": 2}, ps=[S.PIPELINED], worker=[S.RUNNING, S.PIPELINED])
    assert j.check_task_pipelined()
    assert not j.check_task_ready()


def test_task_starving_per_role() -> None:
    j = roles(3, {"ps": 1, "worker": 2}, ps=[S.PENDING], worker=[S.RUNNING, S.RUNNING, S.RUNNING])
    assert j.check_task_starving()
    full = roles(3, {"ps": 1, "worker": 2}, ps=[S.RUNNING], worker=[S.RUNNING, S.PIPELINED])
    assert not full.check_task_starving()


def test_pending_best_effort_counts_for_its_role_when_ready() -> None:
    ps = tasks_in(S.PENDING, role="ps", best_effort=True)
    workers = tasks_in(S.ALLOCATED, S.ALLOCATED, role="worker")
    j = job_info(3, ps + workers, min_task_member={"ps": 1, "worker": 2})
    assert j.is_ready()
    assert j.check_task_ready()
    assert j.check_task_pipelined()


@pytest.mark.parametrize("check", ["check_task_valid", "check_task_ready", "check_task_pipelined"])
def test_role_rules_skipped_when_min_available_below_their_sum(check: str) -> None:
    # minAvailable 2 < 1 + 2: Volcano skips the per-role checks entirely.
    j = roles(2, {"ps": 1, "worker": 2}, worker=[S.PENDING])
    assert getattr(j, check)()


def test_role_starving_is_true_when_skipped() -> None:
    j = roles(2, {"ps": 1, "worker": 2}, ps=[S.RUNNING], worker=[S.RUNNING, S.RUNNING])
    assert j.check_task_starving()


def test_role_rules_apply_when_min_available_equals_their_sum() -> None:
    j = roles(3, {"ps": 1, "worker": 2}, worker=[S.PENDING, S.PENDING, S.PENDING])
    assert not j.check_task_valid()


def test_no_min_task_member_means_roles_always_pass() -> None:
    j = job(2, S.PENDING)
    assert j.check_task_valid()
    assert j.check_task_ready()
    assert j.check_task_pipelined()

"""The job's gang counters stay equal to counting its tasks, whatever the edits; predicate
verdicts that fail no node share one read-only mask.

``JobInfo`` keeps a tally of best-effort tasks so that job ordering, asked on every heap
comparison, need not walk the pending tasks; these tests drive random sequences of adds,
removals, status moves and clones and compare every counter with a count from scratch.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS, READY_STATUS, TaskStatus

from .builders import conf, job_info, make_session, node, pod, podgroup, session_task, task

STATUSES = [
    TaskStatus.PENDING,
    TaskStatus.ALLOCATED,
    TaskStatus.PIPELINED,
    TaskStatus.BINDING,
    TaskStatus.BOUND,
    TaskStatus.RUNNING,
    TaskStatus.RELEASING,
    TaskStatus.SUCCEEDED,
    TaskStatus.FAILED,
]

edit = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("remove"), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("move"), st.integers(0, 9), st.sampled_from(STATUSES)),
    st.tuples(st.just("clone"), st.integers(0, 9), st.booleans()),
)


def new_task(i: int, best_effort: bool) -> TaskInfo:
    return task(f"t{i}") if best_effort else task(f"t{i}", cpu="1", memory="1Gi")


def brute(job: JobInfo, mask: TaskStatus) -> int:
    return sum(1 for t in job.tasks.values() if t.status & mask)


def check(job: JobInfo) -> None:
    assert job.best_effort_tasks == sum(1 for t in job.tasks.values() if t.best_effort)
    assert job.pending_best_effort_num() == sum(
        1 for t in job.tasks.values() if t.best_effort and t.status == TaskStatus.PENDING
    )
    for mask in (READY_STATUS, ALLOCATED_STATUS, TaskStatus.PIPELINED, TaskStatus.PENDING):
        assert job.count(mask) == brute(job, mask)
    assert job.is_ready() == (
        brute(job, READY_STATUS) + job.pending_best_effort_num() >= job.min_available
    )


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.lists(edit, max_size=40))
def test_counters_match_a_count_from_scratch(min_available: int, edits: list) -> None:
    job = job_info(min_available)
    for kind, i, arg in edits:
        uid = f"uid-t{i}"
        if kind == "add" and uid not in job.tasks:
            added = new_task(i, arg)
            added.job_id = job.uid
            job.add_task(added)
        elif kind == "remove":
            job.remove_task(uid)
        elif kind == "move" and uid in job.tasks:
            job.update_status(job.tasks[uid], arg)
        elif kind == "clone":
            copy = job.clone()
            check(copy)
            if arg:
                job = copy  # go on editing the clone; the original must not follow
        check(job)


def test_best_effort_pending_task_counts_towards_readiness() -> None:
    job = job_info(2, [task("a", cpu="1"), task("b")])
    assert job.best_effort_tasks == 1
    assert job.pending_best_effort_num() == 1
    job.update_status(job.tasks["uid-a"], TaskStatus.ALLOCATED)
    assert job.is_ready()
    job.remove_task("uid-b")
    assert job.best_effort_tasks == 0
    assert not job.is_ready()


def test_a_verdict_that_fails_no_node_is_a_shared_read_only_all_pass() -> None:
    ssn = make_session(
        [node("n1"), node("n2"), podgroup("pg", 1), pod("p", group="pg", cpu="1")],
        conf("allocate", ["predicates"]),
    )
    first = ssn.predicate(session_task(ssn, "p"))
    again = ssn.predicate(session_task(ssn, "p"))
    assert first.passed.tolist() == [True, True]
    assert first.reasons == [] and first.reasons is not again.reasons
    with pytest.raises(ValueError):
        first.passed[0] = False  # shared: nobody may change it in place


def test_a_failing_node_still_gets_its_own_verdict_and_reason() -> None:
    ssn = make_session(
        [
            node("n1"),
            node("n2", unschedulable=True),
            podgroup("pg", 1),
            pod("p", group="pg", cpu="1"),
        ],
        conf("allocate", ["predicates"]),
    )
    verdict = ssn.predicate(session_task(ssn, "p"))
    assert verdict.passed.tolist() == [True, False]
    assert [(m.tolist(), unresolvable) for m, _, unresolvable in verdict.reasons] == [
        ([False, True], True)
    ]
    verdict.passed[0] = False  # a verdict with reasons is the caller's own
    assert ssn.predicate(session_task(ssn, "p")).passed.tolist() == [True, False]

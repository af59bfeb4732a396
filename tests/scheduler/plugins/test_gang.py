"""gang: validity, order, readiness, pipelining, starving, victims and close conditions."""

from __future__ import annotations

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.gang import READY_REASON, GangPlugin

from ..builders import conf, job_info, make_session, node, pod, podgroup, session_task, task

S = TaskStatus
GANG = conf("allocate", ["gang"])


def job(min_available: int, *statuses: TaskStatus, roles: list[str] | None = None, **kw) -> JobInfo:
    tasks = []
    for i, status in enumerate(statuses):
        role = roles[i] if roles else None
        t = task(f"t-{i}", cpu="1", role=role)
        t.status = status
        tasks.append(t)
    return job_info(min_available, tasks, **kw)


# -- validity ------------------------------------------------------------------------------------


def test_valid_job() -> None:
    assert GangPlugin.job_valid(job(2, S.PENDING, S.RUNNING)) is None


def test_too_few_valid_tasks() -> None:
    assert GangPlugin.job_valid(job(3, S.PENDING, S.RUNNING, S.FAILED)) == (
        "NotEnoughTasks",
        "Not enough valid tasks for gang-scheduling, valid: 2, min: 3",
    )


def test_role_without_enough_pods() -> None:
    j = job(
        3,
        S.PENDING,
        S.PENDING,
        S.PENDING,
        roles=["ps", "ps", "worker"],
        min_task_member={"ps": 1, "worker": 2},
    )
    assert GangPlugin.job_valid(j) == (
        "NotEnoughPodsOfTask",
        "Not enough valid pods of each task for gang-scheduling",
    )


def test_role_check_skipped_when_min_available_is_smaller() -> None:
    j = job(
        2,
        S.PENDING,
        S.PENDING,
        roles=["ps", "ps"],
        min_task_member={"ps": 1, "worker": 2},
    )
    assert GangPlugin.job_valid(j) is None


# -- order, ready, pipelined, starving ---------------------------------------------------------


def test_jobs_not_ready_go_first() -> None:
    ready, waiting = job(1, S.RUNNING), job(1, S.PENDING)
    assert GangPlugin.job_order(waiting, ready) == -1
    assert GangPlugin.job_order(ready, waiting) == 1
    assert GangPlugin.job_order(ready, ready) == 0
    assert GangPlugin.job_order(waiting, waiting) == 0


def test_job_ready() -> None:
    assert GangPlugin.job_ready(job(2, S.ALLOCATED, S.RUNNING))
    assert not GangPlugin.job_ready(job(2, S.ALLOCATED, S.PENDING))


def test_job_ready_checks_roles() -> None:
    j = job(
        3,
        S.ALLOCATED,
        S.ALLOCATED,
        S.ALLOCATED,
        S.PENDING,
        roles=["worker", "worker", "worker", "ps"],
        min_task_member={"ps": 1, "worker": 2},
    )
    assert j.is_ready()
    assert not GangPlugin.job_ready(j)


def test_job_pipelined_votes() -> None:
    assert GangPlugin.job_pipelined(job(2, S.PIPELINED, S.RUNNING)) == PERMIT
    assert GangPlugin.job_pipelined(job(2, S.PIPELINED, S.PENDING)) == REJECT


def test_job_starving_uses_only_the_job_minimum() -> None:
    assert GangPlugin.job_starving(job(2, S.PIPELINED, S.PENDING))
    assert not GangPlugin.job_starving(job(2, S.PIPELINED, S.RUNNING))
    # The roles are short, the job is not: not starving (per-role minima are ignored here).
    j = job(
        3,
        S.RUNNING,
        S.RUNNING,
        S.RUNNING,
        S.PENDING,
        roles=["worker", "worker", "worker", "ps"],
        min_task_member={"ps": 1, "worker": 2},
    )
    assert not GangPlugin.job_starving(j)


# -- victims -------------------------------------------------------------------------------------


def victim_session(min_member: int, running: int) -> Session:
    objects = [
        node("n1", cpu="16"),
        podgroup("v", min_member, phase="Running"),
        *[
            pod(f"v-{i}", group="v", uid=f"v{i}", cpu="1", node_name="n1", phase="Running")
            for i in range(running)
        ],
        podgroup("p", 1),
        pod("p-0", group="p", uid="p0", cpu="1"),
    ]
    return make_session(objects, GANG)


def victims_of(ssn: Session, point: str = "preemptable") -> list[str]:
    fn = ssn._callbacks[point]["gang"]
    candidates = [t for t in ssn.jobs["default/v"].tasks.values()]
    chosen, vote = fn(session_task(ssn, "p-0"), sorted(candidates, key=lambda t: t.name))
    assert vote == PERMIT
    return [t.name for t in chosen]


def test_only_tasks_beyond_min_available_are_victims() -> None:
    assert victims_of(victim_session(2, 4)) == ["v-0", "v-1"]


def test_no_victims_from_a_gang_at_its_minimum() -> None:
    assert victims_of(victim_session(3, 3)) == []


def test_min_available_one_keeps_its_last_pod() -> None:
    """No exception for ``minAvailable: 1`` (Volcano's rule): a single-pod job is never a
    victim while gang votes, and a job of two gives up only one pod."""
    assert victims_of(victim_session(1, 1)) == []
    assert victims_of(victim_session(1, 2)) == ["v-0"]


def test_preemption_and_reclaim_share_one_rule() -> None:
    for running, expected in [(1, []), (2, ["v-0"]), (4, ["v-0", "v-1", "v-2"])]:
        ssn = victim_session(1, running)
        assert victims_of(ssn, "preemptable") == expected
        assert victims_of(ssn, "reclaimable") == expected


def test_each_victim_job_keeps_its_own_count() -> None:
    objects = [
        node("n1", cpu="16"),
        *[podgroup(name, 2, phase="Running") for name in ("a", "b")],
        *[
            pod(
                f"{name}-{i}",
                group=name,
                uid=f"{name}{i}",
                cpu="1",
                node_name="n1",
                phase="Running",
            )
            for name, count in (("a", 3), ("b", 2))
            for i in range(count)
        ],
        podgroup("p", 1),
        pod("p-0", group="p", uid="p0", cpu="1"),
    ]
    ssn = make_session(objects, GANG)
    candidates = [session_task(ssn, n) for n in ("a-0", "b-0", "a-1", "b-1", "a-2")]
    chosen, vote = ssn._callbacks["preemptable"]["gang"](session_task(ssn, "p-0"), candidates)
    assert vote == PERMIT
    assert [t.name for t in chosen] == ["a-0"]


# -- session close -------------------------------------------------------------------------------


def closed(*objects: dict) -> Session:
    ssn = make_session([node("n1", cpu="2"), *objects], GANG)
    ssn.close()
    return ssn


def test_close_marks_a_ready_job_scheduled() -> None:
    ssn = closed(
        podgroup("pg", 1, phase="Running"),
        pod("pg-0", group="pg", cpu="1", node_name="n1", phase="Running"),
    )
    update = ssn.podgroup_conditions["default/pg"]
    assert (update.type, update.reason, update.message) == ("Scheduled", READY_REASON, "")
    assert "default/pg" not in ssn.unschedulable_events


def test_close_marks_a_job_short_of_its_gang_unschedulable() -> None:
    ssn = closed(
        podgroup("pg", 3, phase="Inqueue"),
        pod("pg-0", group="pg", cpu="1", node_name="n1", phase="Running"),
        pod("pg-1", group="pg", cpu="1"),
        pod("pg-2", group="pg", cpu="1"),
    )
    update = ssn.podgroup_conditions["default/pg"]
    assert update.type == "Unschedulable"
    assert update.reason == "NotEnoughResources"
    assert update.message == (
        "2/3 tasks in gang unschedulable: pod group is not ready, 1 Running, 2 Pending, "
        "3 minAvailable; Pending: 2 Unschedulable"
    )
    assert ssn.unschedulable_events["default/pg"] == update.message


def test_close_judges_gangs_own_objection_as_a_shortfall() -> None:
    # Volcano writes gang's jobValid reasons nowhere: the group is simply not ready.
    ssn = make_session([podgroup("pg", 2), pod("pg-0", group="pg", cpu="1")], GANG)
    ssn.jobs["default/pg"].invalid = ("NotEnoughTasks", "x")
    ssn.close()
    condition = ssn.podgroup_conditions["default/pg"]
    assert (condition.type, condition.reason) == ("Unschedulable", "NotEnoughResources")
    assert condition.message == (
        "2/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 2 minAvailable; "
        "Pending: 1 Unschedulable"
    )


def test_close_leaves_another_plugins_objection_alone() -> None:
    ssn = make_session([podgroup("pg", 2), pod("pg-0", group="pg", cpu="1")], GANG)
    ssn.jobs["default/pg"].invalid = ("NotLeafQueue", "x")
    ssn.close()
    assert "default/pg" not in ssn.podgroup_conditions


def test_close_writes_nothing_for_a_group_without_pods() -> None:
    ssn = make_session([podgroup("pg", 3)], GANG)
    ssn.close()
    assert "default/pg" not in ssn.podgroup_conditions

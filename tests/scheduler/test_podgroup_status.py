"""PodGroup phase, conditions, pod conditions and events written at session close
(reference §1.3 phase rules, §3.3 "Unschedulable reporting", §3.5 gang close)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.clock import format_time
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.conditions import (
    PodGroupConditionUpdate,
    job_fit_error,
    merge_condition,
    podgroup_phase,
)

from .builders import (
    BASIC_CONF,
    Cluster,
    conf,
    job_info,
    node,
    pg_condition,
    pod,
    pod_condition,
    podgroup,
    task,
)

S = TaskStatus


def job_with(min_available: int, *statuses: TaskStatus, phase: str = "Inqueue", node_name="n1"):
    tasks = []
    for i, status in enumerate(statuses):
        t = task(f"t-{i}", cpu="1")
        t.status = status
        if status != S.PENDING:
            t.node_name = node_name
        tasks.append(t)
    return job_info(min_available, tasks, phase=phase)


# -- phase rules (unit) --------------------------------------------------------------------------


def test_phase_running_when_scheduled_reach_min_member() -> None:
    assert podgroup_phase(job_with(2, S.RUNNING, S.BOUND), False) == "Running"


def test_phase_completed_when_every_scheduled_task_finished() -> None:
    assert podgroup_phase(job_with(2, S.SUCCEEDED, S.FAILED), False) == "Completed"


def test_phase_running_when_some_scheduled_tasks_still_run() -> None:
    assert podgroup_phase(job_with(2, S.SUCCEEDED, S.RUNNING), False) == "Running"


def test_phase_unknown_when_running_and_unschedulable_this_session() -> None:
    assert podgroup_phase(job_with(2, S.RUNNING, S.PENDING), True) == "Unknown"


def test_phase_not_unknown_without_running_tasks() -> None:
    assert podgroup_phase(job_with(2, S.BOUND, S.PENDING), True) == "Inqueue"


def test_binding_and_allocated_tasks_are_not_yet_scheduled() -> None:
    assert podgroup_phase(job_with(2, S.BINDING, S.ALLOCATED), False) == "Inqueue"


def test_releasing_tasks_on_a_node_count_as_scheduled() -> None:
    job = job_with(2, S.RUNNING, S.RELEASING)
    assert podgroup_phase(job, False) == "Running"
    unplaced = job_with(2, S.RUNNING, S.RELEASING, node_name="")
    assert podgroup_phase(unplaced, False) == "Inqueue"


def test_phase_inqueue_is_kept_below_min_member() -> None:
    assert podgroup_phase(job_with(3, S.RUNNING, S.PENDING), False) == "Inqueue"


@pytest.mark.parametrize("phase", ["Pending", "Running", "Unknown"])
def test_phase_falls_back_to_pending_below_min_member(phase: str) -> None:
    assert podgroup_phase(job_with(3, S.RUNNING, S.PENDING, phase=phase), False) == "Pending"


def test_job_fit_error_histograms() -> None:
    job = job_with(3, S.RUNNING, S.PENDING, S.PENDING)
    job.fit_errors["uid-t-1"] = "0/1 nodes are unavailable: 1 Insufficient cpu."
    assert job_fit_error(job) == (
        "pod group is not ready, 1 Running, 2 Pending, 3 minAvailable; Pending: 2 Unschedulable"
        ". Origin reason is t-1: 0/1 nodes are unavailable: 1 Insufficient cpu."
    )


def test_job_fit_error_counts_undone_allocations_as_schedulable() -> None:
    job = job_with(3, S.PENDING, S.PENDING, S.PENDING)
    for t in list(job.tasks.values())[:2]:
        t.last_status, t.last_node = S.ALLOCATED, "n1"
    assert job_fit_error(job).endswith("; Pending: 1 Unschedulable, 2 Schedulable")


def test_merge_condition_keeps_an_unchanged_condition() -> None:
    old = [
        {
            "type": "Scheduled",
            "status": "True",
            "transitionID": "old",
            "lastTransitionTime": "T0",
            "reason": "r",
            "message": "",
        }
    ]
    merged = merge_condition(old, PodGroupConditionUpdate("Scheduled", "r", ""), "new", "T1")
    assert merged == old


def test_merge_condition_replaces_a_changed_condition_of_the_same_type() -> None:
    old = [
        {"type": "Unschedulable", "status": "True", "reason": "a", "message": "x"},
        {"type": "Scheduled", "status": "True", "reason": "r", "message": ""},
    ]
    update = PodGroupConditionUpdate("Unschedulable", "NotEnoughResources", "y")
    merged = merge_condition(old, update, "ssn", "T1")
    assert merged[0] == {
        "type": "Unschedulable",
        "status": "True",
        "transitionID": "ssn",
        "lastTransitionTime": "T1",
        "reason": "NotEnoughResources",
        "message": "y",
    }
    assert merged[1] == old[1]


# -- through the scheduler ---------------------------------------------------------------------


async def start(tmp_path: Path, *objects: dict) -> Cluster:
    c = await Cluster(tmp_path, BASIC_CONF).start()
    await c.add(*objects)
    return c


async def phase(c: Cluster, name: str = "pg") -> str:
    return ((await c.pg(name)).get("status") or {}).get("phase", "")


async def test_lifecycle_pending_inqueue_running_completed(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4"),
        podgroup("pg", 2),
        *[pod(f"pg-{i}", group="pg", cpu="1") for i in range(2)],
    )
    assert await phase(c) == ""  # created without status: treated as Pending
    await c.run()
    # Enqueued and bound in one cycle: the pods are bound by the time the status is written,
    # so the group goes straight to Running (Volcano writes Inqueue first, a cycle earlier).
    assert await phase(c) == "Running"
    await c.run()
    assert await phase(c) == "Running"
    for i in range(2):
        await c.set_phase(f"pg-{i}", "Running")
    await c.run()
    status = (await c.pg("pg"))["status"]
    assert status["phase"] == "Running"
    assert status["running"] == 2
    for i in range(2):
        await c.set_phase(f"pg-{i}", "Succeeded")
    await c.run()
    status = (await c.pg("pg"))["status"]
    assert status["phase"] == "Completed"
    assert status["succeeded"] == 2
    assert "running" not in status


async def test_failed_and_succeeded_counts(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4"),
        podgroup("pg", 2),
        *[pod(f"pg-{i}", group="pg", cpu="1") for i in range(3)],
    )
    await c.run()
    await c.set_phase("pg-0", "Succeeded")
    await c.set_phase("pg-1", "Failed")
    await c.set_phase("pg-2", "Running")
    await c.run()
    status = (await c.pg("pg"))["status"]
    assert (status["phase"], status["succeeded"], status["failed"], status["running"]) == (
        "Running",
        1,
        1,
        1,
    )


async def test_ready_gang_gets_scheduled_condition(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1"))
    stats = await c.run()
    condition = pg_condition(await c.pg("pg"), "Scheduled")
    assert condition is not None
    assert condition["status"] == "True"
    assert condition["reason"] == "tasks in gang are ready to be scheduled"
    assert "message" not in condition  # Volcano's field is omitempty
    assert stats.session is not None
    assert condition["transitionID"] == stats.session.uid
    assert condition["lastTransitionTime"] == format_time(stats.session.now)


async def test_unchanged_condition_keeps_its_transition(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1"))
    await c.run()
    first = pg_condition(await c.pg("pg"), "Scheduled")
    await c.run(2)
    assert pg_condition(await c.pg("pg"), "Scheduled") == first


async def test_unschedulable_gang_condition_message(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4", memory="8Gi"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="1", memory="3Gi") for i in range(3)],
    )
    await c.run()
    pg = await c.pg("pg")
    assert pg["status"]["phase"] == "Inqueue"
    condition = pg_condition(pg, "Unschedulable")
    assert condition is not None
    assert condition["status"] == "True"
    assert condition["reason"] == "NotEnoughResources"
    # Two members found room before the third did not: one task short of the gang.
    assert condition["message"] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
        "Pending: 1 Unschedulable, 2 Schedulable"
    )


async def test_unschedulable_pod_conditions_and_events(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="2500m") for i in range(3)],
    )
    await c.run()
    # The queue may have 7.5 of 8 cpus, but no node has room for a third 2.5-cpu pod.
    failed = pod_condition(await c.pod("pg-2"))
    assert failed is not None
    assert (failed["status"], failed["reason"]) == ("False", "Unschedulable")
    assert failed["message"] == "0/2 nodes are unavailable: 2 Insufficient cpu."
    # The others found room; their gang did not.
    placed = [pod_condition(await c.pod(f"pg-{i}")) for i in range(2)]
    assert [(p["status"], p["reason"]) for p in placed if p] == [("False", "Schedulable")] * 2
    assert sorted(p["message"] for p in placed if p) == [
        "Pod default/pg-0 can possibly be assigned to n1, once minAvailable is satisfied",
        "Pod default/pg-1 can possibly be assigned to n2, once minAvailable is satisfied",
    ]
    events = await c.events(reason="FailedScheduling", name="pg-2")
    assert [(e["type"], e["message"]) for e in events] == [
        ("Warning", "0/2 nodes are unavailable: 2 Insufficient cpu.")
    ]
    assert len(await c.events(reason="FailedScheduling", name="pg-0")) == 1
    assert (await c.pg("pg"))["status"]["conditions"][0]["message"] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
        "Pending: 1 Unschedulable, 2 Schedulable. "
        "Origin reason is pg-2: 0/2 nodes are unavailable: 2 Insufficient cpu."
    )


async def test_queue_limit_is_reported_on_the_pod(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4", memory="8Gi"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="1", memory="3Gi") for i in range(3)],
    )
    await c.run()
    # 9Gi asked of an 8Gi cluster: proportion refuses the third pod before any node is tried.
    failed = pod_condition(await c.pod("pg-2"))
    assert failed is not None
    assert failed["reason"] == "Unschedulable"
    # Volcano's gang sentence first (it records no fit error here), Stromboli's detail after.
    assert failed["message"] == (
        "pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, "
        "2 Schedulable; queue default has not enough resources left for the task"
    )


async def test_podgroup_unschedulable_event_counts_pending_pods(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4", memory="8Gi"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="1", memory="3Gi") for i in range(3)],
    )
    await c.run()
    events = await c.events(reason="Unschedulable", name="pg")
    assert len(events) == 1
    assert events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["kind"] == "PodGroup"
    assert events[0]["message"] == (
        "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
        "Pending: 1 Unschedulable, 2 Schedulable"
    )
    # A repeat aggregates into the same event.
    await c.run()
    events = await c.events(reason="Unschedulable", name="pg")
    assert len(events) == 1
    assert events[0]["count"] == 2


async def test_pod_condition_written_once_while_unchanged(tmp_path: Path) -> None:
    c = await start(
        tmp_path, node("n1", cpu="1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="2")
    )
    await c.run()
    first = await c.pod("pg-0")
    await c.run(2)
    again = await c.pod("pg-0")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert len(await c.events(reason="FailedScheduling", name="pg-0")) == 1


async def test_pod_condition_message_names_every_reason(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="1", memory="1Gi"),
        node("n2", cpu="8", memory="1Gi"),
        podgroup("pg", 1),
        pod("pg-0", group="pg", cpu="2", memory="2Gi"),
    )
    await c.run()
    condition = pod_condition(await c.pod("pg-0"))
    assert condition is not None
    assert condition["message"] == (
        "0/2 nodes are unavailable: 1 Insufficient cpu, 2 Insufficient memory."
    )


async def test_pending_extra_pod_of_a_running_job_gets_a_condition(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, conf("enqueue, allocate", ["priority", "gang"], ["drf"])).start()
    await c.add(
        node("n1", cpu="2"),
        podgroup("pg", 1),
        *[pod(f"pg-{i}", group="pg", cpu="2") for i in range(2)],
    )
    await c.run(2)
    assert await phase(c) == "Running"
    condition = pod_condition(await c.pod("pg-1"))
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == "0/1 nodes are unavailable: 1 Insufficient cpu."


async def test_untried_pod_of_a_running_job_gets_the_gang_sentence(tmp_path: Path) -> None:
    # proportion marks the queue overused once it holds the whole cluster, so the second pod
    # is never tried: no fit error, so Volcano's JobInfo.FitError (of a ready gang) it is.
    c = await start(
        tmp_path,
        node("n1", cpu="2"),
        podgroup("pg", 1),
        *[pod(f"pg-{i}", group="pg", cpu="2") for i in range(2)],
    )
    await c.run(2)
    condition = pod_condition(await c.pod("pg-1"))
    assert condition is not None
    assert (condition["reason"], condition["message"]) == (
        "Unschedulable",
        "pod group is ready, 1 Bound, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable",
    )


async def test_unknown_phase_when_running_group_loses_its_gang(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="2"),
        podgroup("pg", 2, phase="Running"),
        pod("pg-0", group="pg", cpu="2", node_name="n1", phase="Running"),
        pod("pg-1", group="pg", cpu="2"),
    )
    await c.run()
    pg = await c.pg("pg")
    assert pg["status"]["phase"] == "Unknown"
    assert pg_condition(pg, "Unschedulable") is not None


async def test_bound_pods_get_no_unschedulable_condition(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1"))
    await c.run()
    condition = pod_condition(await c.pod("pg-0"))
    assert condition is not None
    assert condition["status"] == "True"  # written by the binding
    assert await c.events(reason="FailedScheduling") == []
    assert await c.events(reason="Unschedulable") == []


async def test_podgroup_status_not_rewritten_when_unchanged(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1"))
    await c.run(2)
    version = (await c.pg("pg"))["metadata"]["resourceVersion"]
    stats = await c.run()
    assert (await c.pg("pg"))["metadata"]["resourceVersion"] == version
    assert stats.status_writes == 0


async def test_pipelined_pod_is_nominated_to_the_node_being_freed(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1", cpu="2"))
    leaving = pod("old", cpu="2", node_name="n1", phase="Running", scheduler="default-scheduler")
    leaving["metadata"]["finalizers"] = ["example.com/hold"]
    await c.add(leaving)
    await c.store.delete("v1", "Pod", "old", "default")  # Releasing: deleting, still running
    await c.add(podgroup("pg", 1), pod("pg-0", group="pg", cpu="2"))
    stats = await c.run()
    assert stats.bound == 0
    waiting = await c.pod("pg-0")
    assert waiting["status"]["nominatedNodeName"] == "n1"
    condition = pod_condition(waiting)
    assert condition is not None
    assert (condition["reason"], condition["message"]) == (
        "Unschedulable",
        "Pod default/pg-0 can possibly be assigned to n1, "
        "once resource is released and minAvailable is satisfied",
    )
    message = pg_condition(await c.pg("pg"), "Unschedulable")["message"]  # type: ignore[index]
    assert message == (
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pipelined, 1 minAvailable"
    )
    # Once the old pod is gone, the pipelined pod is bound there.
    old = await c.pod("old")
    old["metadata"]["finalizers"] = []
    await c.store.update(old)
    assert (await c.run()).bound == 1
    assert await c.node_of("pg-0") == "n1"

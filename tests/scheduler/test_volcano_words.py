"""What the scheduler writes on objects, word for word as Volcano v1.16 writes it (issue 16):
pending pods' reasons, PodGroup events and conditions, enqueue refusals, queue status."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.conditions import (
    is_queue_refusal,
    job_fit_error,
    queue_refusal,
)
from stromboli.core.scheduler.util.inqueue import format_resource_names, short_resources

from .builders import (
    BASIC_CONF,
    Cluster,
    job_info,
    node,
    pg_condition,
    pod,
    pod_condition,
    podgroup,
    queue,
    task,
)

GANG_SHORT_OF_QUEUE = (
    "pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable"
)


async def start(tmp_path: Path, *objects: dict, config: str = BASIC_CONF) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(*objects)
    return c


async def gang_short_of_queue(tmp_path: Path) -> Cluster:
    """Three 3Gi pods of a gang in an 8Gi cluster: two find room, the queue refuses the third."""
    return await start(
        tmp_path,
        node("n1", cpu="4", memory="8Gi"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="1", memory="3Gi") for i in range(3)],
    )


# -- 1. pending pods' reason -----------------------------------------------------------------------


async def test_gang_member_leads_with_volcanos_sentence(tmp_path: Path) -> None:
    c = await gang_short_of_queue(tmp_path)
    await c.run()
    condition = pod_condition(await c.pod("pg-2"))
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == (
        f"{GANG_SHORT_OF_QUEUE}; queue default has not enough resources left for the task"
    )
    assert condition["message"].startswith(GANG_SHORT_OF_QUEUE)
    events = await c.events(reason="FailedScheduling", name="pg-2")
    assert [(e["type"], e["message"]) for e in events] == [("Warning", condition["message"])]


async def test_pod_left_by_queue_shares_gets_the_gang_sentence(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="8"),
        queue("small", capability={"cpu": "1"}),
        podgroup("pg", 1, queue="small", min_resources={"cpu": "2"}),
        pod("pg-0", group="pg", cpu="2"),
    )
    await c.run()
    pg = await c.pg("pg")
    assert pg["status"]["phase"] == "Pending"
    condition = pod_condition(await c.pod("pg-0"))
    assert condition is not None
    assert condition["message"] == (
        "pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable"
    )


async def test_origin_reason_names_the_first_pod_that_fitted_no_node(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="2500m") for i in range(3)],
    )
    await c.run()
    condition = pg_condition(await c.pg("pg"), "Unschedulable")
    assert condition is not None
    assert condition["message"] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
        "Pending: 1 Unschedulable, 2 Schedulable. "
        "Origin reason is pg-2: 0/2 nodes are unavailable: 2 Insufficient cpu."
    )
    # The pod that fitted no node says so itself.
    own = pod_condition(await c.pod("pg-2"))
    assert own is not None
    assert own["message"] == "0/2 nodes are unavailable: 2 Insufficient cpu."


# -- 2. PodGroup events ----------------------------------------------------------------------------


async def test_ready_group_gets_a_normal_scheduled_event(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1"))
    await c.run()
    events = await c.events(reason="Scheduled", name="pg")
    assert [(e["type"], e["involvedObject"]["kind"], e["message"]) for e in events] == [
        ("Normal", "PodGroup", "pod group is ready")
    ]
    # Recorded when the group's status changes, not every cycle.
    await c.run(3)
    events = await c.events(reason="Scheduled", name="pg")
    assert [e["count"] for e in events] == [1]


async def test_unready_group_gets_a_warning_unschedulable_event(tmp_path: Path) -> None:
    c = await gang_short_of_queue(tmp_path)
    await c.run()
    events = await c.events(reason="Unschedulable", name="pg")
    assert [(e["type"], e["involvedObject"]["kind"], e["message"]) for e in events] == [
        ("Warning", "PodGroup", f"3/3 tasks in gang unschedulable: {GANG_SHORT_OF_QUEUE}")
    ]
    assert not await c.events(reason="Scheduled", name="pg")


# -- 3. a group whose pods do not exist yet --------------------------------------------------------


async def test_group_without_pods_gets_no_condition(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 3))
    await c.run(2)
    pg = await c.pg("pg")
    assert pg["status"]["phase"] == "Inqueue"
    assert "conditions" not in pg["status"]
    events = await c.events(reason="Unschedulable", name="pg")
    assert [(e["type"], e["message"]) for e in events] == [
        ("Warning", "0/0 tasks in gang unschedulable: pod group is not ready, 3 minAvailable")
    ]


async def test_group_short_of_pods_reports_not_enough_resources(tmp_path: Path) -> None:
    # Gang's jobValid refuses the job (2 pods for minMember 3); Volcano writes that reason
    # nowhere and judges the group at close like any unready one.
    c = await start(
        tmp_path,
        node("n1"),
        podgroup("pg", 3),
        *[pod(f"pg-{i}", group="pg", cpu="1") for i in range(2)],
    )
    await c.run()
    conditions = (await c.pg("pg"))["status"]["conditions"]
    assert [(x["type"], x["reason"]) for x in conditions] == [
        ("Unschedulable", "NotEnoughResources")
    ]


async def test_one_pod_group_carries_only_scheduled(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 1))
    await c.run()
    await c.add(pod("pg-0", group="pg", cpu="1"))
    await c.run()
    conditions = (await c.pg("pg"))["status"]["conditions"]
    assert [x["type"] for x in conditions] == ["Scheduled"]


# -- 4. enqueue refusals ---------------------------------------------------------------------------


async def test_proportion_refusal_is_a_normal_event_naming_the_resource(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="8", memory="8Gi"),
        queue("small", capability={"cpu": "1", "memory": "8Gi"}),
        podgroup("pg", 1, queue="small", min_resources={"cpu": "2", "memory": "1Gi"}),
    )
    await c.run()
    refusals = [
        e for e in await c.events(reason="Unschedulable", name="pg") if e["type"] == "Normal"
    ]
    assert [e["message"] for e in refusals] == [
        "queue resource quota insufficient: insufficient cpu"
    ]


async def test_overcommit_refusal_is_normal_and_names_every_short_resource(
    tmp_path: Path,
) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="4", memory="4Gi"),
        podgroup("big", 1, min_resources={"cpu": "5", "memory": "5Gi"}),
    )
    await c.run()
    refusals = [
        e for e in await c.events(reason="Unschedulable", name="big") if e["type"] == "Normal"
    ]
    assert [e["message"] for e in refusals] == [
        "resource in cluster is overused: overused cpu, overused memory"
    ]


def test_refusal_names_cpu_then_memory_then_others() -> None:
    request = Resource({"nvidia.com/gpu": 1, "memory": 1, "cpu": 1000, "pods": 1})
    short = short_resources(request, Resource(), request)
    assert short == ["cpu", "memory", "nvidia.com/gpu"]
    assert format_resource_names("queue resource quota insufficient", "insufficient", short) == (
        "queue resource quota insufficient: insufficient cpu, insufficient memory, "
        "insufficient nvidia.com/gpu"
    )
    assert format_resource_names("resource in cluster is overused", "overused", []) == (
        "resource in cluster is overused"
    )


def test_only_resources_past_the_room_are_named() -> None:
    request = Resource({"cpu": 2000, "memory": 2})
    assert short_resources(request, Resource({"cpu": 1000, "memory": 4}), request) == ["cpu"]
    assert short_resources(request, Resource({"cpu": 4000, "memory": 4}), request) == []


async def test_quota_names_in_min_resources_do_not_block_admission(tmp_path: Path) -> None:
    # Volcano's controller writes requests.cpu, count/pods, ...; the scheduler reads past them.
    quota = {
        "cpu": "1",
        "memory": "1Gi",
        "pods": "1",
        "count/pods": "1",
        "requests.cpu": "1",
        "requests.memory": "1Gi",
        "limits.cpu": "2",
    }
    c = await start(tmp_path, node("n1"), podgroup("pg", 1, min_resources=quota))
    await c.run()
    assert (await c.pg("pg"))["status"]["phase"] == "Inqueue"


# -- 7. queue status -------------------------------------------------------------------------------


async def test_idle_default_queue_shows_zero_cpu_and_memory(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"))
    await c.run()
    status = (await c.queue("default"))["status"]
    assert status["allocated"] == {"cpu": "0", "memory": "0"}
    assert status["reservation"] == {}


async def test_queue_allocated_counts_pods(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="8", memory="8Gi"),
        podgroup("pg", 2),
        *[pod(f"pg-{i}", group="pg", cpu="1", memory="1Gi") for i in range(2)],
    )
    await c.run()
    allocated = (await c.queue("default"))["status"]["allocated"]
    assert allocated == {"cpu": "2", "memory": "2Gi", "pods": "2"}


# -- 8. the Scheduled condition --------------------------------------------------------------------


async def test_scheduled_condition_has_no_message_field(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1"))
    await c.run()
    condition = pg_condition(await c.pg("pg"), "Scheduled")
    assert condition is not None
    assert condition["reason"] == "tasks in gang are ready to be scheduled"
    assert "message" not in condition


# -- the sentence itself (JobInfo.FitError) --------------------------------------------------------

_STATUSES = [
    TaskStatus.PENDING,
    TaskStatus.BOUND,
    TaskStatus.RUNNING,
    TaskStatus.SUCCEEDED,
    TaskStatus.FAILED,
    TaskStatus.RELEASING,
]


@given(
    statuses=st.lists(st.sampled_from(_STATUSES), max_size=30),
    min_available=st.integers(min_value=0, max_value=40),
    undone=st.integers(min_value=0, max_value=30),
)
def test_fit_error_is_volcanos_sorted_histogram(
    statuses: list[TaskStatus], min_available: int, undone: int
) -> None:
    tasks = []
    for i, status in enumerate(statuses):
        t = task(f"t-{i}", cpu="1")
        t.status = status
        if status != TaskStatus.PENDING:
            t.node_name = "n1"
        tasks.append(t)
    pending = [t for t in tasks if t.status == TaskStatus.PENDING]
    for t in pending[:undone]:
        t.last_status, t.last_node = TaskStatus.ALLOCATED, "n1"
    job = job_info(min_available, tasks)
    message = job_fit_error(job)
    head, _, tail = message.partition("; Pending: ")
    detail, _, histogram = head.partition(", ")
    assert detail == ("pod group is ready" if job.is_ready() else "pod group is not ready")
    parts = histogram.split(", ")
    # Go's sort.Strings over "<count> <label>" texts, minAvailable always present.
    assert parts == sorted(parts)
    counts = {p.split(" ", 1)[1]: int(p.split(" ", 1)[0]) for p in parts}
    assert counts.pop("minAvailable") == min_available
    assert sum(counts.values()) == len(tasks)
    assert all(n > 0 for n in counts.values())
    if pending:
        reasons = dict((p.split(" ", 1)[1], int(p.split(" ", 1)[0])) for p in tail.split(", "))
        assert reasons.get("Schedulable", 0) == min(undone, len(pending))
        assert sum(reasons.values()) == len(pending)
    else:
        assert not tail


def test_queue_refusal_is_recognised() -> None:
    assert is_queue_refusal(queue_refusal("research"))
    assert not is_queue_refusal("0/2 nodes are unavailable: 2 Insufficient cpu.")
    assert not is_queue_refusal("queue research is closed")


async def test_a_gated_pod_keeps_the_api_servers_condition(tmp_path: Path) -> None:
    gated = pod("pg-0", group="pg", cpu="1")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    gated["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }
        ],
    }
    c = await start(tmp_path, node("n1"), podgroup("pg", 1), gated)
    await c.run(2)
    condition = pod_condition(await c.pod("pg-0"))
    assert condition is not None
    assert condition["reason"] == "SchedulingGated"
    assert not await c.events(reason="FailedScheduling", name="pg-0")

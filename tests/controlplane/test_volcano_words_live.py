"""Volcano's words on a real API server (issue 16): `stromboli scheduler` and `stromboli
controller` as subprocesses write the conditions, events, minResources and queue status that
Volcano writes, so ``kubectl describe`` reads the same.

Each test uses a queue of its own (cluster-scoped, deleted after), so what other tests leave
running on the shared control plane does not change the figures.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from stromboli.core.admission.jobsize import MAX_JOB_REPLICAS
from stromboli.core.cluster.errors import NotFoundError

from .jobs_live import (  # noqa: F401  (fixtures)
    PODGROUP,
    QUEUE,
    Live,
    live_fixture,
    stack_fixture,
    task,
    vcjob,
)

GANG_SENTENCE = (
    "pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable"
)


@pytest.fixture
async def queue(live: Live) -> AsyncIterator[str]:
    """A queue of the test's own, capped at 100m cpu, Open before the test starts."""
    name = f"vw-{uuid.uuid4().hex[:8]}"
    await live.store.create(
        {
            "apiVersion": QUEUE[0],
            "kind": QUEUE[1],
            "metadata": {"name": name},
            "spec": {"weight": 1, "capability": {"cpu": "100m"}, "reclaimable": True},
        }
    )
    await live.wait(
        lambda: live.store.get(*QUEUE, name),
        lambda q: (q.get("status") or {}).get("state") == "Open",
        f"queue {name} Open",
    )
    try:
        yield name
    finally:
        with contextlib.suppress(NotFoundError):
            await live.store.delete(*QUEUE, name)


def pod(name: str, namespace: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "volcano",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}},
                }
            ],
        },
    }


async def podgroup_named(live: Live, prefix: str) -> dict[str, Any]:
    groups = await live.wait(
        live.podgroups,
        lambda pgs: any(pg["metadata"]["name"].startswith(prefix) for pg in pgs),
        f"PodGroup of {prefix}",
    )
    (found,) = [pg for pg in groups if pg["metadata"]["name"].startswith(prefix)]
    return found


async def test_gang_member_refused_by_its_queue_reads_as_in_volcano(live: Live, queue: str) -> None:
    await live.store.create(
        {
            "apiVersion": PODGROUP[0],
            "kind": PODGROUP[1],
            "metadata": {"name": "gang", "namespace": live.ns},
            "spec": {"minMember": 3, "queue": queue},
        }
    )
    for i in range(3):
        await live.store.create(pod(f"gang-{i}", live.ns, "gang"))
    refused = f"{GANG_SENTENCE}; queue {queue} has not enough resources left for the task"

    async def scheduled_conditions() -> dict[str, tuple[str, str]]:
        out = {}
        for name, obj in (await live.pods()).items():
            for c in (obj.get("status") or {}).get("conditions") or ():
                if c["type"] == "PodScheduled":
                    out[name] = (c.get("reason", ""), c.get("message", ""))
        return out

    conditions = await live.wait(
        scheduled_conditions,
        lambda seen: (
            sorted(r for r, _ in seen.values()) == ["Schedulable", "Schedulable", "Unschedulable"]
        ),
        "two members Schedulable, one Unschedulable",
    )
    assert [m for r, m in conditions.values() if r == "Unschedulable"] == [refused]
    (unschedulable_pod,) = [n for n, (r, _) in conditions.items() if r == "Unschedulable"]
    failed = ("Warning", "FailedScheduling", refused)
    await live.wait(lambda: live.events(unschedulable_pod), lambda seen: failed in seen, "event")
    # The group's events are written after its pods' conditions in the same cycle.
    gang_event = ("Warning", "Unschedulable", f"3/3 tasks in gang unschedulable: {GANG_SENTENCE}")
    await live.wait(lambda: live.events("gang"), lambda seen: gang_event in seen, "group event")
    pg = await live.store.get(*PODGROUP, "gang", live.ns)
    (condition,) = pg["status"]["conditions"]
    assert (condition["type"], condition["reason"], condition["message"]) == (
        "Unschedulable",
        "NotEnoughResources",
        f"1/3 tasks in gang unschedulable: {GANG_SENTENCE}",
    )


async def test_vcjob_waiting_for_its_queue_keeps_a_bare_pending_group(
    live: Live, queue: str
) -> None:
    await live.create(vcjob("wide", task("worker", 3), queue=queue))
    pg = await podgroup_named(live, "wide-")
    name = pg["metadata"]["name"]
    quota_refusal = (
        "Normal",
        "Unschedulable",
        "queue resource quota insufficient: insufficient cpu",
    )
    await live.wait(
        lambda: live.events(name), lambda seen: quota_refusal in seen, "proportion's refusal"
    )
    assert (
        "Warning",
        "Unschedulable",
        "0/0 tasks in gang unschedulable: pod group is not ready, 3 minAvailable",
    ) in await live.events(name)
    pg = await live.store.get(*PODGROUP, name, live.ns)
    assert pg["status"] == {"phase": "Pending"}
    assert pg["spec"]["minResources"] == {
        "count/pods": "3",
        "cpu": "150m",
        "memory": "48Mi",
        "pods": "3",
        "requests.cpu": "150m",
        "requests.memory": "48Mi",
    }
    assert "PodGroupPending" not in await live.reasons("wide")
    assert await live.pods("wide") == {}


async def test_one_pod_job_reads_as_in_volcano(live: Live) -> None:
    await live.create(vcjob("solo", task("main", 1)))
    await live.wait_running_pods("solo", 1)
    pg = await podgroup_named(live, "solo-")
    name = pg["metadata"]["name"]
    await live.wait(
        lambda: live.events(name),
        lambda seen: ("Normal", "Scheduled", "pod group is ready") in seen,
        "PodGroup Scheduled event",
    )
    pg = await live.store.get(*PODGROUP, name, live.ns)
    conditions = pg["status"]["conditions"]
    assert [(c["type"], c["reason"]) for c in conditions] == [
        ("Scheduled", "tasks in gang are ready to be scheduled")
    ]
    assert "message" not in conditions[0]
    assert "PodGroupPending" not in await live.reasons("solo")


async def test_queue_status_as_volcano_writes_it(live: Live, queue: str) -> None:
    status = await live.wait(
        lambda: live.store.get(*QUEUE, queue),
        lambda q: "allocated" in (q.get("status") or {}),
        f"queue {queue} status.allocated",
    )
    assert status["status"]["allocated"] == {"cpu": "0", "memory": "0"}
    assert status["status"]["reservation"] == {}
    await live.create(vcjob("fits", task("worker", 2), queue=queue))
    await live.wait_running_pods("fits", 2)
    await live.wait(
        lambda: live.store.get(*QUEUE, queue),
        lambda q: q["status"]["allocated"] == {"cpu": "100m", "memory": "32Mi", "pods": "2"},
        f"queue {queue} allocated with its pods",
    )


async def test_overcommit_refusal_is_normal_and_names_the_resource(live: Live) -> None:
    await live.store.create(
        {
            "apiVersion": PODGROUP[0],
            "kind": PODGROUP[1],
            "metadata": {"name": "huge", "namespace": live.ns},
            "spec": {"minMember": 1, "minResources": {"cpu": "100000"}},
        }
    )
    await live.wait(
        lambda: live.events("huge"),
        lambda seen: (
            ("Normal", "Unschedulable", "resource in cluster is overused: overused cpu") in seen
        ),
        "overcommit's refusal",
    )


async def test_controller_leaves_a_job_of_two_billion_pods_unstarted(live: Live) -> None:
    # The test control plane runs no webhook: the job is stored as written.
    job = vcjob("huge", task("worker", 1))
    job["spec"]["tasks"][0]["replicas"] = 2**31 - 1
    await live.create(job)
    await live.create(vcjob("fine", task("worker", 1)))
    warnings = await live.wait(
        lambda: live.events("huge"),
        lambda seen: any(reason == "InvalidSpec" for _, reason, _ in seen),
        "InvalidSpec warning on the job",
    )
    (warning,) = [(t, m) for t, r, m in warnings if r == "InvalidSpec"]
    assert warning[0] == "Warning"
    assert "spec.tasks[0].replicas" in warning[1]
    assert f"more than the {MAX_JOB_REPLICAS} one job may have" in warning[1]
    await live.wait_running_pods("fine", 1)
    assert await live.pods("huge") == {}
    assert not [pg for pg in await live.podgroups() if pg["metadata"]["name"].startswith("huge-")]

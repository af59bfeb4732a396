"""What the job controller writes, as Volcano writes it (issue 16): the PodGroup's
``minResources`` (a pod's quota usage), ``PodGroupPending`` only for a group that is really
pending, and a job too large to start refused with a Warning naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.admission.jobsize import MAX_JOB_REPLICAS
from stromboli.core.api import constants as k
from stromboli.core.api.quantity import QuantityError
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import ConflictError
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.job.controller import JobController
from stromboli.core.scheduler.api.quota import pod_quota_usage, quota_list

from .jobkit import Harness, Stack, node, phase, task, vcjob

QUEUE = (k.SCHEDULING_V1BETA1, "Queue")


def quota_of(spec: dict[str, Any]) -> dict[str, str]:
    return quota_list(pod_quota_usage(spec))


def container(requests: dict | None = None, limits: dict | None = None, **extra: Any) -> dict:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources, **extra}


# -- 6. minResources: one pod's quota usage ------------------------------------------------------


def test_requests_count_twice_and_the_pod_counts_as_pods_and_count_pods() -> None:
    spec = {"containers": [container({"cpu": "1", "memory": "1Gi"})]}
    assert quota_of(spec) == {
        "count/pods": "1",
        "cpu": "1",
        "memory": "1Gi",
        "pods": "1",
        "requests.cpu": "1",
        "requests.memory": "1Gi",
    }


def test_limits_are_counted_as_limits_only() -> None:
    # The template is not defaulted: a limit does not stand in for a missing request.
    spec = {"containers": [container({"cpu": "500m"}, {"cpu": "2", "memory": "2Gi"})]}
    assert quota_of(spec) == {
        "count/pods": "1",
        "cpu": "500m",
        "limits.cpu": "2",
        "limits.memory": "2Gi",
        "pods": "1",
        "requests.cpu": "500m",
    }


def test_ephemeral_storage_hugepages_and_extended_resources() -> None:
    spec = {
        "containers": [
            container(
                {
                    "ephemeral-storage": "1Gi",
                    "hugepages-2Mi": "4Mi",
                    "nvidia.com/gpu": "2",
                    "example.kubernetes.io/native": "1",
                }
            )
        ]
    }
    assert quota_of(spec) == {
        "count/pods": "1",
        "ephemeral-storage": "1Gi",
        "hugepages-2Mi": "4Mi",
        "nvidia.com/gpu": "2",
        "pods": "1",
        "requests.ephemeral-storage": "1Gi",
        "requests.hugepages-2Mi": "4Mi",
        "requests.nvidia.com/gpu": "2",
    }


def test_init_containers_sidecars_and_overhead() -> None:
    spec = {
        "containers": [container({"cpu": "1"}, {"cpu": "1"})],
        "initContainers": [
            container({"cpu": "500m"}, restartPolicy="Always"),  # a sidecar: runs throughout
            container({"cpu": "3"}),  # alone (with the sidecar started before it): 3.5
        ],
        "overhead": {"cpu": "100m", "memory": "64Mi"},
    }
    usage = quota_of(spec)
    assert usage["cpu"] == usage["requests.cpu"] == "3600m"
    assert usage["memory"] == "64Mi"
    # Overhead goes onto limits that are set (cpu), not onto missing ones (memory).
    assert usage["limits.cpu"] == "1100m"
    assert "limits.memory" not in usage


def test_a_negative_request_is_refused_naming_the_field() -> None:
    spec = {"containers": [container({"cpu": "-1"})]}
    with pytest.raises(QuantityError, match=r"containers\[0\]\.resources\.requests\.cpu"):
        pod_quota_usage(spec)


@given(
    cpu=st.integers(min_value=1, max_value=64_000),
    memory=st.integers(min_value=1, max_value=1 << 40),
    count=st.integers(min_value=1, max_value=1000),
)
def test_usage_scales_with_the_pod_count(cpu: int, memory: int, count: int) -> None:
    spec = {"containers": [container({"cpu": f"{cpu}m", "memory": str(memory)})]}
    one = pod_quota_usage(spec)
    many = pod_quota_usage(spec).multi(count)
    listed = quota_list(many)
    assert listed["pods"] == listed["count/pods"] == str(count)
    assert listed["cpu"] == listed["requests.cpu"]
    assert listed["memory"] == listed["requests.memory"]
    assert many.get("cpu") == pytest.approx(one.get("cpu") * count)


async def test_vcjob_podgroup_carries_the_quota_usage_of_its_gang() -> None:
    stack = await Stack().start(node("node-0"))
    await stack.store.create(vcjob("j", task("worker", 3, cpu="1")))
    await stack.run(5, until=lambda: stack.phase_is("j", "Running"))
    groups = (await stack.store.list("scheduling.volcano.sh/v1beta1", "PodGroup")).items
    assert [pg["spec"]["minResources"] for pg in groups] == [
        {
            "count/pods": "3",
            "cpu": "3",
            "memory": "3Gi",
            "pods": "3",
            "requests.cpu": "3",
            "requests.memory": "3Gi",
        }
    ]


# -- 3. PodGroupPending only for a group that is really pending ----------------------------------


async def pending_events(stack: Stack) -> list[dict[str, Any]]:
    events = (await stack.store.list("v1", "Event")).items
    return [e for e in events if e["reason"] == "PodGroupPending"]


@pytest.mark.parametrize("replicas", [1, 3])
async def test_job_that_starts_collects_no_podgroup_pending_events(replicas: int) -> None:
    stack = await Stack().start(node("node-0"))
    await stack.store.create(vcjob("j", task("worker", replicas)))
    await stack.run(6)
    assert phase(await stack.job("j")) == "Running"
    assert await pending_events(stack) == []
    groups = (await stack.store.list("scheduling.volcano.sh/v1beta1", "PodGroup")).items
    assert [[c["type"] for c in pg["status"]["conditions"]] for pg in groups] == [["Scheduled"]]


async def test_job_waiting_for_admission_has_a_bare_pending_group() -> None:
    stack = await Stack().start(node("node-0", cpu="2"))
    await stack.store.create(vcjob("j", task("worker", 3)))
    await stack.run(5)
    groups = (await stack.store.list("scheduling.volcano.sh/v1beta1", "PodGroup")).items
    assert [pg["status"] for pg in groups] == [{"phase": "Pending"}]
    assert await pending_events(stack) == []


# -- the replica bound (hostile input) ------------------------------------------------------------


async def test_controller_refuses_a_stored_job_of_two_billion_pods() -> None:
    h = await Harness().start()
    await h.create(vcjob("fine", task("worker", 2)))
    huge = vcjob("j", task("worker", 2**31 - 1), mutate=False)
    huge["spec"]["minAvailable"] = 1
    await h.create(huge)
    await h.step()
    warnings = [e for e in await h.events("InvalidSpec") if e["involvedObject"]["name"] == "j"]
    assert warnings
    assert warnings[0]["type"] == "Warning"
    assert "spec.tasks[0].replicas" in warnings[0]["message"]
    assert f"more than the {MAX_JOB_REPLICAS} one job may have" in warnings[0]["message"]
    assert await h.podgroup("j") is None
    assert await h.pods("j") == {}
    job = await h.job("j")
    assert phase(job) == "Pending"
    assert "spec.tasks[0].replicas" in job["status"]["state"]["message"]
    # The other job is untouched.
    assert await h.podgroup("fine") is not None


async def test_controller_refuses_tasks_that_sum_past_the_bound() -> None:
    h = await Harness().start()
    each = MAX_JOB_REPLICAS // 2 + 1
    job = vcjob("j", task("a", each), task("b", each), mutate=False)
    job["spec"]["minAvailable"] = 1
    await h.create(job)
    warnings = await h.events("InvalidSpec")
    assert len(warnings) == 1
    assert "spec.tasks[1].replicas" in warnings[0]["message"]
    assert f"{2 * each} pods in all" in warnings[0]["message"]
    assert await h.podgroup("j") is None


async def test_a_job_at_the_bound_is_accepted() -> None:
    h = await Harness().start()
    job = vcjob("j", task("a", MAX_JOB_REPLICAS), mutate=False)
    job["spec"]["minAvailable"] = 1
    await h.create(job)
    assert await h.events("InvalidSpec") == []
    assert await h.podgroup("j") is not None


# -- 7. queue status: the state write survives the scheduler's allocated write ------------------


class SchedulerWritesFirst(MemoryStore):
    """A store where, as on a live cluster, the scheduler writes a new queue's ``allocated``
    between the controller's read and its write of the state (once per queue)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock, seed=1)
        self.raced: set[str] = set()

    async def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Queue" and name not in self.raced:
            self.raced.add(name)
            current = await self.get(*QUEUE, name)
            status = {"allocated": {"cpu": "0", "memory": "0"}, "reservation": {}}
            await super().update_status({**current, "status": status})
            raise ConflictError(f"queue {name} was modified")
        return await super().update_status(obj)


async def test_queue_opens_although_the_scheduler_wrote_its_status_first() -> None:
    clock = VirtualClock()
    store = SchedulerWritesFirst(clock)
    controller = JobController(store, clock)
    await store.create(
        {"apiVersion": QUEUE[0], "kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 1}}
    )
    await controller.start()
    await controller.step()
    status = (await store.get(*QUEUE, "q"))["status"]
    assert status == {
        "allocated": {"cpu": "0", "memory": "0"},
        "reservation": {},
        "state": "Open",
    }

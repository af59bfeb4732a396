"""Volcano's ``test/e2e/schedulingaction/allocate.go``, ``enqueue.go`` and ``guarantee.go``,
case by case, on the in-process cluster of :mod:`.volcano_e2e` (Volcano's CI scheduler
configuration; workers filled by placeholders down to ``NodesNumLimit`` free slots).

Several upstream cases only check that a job's pods exist and are Pending
(``WaitJobPending``), which holds as soon as the job controller creates them; each test here
checks that, and then what the scheduler goes on to do with them."""

from __future__ import annotations

from pathlib import Path

from .builders import SCHEDULING, pod
from .volcano_e2e import CI_ACTIONS, E2ECluster, ci_conf, e2e_queue, task_spec, vcjob

SLOT = ("2", "2048Mi")


async def setup(
    tmp_path: Path, nodes: int, *, config: str | None = None, queues: list | None = None
) -> E2ECluster:
    c = E2ECluster(tmp_path, config or ci_conf())
    await c.start(queues=queues or [])
    await c.limit_nodes(nodes, *SLOT)
    return c


def job(name: str, cpu: str, memory: str, queue_name: str | None = None, **task_args) -> dict:
    return vcjob(
        name,
        task_spec(1, cpu=cpu, memory=memory, **task_args),
        min_available=1,
        queue_name=queue_name,
    )


async def ready_job(c: E2ECluster, spec: dict) -> None:
    """Create the job and wait for ``minAvailable`` of its pods to run (``WaitJobReady``)."""
    await c.create(spec)
    name, count = spec["metadata"]["name"], spec["spec"]["minAvailable"]
    assert await c.wait(lambda: _ready(c, name, count)), f"{name} did not run"


async def pending_job(c: E2ECluster, spec: dict) -> None:
    """Create the job and wait for ``minAvailable`` Pending pods (``WaitJobPending``)."""
    await c.create(spec)
    name, count = spec["metadata"]["name"], spec["spec"]["minAvailable"]
    assert await c.wait(lambda: _pending(c, name, count)), f"{name} has no pending pods"


# -- allocate.go ----------------------------------------------------------------------------------


async def test_allocate_work_when_resource_is_enough(tmp_path: Path) -> None:
    """It("allocate work when resource is enough")"""
    c = await setup(tmp_path, 2)
    await ready_job(c, job("low", "500m", "512Mi"))
    await ready_job(c, job("high", "1", "1024Mi"))


async def test_allocate_dont_work_when_resource_is_not_enough(tmp_path: Path) -> None:
    """It("allocate don't work when resource is NOT enough")"""
    c = await setup(tmp_path, 1)
    await ready_job(c, job("middle", "1", "1024Mi"))
    await ready_job(c, job("low", "500m", "512Mi"))
    await pending_job(c, job("high", "3", "3072Mi"))
    await c.step(10)
    assert await c.pending("high") == 1
    assert await c.pg_phase("high") == "Inqueue"


async def test_allocate_dont_work_when_podgroup_is_pending(tmp_path: Path) -> None:
    """It("allocate don't work when podgroup is pending") (skipped upstream: a vcjob makes its
    own PodGroup anyway). A pod of a PodGroup that enqueue leaves Pending (its
    ``minResources`` exceed the cluster) is not allocated, while another job runs."""
    c = await setup(tmp_path, 2)
    pending_pg = {
        "apiVersion": SCHEDULING,
        "kind": "PodGroup",
        "metadata": {"name": "pending-pg", "namespace": "e2e"},
        "spec": {"minMember": 1, "minResources": {"cpu": "30"}},
    }
    await c.create(pending_pg)
    await ready_job(c, job("j1", "500m", "512Mi"))
    await c.create(pod("j2-0", namespace="e2e", group="pending-pg", cpu="500m", memory="512Mi"))
    await c.step(10)
    obj = await c.store.get("v1", "Pod", "j2-0", "e2e")
    assert not obj["spec"].get("nodeName")
    pg = await c.store.get(SCHEDULING, "PodGroup", "pending-pg", "e2e")
    assert pg["status"]["phase"] == "Pending"


async def test_allocate_dont_work_when_job_not_satisfy_predicates(tmp_path: Path) -> None:
    """It("allocate don't work when job NOT satisfy predicates")"""
    c = await setup(tmp_path, 1)
    labels = {"job": "for-test-predicate"}
    await ready_job(c, job("j1", "500m", "512Mi", labels=labels))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "job", "operator": "In", "values": ["for-test-predicate"]}
                        ]
                    },
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    await pending_job(c, job("j2", "500m", "512Mi", labels=labels, affinity=anti))
    await c.step(10)
    assert await c.pending("j2") == 1
    failed = await c.events(reason="FailedScheduling", kind="Pod")
    assert any("anti-affinity" in e["message"] for e in failed)


async def test_allocate_dont_work_when_queue_is_overused(tmp_path: Path) -> None:
    """It("allocate don't work when queue is overused")

    Upstream checks only that j4's pod is created Pending. Its queue is not overused by
    Volcano's measure, though: q1's deserved share is capped by its request (2.5 cpu of a
    20-cpu cluster), which j4 does not exceed, so j4 is then placed on the free room."""
    c = await setup(tmp_path, 2, queues=["q1", "q2"])
    await ready_job(c, job("j1-q1", "1", "1024Mi", "q1"))
    await ready_job(c, job("j2-q1", "1", "1024Mi", "q1"))
    await ready_job(c, job("j3-q2", "500m", "512Mi", "q2"))
    await pending_job(c, job("j4-q1", "500m", "512Mi", "q1"))
    assert await c.wait(lambda: _ready(c, "j4-q1", 1))


async def test_scheduling_gates_block_vcjob_allocated_after_removed(tmp_path: Path) -> None:
    """It("Scheduling gates block vcjob. vcjob allocated after removed.")"""
    c = await setup(tmp_path, 4, queues=["q1"])
    gated = task_spec(2, cpu="2", memory="2048Mi", gates=["example.com/g1"])
    await c.create(vcjob("j1-q1", gated, min_available=2, queue_name="q1"))
    assert await c.wait(lambda: _unschedulable(c))
    await c.step(5)
    assert await c.ready("j1-q1") == 0
    assert await c.pending("j1-q1") == 2

    await c.remove_gates("j1-q1")
    assert await c.wait(lambda: _state(c, "j1-q1", "Running"))
    assert await c.ready("j1-q1") == 2


async def test_scheduling_gates_block_deployment_allocated_after_removed(tmp_path: Path) -> None:
    """It("Scheduling gates block Deployment. Deployment allocated after removed.")

    The Deployment's ReplicaSet pods (gated) get one PodGroup from Volcano's PodGroup
    controller, which enqueue admits; they run once the gates are removed."""
    c = await setup(tmp_path, 4)
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "dep-gated-5d4f8",
        "uid": "rs-dep-gated",
        "controller": True,
    }
    for i in range(4):
        p = pod(f"dep-gated-5d4f8-{i}", namespace="e2e", cpu="2", memory="2048Mi", owner=owner)
        p["spec"]["schedulingGates"] = [{"name": "g1"}]
        await c.create(p)
    await c.step(3)
    groups = (await c.store.list(SCHEDULING, "PodGroup", "e2e")).items
    assert len(groups) == 1
    name = groups[0]["metadata"]["name"]

    async def phase() -> str:
        obj = await c.store.get(SCHEDULING, "PodGroup", name, "e2e")
        return (obj.get("status") or {}).get("phase", "")

    assert await c.wait(lambda: _is(phase, "Inqueue"))
    for i in range(4):
        obj = await c.store.get("v1", "Pod", f"dep-gated-5d4f8-{i}", "e2e")
        assert not obj["spec"].get("nodeName")
        obj["spec"]["schedulingGates"] = []
        await c.store.update(obj)
    assert await c.wait(lambda: _is(phase, "Running"))


async def test_allocate_work_when_job_has_subgroups_but_no_network_topology(
    tmp_path: Path,
) -> None:
    """It("allocate work when job has subgroups (partitionPolicy) but no network topology
    constraint")"""
    c = await setup(tmp_path, 2)
    spec = task_spec(2, cpu="500m", memory="512Mi")
    spec["partitionPolicy"] = {"totalPartitions": 2, "partitionSize": 1, "minPartitions": 2}
    await ready_job(c, vcjob("job-subgroups-no-topology", spec, min_available=2))


# -- enqueue.go -----------------------------------------------------------------------------------


async def test_allocate_work_even_not_config_enqueue_action(tmp_path: Path) -> None:
    """It("allocate work even not config enqueue action")"""
    actions = ", ".join(a for a in CI_ACTIONS.split(", ") if a != "enqueue")
    c = await setup(tmp_path, 2, config=ci_conf(actions))
    await ready_job(c, job("low", "500m", "512Mi"))
    await ready_job(c, job("high", "1", "1024Mi"))


async def test_scheduling_gated_task_will_not_consume_inqueue_resources(tmp_path: Path) -> None:
    """It("Scheduling gated task will not consume inqueue resources")"""
    c = E2ECluster(tmp_path)
    await c.start()
    rep = 12  # ClusterSize(ctx, OneCPU)
    gated = task_spec(rep, cpu="1", gates=["g1"])
    await c.create(vcjob("j-gated", gated, min_available=rep))
    await c.create(vcjob("job1", task_spec(rep // 2, cpu="1"), min_available=rep // 2))
    await c.create(vcjob("job2", task_spec(rep // 2, cpu="1"), min_available=rep // 2))
    assert await c.wait(lambda: _pending(c, "j-gated", rep))
    assert await c.wait(lambda: _ready(c, "job1", rep // 2))
    assert await c.wait(lambda: _ready(c, "job2", rep // 2))
    assert await c.pending("j-gated") == rep


# -- guarantee.go ---------------------------------------------------------------------------------


async def test_one_queue_reserve_all_cluster_resource(tmp_path: Path) -> None:
    """It("one queue reserve all cluster resource")

    queue1's guarantee equals the one free slot; queue2's job is created and waits Pending.
    (Volcano's guarantee lowers other queues' real capability, by 2 of 20 cpus here, not the
    free room on nodes; the job is then placed.)"""
    c = await setup(tmp_path, 1)
    q1 = e2e_queue("queue1")
    # (``CreateQueueWithQueueSpec`` sets deserved to the guarantee, as the webhook requires.)
    q1["spec"]["guarantee"] = {"resource": {"cpu": "2", "memory": "2048Mi"}}
    q1["spec"]["deserved"] = {"cpu": "2", "memory": "2048Mi"}
    await c.create(q1, e2e_queue("queue2"))
    await pending_job(c, job("queue2-job", "500m", "512Mi", "queue2"))


async def test_one_queue_reserve_some_cluster_resource_not_enough_to_create_job(
    tmp_path: Path,
) -> None:
    """It("one queue reserve some cluster resource, so it  is NOT enough to create job")"""
    c = await setup(tmp_path, 1)
    q1 = e2e_queue("queue1")
    q1["spec"]["guarantee"] = {"resource": {"cpu": "1", "memory": "1024Mi"}}
    q1["spec"]["deserved"] = {"cpu": "1", "memory": "1024Mi"}
    await c.create(q1, e2e_queue("queue2"))
    await pending_job(c, job("queue2-job", "1500m", "512Mi", "queue2"))


async def _ready(c: E2ECluster, job_name: str, count: int) -> bool:
    return await c.ready(job_name) >= count


async def _pending(c: E2ECluster, job_name: str, count: int) -> bool:
    return await c.pending(job_name) >= count


async def _state(c: E2ECluster, job_name: str, phase: str) -> bool:
    return await c.job_state(job_name) == phase


async def _unschedulable(c: E2ECluster) -> bool:
    """``WaitJobUnschedulable``: an ``Unschedulable`` or ``FailedScheduling`` event."""
    return bool(await c.events(reason="Unschedulable") or await c.events(reason="FailedScheduling"))


async def _is(read, expected: str) -> bool:  # type: ignore[no-untyped-def]
    return await read() == expected

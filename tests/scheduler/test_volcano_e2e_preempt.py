"""Volcano's ``test/e2e/schedulingaction/preempt.go`` ("Job E2E Test"), case by case, on the
in-process cluster of :mod:`.volcano_e2e` (four 4-cpu workers, Volcano's CI scheduler
configuration). Each test reproduces one ``It``: its jobs, its configuration change, and the
outcome it waits for."""

from __future__ import annotations

from pathlib import Path

from stromboli.core.api import constants as k

from .builders import pod
from .volcano_e2e import CI_ACTIONS, E2ECluster, ci_conf, task_spec, vcjob

HIGH, MIDDLE, LOW = "high-priority", "middle-priority", "low-priority"
PRIORITIES = {HIGH: 100, LOW: 10}
PREEMPTABLE = {k.PREEMPTABLE_KEY: "true"}
#: ``ClusterSize(ctx, OneCPU)``: one-cpu slots on the four workers (three each, beside kindnet).
REP = 12
#: The suite's edit "Remove enqueue action first because it conflicts with preempt".
NO_ENQUEUE = CI_ACTIONS.removeprefix("enqueue, ")


async def test_schedule_high_priority_job_without_preemption_when_resource_is_enough(
    tmp_path: Path,
) -> None:
    """It("schedule high priority job without preemption when resource is enough")"""
    c = await E2ECluster(tmp_path).start(priorities=PRIORITIES)
    await c.create(vcjob("preemptee-0", task_spec(1, labels=PREEMPTABLE), priority=LOW))
    assert await c.wait(lambda: _ready(c, "preemptee-0", 1))
    await c.create(vcjob("preemptor-0", task_spec(1, labels=PREEMPTABLE), priority=HIGH))
    assert await c.wait(lambda: _ready(c, "preemptor-0", 1))
    assert await c.ready("preemptee-0") == 1
    assert await c.pg_phase("preemptee-0") == "Running"


async def test_schedule_high_priority_job_with_preemption_when_idle_resource_is_not_enough(
    tmp_path: Path,
) -> None:
    """It("schedule high priority job with preemption when idle resource is NOT enough but
    preemptee resource is enough")"""
    c = await E2ECluster(tmp_path, ci_conf(NO_ENQUEUE)).start(priorities=PRIORITIES)
    await c.create(
        vcjob("preemptee-1", task_spec(REP, labels=PREEMPTABLE), min_available=1, priority=LOW)
    )
    assert await c.wait(lambda: _ready(c, "preemptee-1", REP))
    await c.create(
        vcjob(
            "preemptor-1", task_spec(REP, labels=PREEMPTABLE), min_available=REP // 2, priority=HIGH
        )
    )
    assert await c.wait(lambda: _ready(c, "preemptor-1", REP // 2))
    assert await c.ready("preemptee-1") >= REP // 2
    # The preemptor took exactly what the preemptee gave up: the cluster stays full.
    assert await c.ready("preemptee-1") + await c.ready("preemptor-1") == REP


async def test_preemption_does_not_work_when_podgroup_is_pending_due_to_insufficient_resource(
    tmp_path: Path,
) -> None:
    """It("preemption doesn't work when podgroup is pending due to insufficient resource")"""
    c = await E2ECluster(tmp_path).start(priorities=PRIORITIES)
    pending_pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pending-pg", "namespace": "e2e"},
        "spec": {"minMember": 1, "minResources": {"cpu": "30"}},
    }
    await c.create(pending_pg)
    await c.create(vcjob("preemptee-2", task_spec(REP), min_available=1, priority=LOW))
    assert await c.wait(lambda: _ready(c, "preemptee-2", REP))
    preemptor = pod(
        "preemptor-pod",
        namespace="e2e",
        group="pending-pg",
        cpu="1",
        priority_class=HIGH,
    )
    await c.create(preemptor)
    await c.step(10)
    assert await c.ready("preemptee-2") == REP
    pg = await c.store.get("scheduling.volcano.sh/v1beta1", "PodGroup", "pending-pg", "e2e")
    assert pg["status"]["phase"] == "Pending"
    assert not (await c.store.get("v1", "Pod", "preemptor-pod", "e2e"))["spec"].get("nodeName")


async def test_preemption_only_works_in_the_same_queue(tmp_path: Path) -> None:
    """It("preemption only works in the same queue")

    (The suite's config edit meant to drop reclaim returns without applying it, so reclaim
    stays on, as here.)"""
    c = await E2ECluster(tmp_path).start(
        queues=["q1-preemption", "q2-reference"], priorities=PRIORITIES
    )
    half = task_spec(REP // 2, labels=PREEMPTABLE)
    await c.create(
        vcjob("j1-q1", half, min_available=REP // 2, queue_name="q1-preemption", priority=LOW)
    )
    assert await c.wait(lambda: _ready(c, "j1-q1", REP // 2))
    await c.create(
        vcjob("j2-q2", half, min_available=REP // 2, queue_name="q2-reference", priority=LOW)
    )
    assert await c.wait(lambda: _ready(c, "j2-q2", REP // 2))
    await c.create(
        vcjob(
            "j3-q1",
            task_spec(REP, labels=PREEMPTABLE),
            min_available=REP // 2,
            queue_name="q1-preemption",
            priority=HIGH,
        )
    )
    assert await c.wait(lambda: _ready(c, "j3-q1", REP // 2))
    assert await c.ready("j1-q1") == 0
    # The other queue's job is never a victim.
    assert await c.ready("j2-q2") == REP // 2
    await c.step(5)
    assert await c.ready("j2-q2") == REP // 2
    assert await c.ready("j3-q1") == REP // 2


async def test_preemption_does_not_work_when_idle_and_preemptee_resource_is_not_enough(
    tmp_path: Path,
) -> None:
    """It("preemption doesn't work when total resource of idle resource and preemptee is NOT
    enough")"""
    c = await E2ECluster(tmp_path).start(
        queues=["q1-preemption", "q2-reference"], priorities=PRIORITIES
    )
    await c.create(
        vcjob(
            "j1-q1",
            task_spec(1, labels=PREEMPTABLE),
            min_available=1,
            queue_name="q1-preemption",
            priority=LOW,
        )
    )
    assert await c.wait(lambda: _ready(c, "j1-q1", 1))
    await c.create(
        vcjob(
            "j2-q2",
            task_spec(REP // 2, labels=PREEMPTABLE),
            min_available=REP // 2,
            queue_name="q2-reference",
            priority=LOW,
        )
    )
    assert await c.wait(lambda: _ready(c, "j2-q2", REP // 2))
    await c.create(
        vcjob(
            "j3-q1",
            task_spec(REP, labels=PREEMPTABLE),
            min_available=REP,
            queue_name="q1-preemption",
            priority=HIGH,
        )
    )
    assert not await c.wait(lambda: _ready(c, "j3-q1", REP), steps=15)
    assert await c.ready("j3-q1") == 0
    assert await c.ready("j1-q1") == 1
    assert await c.ready("j2-q2") == REP // 2


async def test_multi_preemptor_jobs_who_are_in_different_priority(tmp_path: Path) -> None:
    """It("multi-preemptor-jobs who are in different priority")

    Skipped in Volcano's suite (issue #911). Its first half holds: the middle-priority gang
    preempts half of the low-priority job. Its second half cannot: the high-priority gang's
    ``minResources`` (the whole cluster's one-cpu slots) exceed what overcommit admits
    (1.2 x allocatable less what is in use), so enqueue, Volcano's as ours, keeps its PodGroup
    Pending and nothing is preempted for it."""
    priorities = {HIGH: 100, MIDDLE: 50, LOW: 10}
    c = await E2ECluster(tmp_path).start(queues=["q1-preemption"], priorities=priorities)
    await c.create(
        vcjob(
            "low-priority-job",
            task_spec(REP, labels=PREEMPTABLE),
            min_available=1,
            queue_name="q1-preemption",
            priority=LOW,
        )
    )
    assert await c.wait(lambda: _ready(c, "low-priority-job", REP))
    await c.create(
        vcjob(
            "middle-prority-job",
            task_spec(REP // 2, labels=PREEMPTABLE),
            min_available=REP // 2,
            queue_name="q1-preemption",
            priority=MIDDLE,
        )
    )
    assert await c.wait(lambda: _ready(c, "middle-prority-job", REP // 2))
    assert await c.ready("low-priority-job") >= REP // 2
    await c.create(
        vcjob(
            "high-priority-job",
            task_spec(REP, labels=PREEMPTABLE),
            min_available=REP,
            queue_name="q1-preemption",
            priority=HIGH,
        )
    )
    await c.step(10)
    assert await c.pg_phase("high-priority-job") == "Pending"
    assert await c.ready("high-priority-job") == 0
    assert await c.ready("middle-prority-job") == REP // 2
    assert await c.ready("low-priority-job") == REP // 2
    overused = await c.events(reason="Unschedulable")
    assert any("resource in cluster is overused" in e["message"] for e in overused)


async def test_jobs_unschedulable_due_to_scheduling_gates_will_not_preempt_other_jobs(
    tmp_path: Path,
) -> None:
    """It("Jobs unschedulable due to scheduling gates will not preempt other jobs despite
    sufficient preemptor")"""
    c = await E2ECluster(tmp_path, ci_conf(NO_ENQUEUE)).start(priorities=PRIORITIES)
    await c.create(
        vcjob("preemptee-1", task_spec(REP, labels=PREEMPTABLE), min_available=1, priority=LOW)
    )
    assert await c.wait(lambda: _ready(c, "preemptee-1", REP))
    gated = task_spec(REP, labels=PREEMPTABLE, gates=["example.com/g1"])
    await c.create(vcjob("preemptor-1", gated, min_available=REP // 2, priority=HIGH))
    assert await c.wait(lambda: _pending(c, "preemptor-1", REP))
    await c.step(10)
    # Gated pods evict nobody.
    assert await c.ready("preemptee-1") == REP
    assert await c.pending("preemptor-1") == REP

    await c.remove_gates("preemptor-1")
    assert await c.wait(lambda: _ready(c, "preemptor-1", REP // 2))
    assert await c.ready("preemptee-1") >= REP // 2


async def test_should_preempt_low_priority_pod_with_anti_affinity_constraint(
    tmp_path: Path,
) -> None:
    """It("should preempt low priority pod with anti-affinity constraint")"""
    config = ci_conf(
        NO_ENQUEUE,
        extra=(
            "configurations:\n"
            "- name: preempt\n"
            "  arguments:\n"
            '    enableTopologyAwarePreemption: "true"\n'
        ),
    )
    priorities = {HIGH: 100, MIDDLE: 50, LOW: 10}
    c = await E2ECluster(tmp_path, config).start(priorities=priorities)
    nodes = len(c.workers)
    slots = REP // nodes
    assert slots >= 3
    blocker = {"app": "blocker"}

    def term(labels: dict[str, str]) -> dict:
        return {
            "labelSelector": {"matchLabels": labels},
            "topologyKey": "kubernetes.io/hostname",
        }

    await c.create(
        vcjob(
            "blocker-job",
            task_spec(
                nodes,
                labels={**PREEMPTABLE, **blocker},
                affinity={
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [term(blocker)]
                    }
                },
            ),
            min_available=1,
            priority=MIDDLE,
        )
    )
    assert await c.wait(lambda: _ready(c, "blocker-job", nodes))
    await c.create(
        vcjob(
            "bystander-job",
            task_spec(
                nodes,
                labels={**PREEMPTABLE, "app": "bystander"},
                affinity={
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [term(blocker)]
                    },
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            term({"app": "bystander"})
                        ]
                    },
                },
            ),
            min_available=1,
            priority=LOW,
        )
    )
    assert await c.wait(lambda: _ready(c, "bystander-job", nodes))
    await c.create(
        vcjob(
            "high-priority-job",
            task_spec(
                nodes - 1,
                cpu=str(slots - 1),
                labels={**PREEMPTABLE, "app": "preemptor"},
                affinity={
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [term(blocker)]
                    }
                },
            ),
            min_available=nodes - 1,
            priority=HIGH,
        )
    )
    assert await c.wait(lambda: _ready(c, "high-priority-job", nodes - 1))
    # Only the blockers in the way went; the low-priority bystanders were spared.
    assert await c.ready("bystander-job") == nodes
    assert await c.ready_by_priority("blocker-job") == {MIDDLE: 1}


async def _ready(c: E2ECluster, job: str, count: int) -> bool:
    return await c.ready(job) >= count


async def _pending(c: E2ECluster, job: str, count: int) -> bool:
    return await c.pending(job) >= count

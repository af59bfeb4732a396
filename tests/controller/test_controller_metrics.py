"""Volcano's controller-manager metrics, recorded by the job and JobFlow controllers on a
memory store (the test plays the scheduler and kubelet, as in test_job_controller)."""

from __future__ import annotations

from prometheus_client import generate_latest

from stromboli.core.api import constants as k
from stromboli.core.controller.jobflow import JobFlowController
from stromboli.core.controller.metrics import ControllerMetrics
from stromboli.core.scheduler.scheduler import builtin_queue

from .jobkit import JOB, Harness, phase, task, vcjob
from .test_jobflow import CHAIN, Flows, jobflow, template

LATENCY = "volcano_controller_job_to_pod_creation_latency_milliseconds"


def sample(m: ControllerMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def podgroups(m: ControllerMetrics, queue: str = "default") -> dict[str, float | None]:
    return {
        phase: sample(m, f"volcano_queue_pod_group_{phase}_count", queue_name=queue)
        for phase in ("inqueue", "pending", "running", "unknown", "completed")
    }


async def harness(job: dict | None = None) -> tuple[Harness, ControllerMetrics]:
    m = ControllerMetrics()
    h = await Harness(metrics=m).start()
    if job is not None:
        await h.create(job)
    return h, m


async def test_latency_is_observed_per_created_pod_from_the_job_creation() -> None:
    h, m = await harness(vcjob("j", task("master", 1), task("worker", 2)))
    assert sample(m, f"{LATENCY}_count") == 0  # no pods before the PodGroup is admitted
    h.clock.advance(3)
    await h.admit()
    assert len(await h.pods()) == 3
    assert sample(m, f"{LATENCY}_count") == 3
    assert sample(m, f"{LATENCY}_sum") == 3 * 3000.0
    # Volcano's bounds: 50 ms to one minute.
    assert sample(m, f"{LATENCY}_bucket", le="50.0") == 0
    assert sample(m, f"{LATENCY}_bucket", le="60000.0") == 3
    # Syncing again creates nothing, so observes nothing.
    await h.run_pods()
    assert sample(m, f"{LATENCY}_count") == 3


async def test_completed_job_is_counted_once_and_forgotten_when_deleted() -> None:
    h, m = await harness(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    labels = {"job_name": "default/j", "queue_name": "default"}
    assert sample(m, "volcano_job_completed_phase_count", **labels) is None
    await h.run_pods(pod_phase="Succeeded")
    assert phase(await h.job()) == "Completed"
    assert sample(m, "volcano_job_completed_phase_count", **labels) == 1
    await h.step()
    assert sample(m, "volcano_job_completed_phase_count", **labels) == 1
    assert sample(m, "volcano_job_failed_phase_count", **labels) is None
    await h.store.delete(*JOB, "j", "default")
    await h.step()
    assert "default/j" not in generate_latest(m.registry).decode()


async def test_failed_job_is_counted_under_its_queue() -> None:
    h, m = await harness()
    created = await h.store.create(builtin_queue("team-a"))
    created["status"] = {"state": "Open"}
    await h.store.update_status(created)
    await h.create(vcjob("j", task("worker", 2), queue="team-a"))
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Failed", exit_code=1, step=False)
    await h.set_pod("j-worker-1", "Failed", exit_code=1)
    assert phase(await h.job()) == "Failed"
    labels = {"job_name": "default/j", "queue_name": "team-a"}
    assert sample(m, "volcano_job_failed_phase_count", **labels) == 1
    assert sample(m, "volcano_job_completed_phase_count", **labels) is None


async def test_queue_podgroup_gauges_follow_the_podgroup_phase() -> None:
    h, m = await harness()
    zero = {p: 0.0 for p in ("inqueue", "pending", "running", "unknown", "completed")}
    assert podgroups(m) == zero  # published for a known queue before any PodGroup
    await h.create(vcjob("j", task("worker", 2)))
    await h.create(vcjob("other", task("worker", 1)))
    assert podgroups(m) == zero  # a new PodGroup has no phase until the scheduler sets one
    for job in ("j", "other"):
        await h.admit(job, pg_phase="Pending")
    assert podgroups(m) == {**zero, "pending": 2}
    await h.admit()
    assert podgroups(m) == {**zero, "pending": 1, "inqueue": 1}
    pg = await h.podgroup()
    assert pg is not None
    pg["status"]["phase"] = "Running"
    await h.store.update(pg)
    await h.step()
    assert podgroups(m) == {**zero, "pending": 1, "running": 1}
    await h.run_pods()
    await h.run_pods(pod_phase="Succeeded")
    # A finished job's PodGroup is deleted: it leaves the counts.
    assert await h.podgroup() is None
    assert podgroups(m) == {**zero, "pending": 1}


async def test_deleted_queue_loses_its_series() -> None:
    h, m = await harness()
    await h.store.create(builtin_queue("gone"))
    await h.step()
    assert podgroups(m, "gone")["pending"] == 0
    await h.store.delete(k.SCHEDULING_V1BETA1, "Queue", "gone")
    await h.step()
    assert set(podgroups(m, "gone").values()) == {None}
    assert podgroups(m)["pending"] == 0  # other queues keep theirs


async def flows_with(m: ControllerMetrics) -> Flows:
    f = Flows()
    f.controller = JobFlowController(f.store, f.clock, metrics=m)
    return await f.setup(template("a"), template("b"), template("c"), jobflow("flow", *CHAIN))


async def test_jobflow_success_is_counted_once_per_namespace() -> None:
    m = ControllerMetrics()
    f = await flows_with(m)
    succeed = "volcano_jobflow_succeed_phase_count"
    for name in ("flow-a", "flow-b"):
        await f.set_phase(name, "Completed")
    assert sample(m, succeed, jobflow_namespace="default") is None
    await f.set_phase("flow-c", "Completed")
    assert (await f.status())["state"]["phase"] == "Succeed"
    assert sample(m, succeed, jobflow_namespace="default") == 1
    await f.controller.step()
    assert sample(m, succeed, jobflow_namespace="default") == 1


async def test_jobflow_failure_is_counted() -> None:
    m = ControllerMetrics()
    f = await flows_with(m)
    await f.set_phase("flow-a", "Failed")
    assert (await f.status())["state"]["phase"] == "Failed"
    assert sample(m, "volcano_jobflow_failed_phase_count", jobflow_namespace="default") == 1
    assert sample(m, "volcano_jobflow_succeed_phase_count", jobflow_namespace="default") is None

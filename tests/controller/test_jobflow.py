"""The JobFlow controller on a memory store; the test plays the job controller (it sets the
phases of the jobs the flow creates)."""

from __future__ import annotations

import asyncio
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.jobflow import JobFlowController

from .jobkit import task

JOBFLOW = (k.FLOW_V1ALPHA1, "JobFlow")
JOB = (k.BATCH_V1ALPHA1, "Job")


def template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": k.FLOW_V1ALPHA1,
        "kind": "JobTemplate",
        "metadata": {"name": name, "namespace": "default", "labels": {"step": name}},
        "spec": {"tasks": [task("worker", 1)]},
    }


def jobflow(name: str = "flow", *flows: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": k.FLOW_V1ALPHA1,
        "kind": "JobFlow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"flows": list(flows), **spec},
    }


def flow(name: str, *targets: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if targets:
        out["dependsOn"] = {"targets": list(targets)}
    return out


CHAIN = (flow("a"), flow("b", "a"), flow("c", "b"))


class Flows:
    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.store = MemoryStore(self.clock, seed=0)
        self.controller = JobFlowController(self.store, self.clock)

    async def setup(self, *objects: dict[str, Any]) -> Flows:
        for obj in objects:
            await self.store.create(obj)
        await self.controller.step()
        return self

    async def jobs(self) -> dict[str, dict[str, Any]]:
        listed = await self.store.list(*JOB, "default")
        return {j["metadata"]["name"]: j for j in listed.items}

    async def status(self, name: str = "flow") -> dict[str, Any]:
        return (await self.store.get(*JOBFLOW, name, "default")).get("status") or {}

    async def set_phase(self, name: str, phase: str) -> None:
        job = await self.store.get(*JOB, name, "default")
        job["status"] = {"state": {"phase": phase}}
        await self.store.update_status(job)
        await self.controller.step()


async def chain(**spec: Any) -> Flows:
    return await Flows().setup(
        template("a"), template("b"), template("c"), jobflow("flow", *CHAIN, **spec)
    )


async def test_only_the_root_flow_starts() -> None:
    f = await chain()
    assert list(await f.jobs()) == ["flow-a"]
    status = await f.status()
    assert status["state"]["phase"] == "Pending"
    assert status["pendingJobs"] == ["flow-a"]


async def test_created_job_is_marked_and_owned() -> None:
    f = await chain()
    job = (await f.jobs())["flow-a"]
    meta = job["metadata"]
    for marks in (meta["labels"], meta["annotations"]):
        assert marks[k.CREATED_BY_JOB_TEMPLATE_KEY] == "default.a"
        assert marks[k.CREATED_BY_JOB_FLOW_KEY] == "default.flow"
    assert meta["labels"]["step"] == "a"
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("JobFlow", "flow", True)
    assert job["spec"]["tasks"][0]["name"] == "worker"


async def test_running_job_makes_the_flow_running() -> None:
    f = await chain()
    await f.set_phase("flow-a", "Running")
    status = await f.status()
    assert status["state"]["phase"] == "Running"
    assert status["runningJobs"] == ["flow-a"]
    assert list(await f.jobs()) == ["flow-a"]


async def test_flows_run_in_dependency_order_and_succeed() -> None:
    f = await chain()
    await f.set_phase("flow-a", "Completed")
    assert sorted(await f.jobs()) == ["flow-a", "flow-b"]
    await f.set_phase("flow-b", "Completed")
    assert sorted(await f.jobs()) == ["flow-a", "flow-b", "flow-c"]
    assert (await f.status())["state"]["phase"] == "Running"
    await f.set_phase("flow-c", "Completed")
    status = await f.status()
    assert status["state"]["phase"] == "Succeed"
    assert status["completedJobs"] == ["flow-a", "flow-b", "flow-c"]
    assert [s["name"] for s in status["jobStatusList"]] == ["flow-a", "flow-b", "flow-c"]
    assert set(status["conditions"]) == {"flow-a", "flow-b", "flow-c"}


async def test_fan_in_waits_for_every_target() -> None:
    f = await Flows().setup(
        template("a"),
        template("b"),
        template("c"),
        jobflow("flow", flow("a"), flow("b"), flow("c", "a", "b")),
    )
    assert sorted(await f.jobs()) == ["flow-a", "flow-b"]
    await f.set_phase("flow-a", "Completed")
    assert "flow-c" not in await f.jobs()
    await f.set_phase("flow-b", "Completed")
    assert "flow-c" in await f.jobs()


async def test_failure_fails_the_flow_and_stops_dependents() -> None:
    f = await chain()
    await f.set_phase("flow-a", "Failed")
    status = await f.status()
    assert status["state"]["phase"] == "Failed"
    assert status["failedJobs"] == ["flow-a"]
    assert list(await f.jobs()) == ["flow-a"]


async def test_terminated_job_fails_the_flow() -> None:
    f = await chain()
    await f.set_phase("flow-a", "Completed")
    await f.set_phase("flow-b", "Terminated")
    status = await f.status()
    assert status["state"]["phase"] == "Failed"
    assert status["terminatedJobs"] == ["flow-b"]
    assert "flow-c" not in await f.jobs()


async def test_missing_template_waits_until_it_appears() -> None:
    f = await Flows().setup(template("a"), jobflow("flow", flow("a"), flow("b", "a")))
    await f.set_phase("flow-a", "Completed")
    assert list(await f.jobs()) == ["flow-a"]
    await f.store.create(template("b"))
    await f.controller.step()
    assert sorted(await f.jobs()) == ["flow-a", "flow-b"]


async def test_retain_policy_delete_removes_jobs_once_succeeded() -> None:
    f = await chain(jobRetainPolicy="delete")
    for name in ("flow-a", "flow-b"):
        await f.set_phase(name, "Completed")
    assert sorted(await f.jobs()) == ["flow-a", "flow-b", "flow-c"]
    await f.set_phase("flow-c", "Completed")
    assert await f.jobs() == {}
    assert (await f.status())["state"]["phase"] == "Succeed"


async def test_retain_policy_retain_keeps_jobs() -> None:
    f = await chain(jobRetainPolicy="retain")
    for name in ("flow-a", "flow-b", "flow-c"):
        await f.set_phase(name, "Completed")
    assert sorted(await f.jobs()) == ["flow-a", "flow-b", "flow-c"]


async def test_stepping_again_changes_nothing() -> None:
    f = await chain()
    assert await f.controller.step() == 0
    assert list(await f.jobs()) == ["flow-a"]


async def test_template_lists_the_jobs_made_from_it() -> None:
    f = await chain()
    await f.store.create(jobflow("other", flow("a")))
    await f.controller.step()
    tmpl = await f.store.get(k.FLOW_V1ALPHA1, "JobTemplate", "a", "default")
    assert tmpl["status"]["jobDependsOnList"] == ["flow-a", "other-a"]


async def test_run_follows_watches() -> None:
    f = Flows()
    await f.store.create(template("a"))
    task_ = asyncio.create_task(f.controller.run())
    try:
        await f.store.create(jobflow("flow", flow("a")))
        for _ in range(100):
            if await f.jobs():
                break
            await asyncio.sleep(0.01)
        assert list(await f.jobs()) == ["flow-a"]
    finally:
        task_.cancel()
        await asyncio.gather(task_, return_exceptions=True)

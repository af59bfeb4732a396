"""Builders and harnesses for the job controller tests.

- :func:`vcjob` / :func:`task`: Job objects as a user writes them, defaulted by the webhook rules;
- :class:`Harness`: a memory store and a :class:`JobController` with no scheduler, where the
  test plays the scheduler and the kubelet (admit the PodGroup, set pod phases);
- :class:`Stack`: the real scheduler, pod lifecycle and controller ticking like the simulator,
  so that a test can change objects between ticks (scale a job, send a Command).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stromboli.core.admission.mutate import mutate_job
from stromboli.core.api import constants as k
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.job.controller import JobController
from stromboli.core.scheduler.conf import ConfigSource
from stromboli.core.scheduler.scheduler import Scheduler, builtin_queue
from stromboli.core.simulate.lifecycle import PodLifecycle

JOB = (k.BATCH_V1ALPHA1, "Job")
POD = ("v1", "Pod")
PODGROUP = (k.SCHEDULING_V1BETA1, "PodGroup")


def task(
    name: str,
    replicas: int = 1,
    *,
    cpu: str = "1",
    runtime: str | None = None,
    exit_code: int | None = None,
    min_available: int | None = None,
    policies: list[dict] | None = None,
    depends_on: list[str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if runtime is not None:
        annotations[k.SIM_RUNTIME_ANNOTATION] = runtime
    if exit_code is not None:
        annotations[k.SIM_EXIT_CODE_ANNOTATION] = str(exit_code)
    out: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                    }
                ],
            },
        },
        **fields,
    }
    if min_available is not None:
        out["minAvailable"] = min_available
    if policies is not None:
        out["policies"] = policies
    if depends_on is not None:
        out["dependsOn"] = {"name": depends_on}
    return out


def vcjob(name: str, *tasks: dict[str, Any], mutate: bool = True, **spec: Any) -> dict[str, Any]:
    """A Job as ``kubectl create`` would store it after Volcano's mutating webhook."""
    metadata = spec.pop("metadata", {})
    job = {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", **metadata},
        "spec": {"tasks": list(tasks) or [task("worker", 2)], **spec},
    }
    return mutate_job(job) if mutate else job


def node(name: str, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def command(job_name: str, action: str, name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": k.BUS_V1ALPHA1,
        "kind": "Command",
        "metadata": {"name": name or f"{job_name}-{action.lower()}", "namespace": "default"},
        "action": str(action),
        "target": {"apiVersion": k.BATCH_V1ALPHA1, "kind": "Job", "name": job_name},
    }


def queue_command(queue: str, action: str) -> dict[str, Any]:
    return {
        "apiVersion": k.BUS_V1ALPHA1,
        "kind": "Command",
        "metadata": {"name": f"{queue}-{action.lower()}", "namespace": "default"},
        "action": str(action),
        "target": {"apiVersion": k.SCHEDULING_V1BETA1, "kind": "Queue", "name": queue},
    }


def phase(job: Mapping[str, Any]) -> str:
    return ((job.get("status") or {}).get("state") or {}).get("phase", "")


class Harness:
    """A controller on a memory store; the test admits PodGroups and moves pods."""

    def __init__(self, **controller_args: Any) -> None:
        self.clock = VirtualClock()
        self.store = MemoryStore(self.clock, seed=1)
        self.controller = JobController(self.store, self.clock, **controller_args)

    async def start(self, *queues: str) -> Harness:
        for name in (k.ROOT_QUEUE, k.DEFAULT_QUEUE, *queues):
            created = await self.store.create(builtin_queue(name))
            created["status"] = {"state": "Open"}
            await self.store.update_status(created)
        await self.controller.start()
        return self

    async def step(self) -> int:
        return await self.controller.step()

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        created = await self.store.create(obj)
        await self.step()
        return created

    async def job(self, name: str = "j") -> dict[str, Any]:
        return await self.store.get(*JOB, name, "default")

    async def pods(self, job: str | None = None) -> dict[str, dict[str, Any]]:
        listed = await self.store.list(*POD, "default")
        return {
            p["metadata"]["name"]: p
            for p in listed.items
            if job is None or p["metadata"]["annotations"].get(k.JOB_NAME_KEY) == job
        }

    async def podgroups(self) -> dict[str, dict[str, Any]]:
        listed = await self.store.list(*PODGROUP, "default")
        return {pg["metadata"]["name"]: pg for pg in listed.items}

    async def podgroup(self, job: str = "j") -> dict[str, Any] | None:
        created = await self.job(job)
        name = f"{job}-{created['metadata']['uid']}"
        return (await self.podgroups()).get(name)

    async def admit(self, job: str = "j", pg_phase: str = "Inqueue") -> None:
        """What the scheduler's enqueue does: the job's PodGroup leaves Pending."""
        pg = await self.podgroup(job)
        assert pg is not None, f"job {job} has no PodGroup"
        pg["status"] = {**(pg.get("status") or {}), "phase": pg_phase}
        await self.store.update(pg)
        await self.step()

    async def set_pod(
        self,
        name: str,
        pod_phase: str,
        *,
        exit_code: int | None = None,
        restarts: int = 0,
        step: bool = True,
    ) -> None:
        """What the kubelet reports."""
        pod = await self.store.get(*POD, name, "default")
        container: dict[str, Any] = {"name": "main", "ready": pod_phase == "Running"}
        container["restartCount"] = restarts
        if exit_code is not None:
            container["state"] = {"terminated": {"exitCode": exit_code}}
        if pod_phase != "Pending" and not pod["spec"].get("nodeName"):
            pod["spec"]["nodeName"] = "node-0"
            pod = await self.store.update(pod)
        pod["status"] = {"phase": pod_phase, "containerStatuses": [container]}
        await self.store.update_status(pod)
        if step:
            await self.step()

    async def run_pods(self, job: str = "j", pod_phase: str = "Running") -> None:
        for name in await self.pods(job):
            await self.set_pod(name, pod_phase, step=False)
        await self.step()

    async def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        listed = await self.store.list("v1", "Event")
        return [e for e in listed.items if reason is None or e["reason"] == reason]

    async def advance(self, seconds: float) -> int:
        self.clock.advance(seconds)
        return await self.step()


class Stack:
    """Scheduler + pod lifecycle + job controller on one store, ticking like the simulator."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.store = MemoryStore(self.clock, seed=0)
        self.scheduler = Scheduler(self.store, self.clock, ConfigSource(None))
        self.lifecycle = PodLifecycle(self.store, self.clock)
        self.controller = JobController(self.store, self.clock)

    async def start(self, *nodes: dict[str, Any]) -> Stack:
        for obj in nodes or (node("node-0"),):
            await self.store.create(obj)
        await self.scheduler.start()
        await self.lifecycle.start()
        await self.controller.start()
        return self

    async def tick(self) -> int:
        """One simulated second: the same order as the simulator's engine."""
        changed = await self.lifecycle.step()
        changed += await self.controller.step()
        stats = await self.scheduler.run_once()
        changed += stats.bound + stats.evicted + stats.status_writes
        changed += await self.controller.step()
        changed += await self.lifecycle.step()
        return changed

    async def run(self, seconds: float, until: Callable[[], Any] | None = None) -> None:
        """Tick once a second for ``seconds`` (or until ``until()`` is true after a tick)."""
        end = self.clock.seconds + seconds
        while self.clock.seconds < end:
            await self.tick()
            if until is not None and await until():
                return
            self.clock.advance(1.0)

    async def job(self, name: str) -> dict[str, Any]:
        return await self.store.get(*JOB, name, "default")

    async def pods(self, job: str) -> dict[str, dict[str, Any]]:
        listed = await self.store.list(*POD, "default")
        return {
            p["metadata"]["name"]: p
            for p in listed.items
            if p["metadata"].get("annotations", {}).get(k.JOB_NAME_KEY) == job
        }

    async def phase_is(self, name: str, *phases: str) -> bool:
        return phase(await self.job(name)) in phases

"""A step-by-step stand-in for the cluster Volcano's scheduling e2e suites run against.

Volcano's ``test/e2e/schedulingaction`` and ``schedulingbase`` suites create vcjobs (through
the webhooks) on a kind cluster of four untainted workers, let the job controller make their
PodGroups and pods, and wait for pods to run. :class:`E2ECluster` drives the same pieces in
process, one scheduling cycle (one virtual second) per step: admission, the vcjob controller,
the scheduler and a kubelet-like pod lifecycle, as the simulator wires them.

The suites often pin the room the scheduler sees with "placeholder" pods that fill every
worker except ``NodesNumLimit`` of them, which keep exactly ``NodesResourceLimit`` free
(``e2eutil.InitTestContext``); :meth:`E2ECluster.limit_nodes` does the same, so the cluster
total (and with it the queues' deserved shares) is as large as in the real suite.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from stromboli.core.admission.mutate import mutate_job
from stromboli.core.api import constants as k
from stromboli.core.api.quantity import parse_quantity
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import SimObject

from .builders import SCHEDULING, conf, container, node, priority_class, queue

#: Volcano's CI scheduler configuration (``volcano-scheduler-ci.conf``) less the plugins that
#: only matter for network topology and DRA.
CI_TIERS: tuple[list, list] = (
    ["priority", {"name": "gang", "enablePreemptable": False}, "conformance", "sla"],
    [
        "overcommit",
        {"name": "drf", "enablePreemptable": False},
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
    ],
)
CI_ACTIONS = "enqueue, allocate, backfill, reclaim, preempt"
CI_CONF = conf(CI_ACTIONS, *CI_TIERS)

#: A GitHub runner's kind node (the control plane is tainted; each node runs a kindnet pod,
#: the control plane its components besides).
WORKER_CPU, WORKER_MEMORY = "4", "16Gi"
WORKERS = 4
CONTROL_PLANE = "kind-control-plane"
DAEMON_USE = ("100m", "50Mi")
CONTROL_PLANE_USE = ("950m", "290Mi")
PLACEHOLDER_NS = "e2e-placeholder"


def ci_conf(
    actions: str = CI_ACTIONS, *, replace: dict[str, str | dict] | None = None, extra: str = ""
) -> str:
    """The CI configuration with other actions, some plugins swapped (``replace``: plugin name
    → new entry) and extra YAML (``configurations``) appended."""
    tiers = [[(replace or {}).get(_name(p), p) for p in tier] for tier in CI_TIERS]
    return conf(actions, *tiers) + extra


def _name(plugin: str | dict) -> str:
    return plugin if isinstance(plugin, str) else plugin["name"]


def task_spec(
    rep: int,
    *,
    cpu: str | None = "1",
    memory: str | None = None,
    min_available: int | None = None,
    name: str | None = None,
    labels: dict[str, str] | None = None,
    affinity: dict | None = None,
    tolerations: list[dict] | None = None,
    gates: list[str] | None = None,
    host_port: int | None = None,
    priority_class_name: str | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    """One ``spec.tasks[]`` entry as ``e2eutil.CreateJobInner`` writes it."""
    limits = {**({"cpu": cpu} if cpu else {}), **({"memory": memory} if memory else {})}
    main = container(cpu, memory, limits=limits or None)
    main["image"] = "nginx:1.29.3-alpine"
    if host_port is not None:
        main["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    pod_spec: dict[str, Any] = {
        "schedulerName": k.DEFAULT_SCHEDULER_NAME,
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 3,
        "containers": [main],
    }
    if affinity:
        pod_spec["affinity"] = affinity
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if gates:
        pod_spec["schedulingGates"] = [{"name": g} for g in gates]
    if priority_class_name:
        pod_spec["priorityClassName"] = priority_class_name
    if node_name:
        pod_spec["nodeName"] = node_name
    spec: dict[str, Any] = {
        "replicas": rep,
        "template": {"metadata": {"labels": dict(labels or {})}, "spec": pod_spec},
    }
    if name:
        spec["name"] = name
        spec["template"]["metadata"]["name"] = name
    if min_available is not None:
        spec["minAvailable"] = min_available
    return spec


def vcjob(
    name: str,
    *tasks: dict,
    min_available: int | None = None,
    queue_name: str | None = None,
    priority: str | None = None,
    namespace: str = "e2e",
) -> dict[str, Any]:
    """A vcjob as ``e2eutil.CreateJob`` makes it: task ``i`` is named ``<job>-task-<i>`` and
    ``minAvailable`` defaults to the sum of the tasks' ``Min`` (given per task here through
    ``min_available`` of :func:`vcjob`, as the suites mostly use one task)."""
    spec_tasks = []
    for i, t in enumerate(tasks):
        t = {**t}
        t.setdefault("name", f"{name}-task-{i}")
        t["template"] = {
            **t["template"],
            "metadata": {**t["template"]["metadata"], "name": t["name"]},
        }
        spec_tasks.append(t)
    spec: dict[str, Any] = {"schedulerName": k.DEFAULT_SCHEDULER_NAME, "tasks": spec_tasks}
    spec["minAvailable"] = (
        min_available if min_available is not None else sum(t["replicas"] for t in tasks)
    )
    if queue_name:
        spec["queue"] = queue_name
    if priority:
        spec["priorityClassName"] = priority
    return {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _system_pod(name: str, node_name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": node_name,
            "containers": [container(cpu, memory, name="system")],
        },
        "status": {"phase": "Running"},
    }


class E2ECluster:
    def __init__(self, tmp_path: Path, config: str = CI_CONF, *, workers: int = WORKERS) -> None:
        self.conf_path = tmp_path / "scheduler.conf"
        self.conf_path.write_text(config)
        self.sim = Simulation([], self.conf_path)
        self.store = self.sim.store
        self.workers = [f"worker-{i}" for i in range(1, workers + 1)]
        self.started = False

    async def start(
        self,
        *,
        queues: list[str] | list[dict] = (),  # type: ignore[assignment]
        priorities: dict[str, int] | None = None,
    ) -> E2ECluster:
        sim = self.sim
        await sim.scheduler.start()
        await sim.lifecycle.start()
        await sim.controller.start()
        await sim.cronjobs.start()
        await sim.jobflows.start()
        self.started = True
        control_plane = node(CONTROL_PLANE, WORKER_CPU, WORKER_MEMORY)
        control_plane["spec"]["taints"] = [
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
        ]
        await self.create(
            control_plane, *(node(n, WORKER_CPU, WORKER_MEMORY) for n in self.workers)
        )
        await self.create(_system_pod("control-plane-pods", CONTROL_PLANE, *CONTROL_PLANE_USE))
        for worker in self.workers:
            await self.create(_system_pod(f"kindnet-{worker}", worker, *DAEMON_USE))
        for name, value in (priorities or {}).items():
            await self.create(priority_class(name, value))
        for q in queues:
            await self.create(queue(q) if isinstance(q, str) else q)
        await self.step()
        return self

    async def limit_nodes(self, count: int, cpu: str, memory: str) -> None:
        """Fill every worker with a placeholder pod, leaving ``cpu``/``memory`` free on the
        first ``count`` of them (``setPlaceHolderForSchedulerTesting``)."""
        total_cpu = parse_quantity(WORKER_CPU)
        total_mem = parse_quantity(WORKER_MEMORY)
        for i, worker in enumerate(self.workers):
            free_cpu, free_mem = (
                (parse_quantity(cpu), parse_quantity(memory)) if i < count else (0, 0)
            )
            used_cpu = int((total_cpu - parse_quantity(DAEMON_USE[0]) - free_cpu) * 1000)
            used_mem = int(total_mem - parse_quantity(DAEMON_USE[1]) - free_mem)
            if used_cpu <= 0 and used_mem <= 0:
                continue
            placeholder = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"placeholder-{worker}", "namespace": PLACEHOLDER_NS},
                "spec": {
                    "schedulerName": "default-scheduler",
                    "nodeName": worker,
                    "containers": [
                        container(f"{used_cpu}m", str(used_mem), name="placeholder"),
                    ],
                },
                "status": {"phase": "Running"},
            }
            await self.create(placeholder)
        await self.step()

    async def create(self, *objects: dict) -> None:
        """Create through admission, as ``kubectl create`` through the webhooks would."""
        for obj in objects:
            if obj.get("kind") == "Job" and obj.get("apiVersion") == k.BATCH_V1ALPHA1:
                obj = mutate_job(obj)
            await self.sim._deliver(SimObject(obj, self.sim.clock.seconds, "<e2e>"))

    async def step(self, count: int = 1) -> None:
        sim = self.sim
        for _ in range(count):
            await sim.lifecycle.step()
            await sim._step_controllers()
            await sim.scheduler.run_once()
            await sim._step_controllers()
            await sim.lifecycle.step()
            sim.clock.advance(1)

    async def wait(self, check: Callable[[], Awaitable[bool]], steps: int = 30) -> bool:
        """Step until ``check`` holds (``true``) or ``steps`` cycles passed (``false``)."""
        for _ in range(steps):
            if await check():
                return True
            await self.step()
        return await check()

    # -- what the e2e helpers look at ----------------------------------------------------------

    async def pods_of(self, job: str, namespace: str = "e2e") -> list[dict]:
        pods = (await self.store.list("v1", "Pod", namespace)).items
        return [
            p
            for p in pods
            if any(
                o.get("kind") == "Job" and o.get("name") == job and o.get("controller")
                for o in p["metadata"].get("ownerReferences") or ()
            )
        ]

    async def ready(self, job: str, namespace: str = "e2e") -> int:
        """Pods of the job Running or Succeeded (``WaitTasksReady``)."""
        return sum(
            1
            for p in await self.pods_of(job, namespace)
            if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")
        )

    async def ready_by_priority(self, job: str, namespace: str = "e2e") -> dict[str, int]:
        counts: dict[str, int] = {}
        for p in await self.pods_of(job, namespace):
            if (p.get("status") or {}).get("phase") in ("Running", "Succeeded"):
                name = (p.get("spec") or {}).get("priorityClassName", "")
                counts[name] = counts.get(name, 0) + 1
        return counts

    async def pending(self, job: str, namespace: str = "e2e") -> int:
        return sum(
            1
            for p in await self.pods_of(job, namespace)
            if (p.get("status") or {}).get("phase", "Pending") == "Pending"
        )

    async def vcjob(self, name: str, namespace: str = "e2e") -> dict:
        return await self.store.get(k.BATCH_V1ALPHA1, "Job", name, namespace)

    async def job_state(self, name: str, namespace: str = "e2e") -> str:
        job = await self.vcjob(name, namespace)
        return ((job.get("status") or {}).get("state") or {}).get("phase", "")

    async def podgroup_of(self, job: str, namespace: str = "e2e") -> dict:
        for pg in (await self.store.list(SCHEDULING, "PodGroup", namespace)).items:
            owners = pg["metadata"].get("ownerReferences") or ()
            if any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
                return pg
        raise NotFoundError(f"no PodGroup of job {namespace}/{job}")

    async def pg_phase(self, job: str, namespace: str = "e2e") -> str:
        try:
            pg = await self.podgroup_of(job, namespace)
        except NotFoundError:
            return ""
        return (pg.get("status") or {}).get("phase", "")

    async def pg_statistics(self, queue_name: str) -> dict[str, int]:
        """PodGroups of a queue by phase (``e2eutil.GetPodGroupStatistics``)."""
        counts: dict[str, int] = {}
        for pg in (await self.store.list(SCHEDULING, "PodGroup")).items:
            if (pg.get("spec") or {}).get("queue", k.DEFAULT_QUEUE) != queue_name:
                continue
            if pg["metadata"].get("namespace") == PLACEHOLDER_NS:
                continue
            phase = (pg.get("status") or {}).get("phase") or "Pending"
            counts[phase] = counts.get(phase, 0) + 1
        return counts

    async def remove_gates(self, job: str, namespace: str = "e2e") -> None:
        for p in await self.pods_of(job, namespace):
            if (p.get("spec") or {}).get("schedulingGates"):
                p["spec"]["schedulingGates"] = []
                await self.store.update(p)

    async def events(self, *, reason: str | None = None, kind: str | None = None) -> list[dict]:
        items = (await self.store.list("v1", "Event")).items
        return [
            e
            for e in items
            if (reason is None or e.get("reason") == reason)
            and (kind is None or e["involvedObject"].get("kind") == kind)
        ]

    async def queue_obj(self, name: str) -> dict:
        return await self.store.get(SCHEDULING, "Queue", name, None)

    async def set_reclaimable(self, names: list[str], reclaimable: bool) -> None:
        for name in names:
            obj = await self.queue_obj(name)
            obj["spec"]["reclaimable"] = reclaimable
            await self.store.update(obj)


def e2e_queue(
    name: str, *, deserved: dict[str, str] | None = None, parent: str | None = None
) -> dict[str, Any]:
    """A Queue as ``e2eutil.CreateQueue`` makes it (weight 1)."""
    obj = queue(name, parent=parent)
    if deserved:
        obj["spec"]["deserved"] = dict(deserved)
    return obj

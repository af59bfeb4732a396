"""The embedded simulator: the real scheduler on the in-memory store with a virtual clock.

Each step delivers the objects due at the current virtual time, runs one scheduling cycle and
the pod lifecycle, and samples the cluster. While a step changes something the clock moves one
second (one cycle per simulated second, like ``--schedule-period=1s``); when nothing changed,
nothing can change before the next arrival or pod completion, so the clock jumps there. The run
ends when no arrival or completion is left (or at ``max_time``).

A CronJob's timer never runs out, so each CronJob may create at most ``max_cron_runs`` jobs
(:data:`DEFAULT_MAX_CRON_RUNS`) in one run; then the simulator suspends it (``spec.suspend``,
as an operator would) and says so in :attr:`SimulationResult.notes`. Without the cap a
``* * * * *`` schedule would make 43,200 jobs over the default 30-day horizon.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stromboli.core.admission.policy import QueuePolicy
from stromboli.core.api import constants as k
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.cronjob import CronJobController
from stromboli.core.controller.enrol import POD, PodEnroller
from stromboli.core.controller.job.controller import JobController
from stromboli.core.controller.jobflow import JobFlowController
from stromboli.core.events import EventRecorder
from stromboli.core.scheduler.api.plaingroup import OBJECT, PlainPodGroups
from stromboli.core.scheduler.conf import ConfigSource
from stromboli.core.scheduler.metrics import SchedulerMetrics
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.simulate.admission import Admission
from stromboli.core.simulate.inert import inert_warnings, simulator_kind
from stromboli.core.simulate.lifecycle import PodLifecycle
from stromboli.core.simulate.loader import SimObject, SimulationInputError
from stromboli.core.simulate.operators import OperatorEmulation
from stromboli.core.simulate.timeline import Sample, sample
from stromboli.core.simulate.workloads import DEFAULT_MAX_PODS, WorkloadControllers

#: Creation order within one instant: what others refer to goes first.
KIND_RANK = {
    "Namespace": 0,
    "PriorityClass": 1,
    "Queue": 2,
    "Node": 3,
    "HyperNode": 4,
    "ResourceQuota": 5,
    "PodDisruptionBudget": 5,
    "PodGroup": 6,
}
DEFAULT_MAX_TIME = 30 * 24 * 3600.0
#: Reason of the Event recording an input object the admission pass or the store refused.
ADMISSION_REJECTED = "AdmissionRejected"
#: Source component of that Event: the refusal is the API server's (or its webhooks').
API_SERVER_COMPONENT = "kube-apiserver"
DEFAULT_MAX_CRON_RUNS = 1000
DEFAULT_MAX_WORKLOAD_PODS = DEFAULT_MAX_PODS


@dataclass(frozen=True, slots=True)
class Rejection:
    """An input object that was not stored, and why (the webhook's or API server's words)."""

    where: str
    api_version: str
    kind: str
    namespace: str
    name: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.kind} {self.name!r}: {self.message}"

    def reference(self) -> dict[str, str]:
        """The Event's ``involvedObject`` (no uid: the object was never stored)."""
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            ref["namespace"] = self.namespace
        return ref


class RejectedError(SimulationInputError):
    """An input object refused when it was submitted; the run records it and goes on."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


@dataclass(slots=True)
class SimulationResult:
    store: MemoryStore
    scheduler: Scheduler
    lifecycle: PodLifecycle
    controller: JobController
    timeline: list[Sample] = field(default_factory=list)
    cycles: int = 0
    end_time: float = 0.0
    #: Seconds the scheduler spent deciding (snapshot and actions), and binding/writing.
    decision_seconds: float = 0.0
    write_seconds: float = 0.0
    wall_seconds: float = 0.0
    pods_bound: int = 0
    hit_max_time: bool = False
    #: Per cycle: (decision seconds, pods bound), for benchmarks.
    cycle_figures: list[tuple[float, int]] = field(default_factory=list)
    #: What the simulator itself decided and the reader should know (a CronJob stopped).
    notes: list[str] = field(default_factory=list)
    #: Input objects the admission pass or the store refused, in the order they arrived.
    rejections: list[Rejection] = field(default_factory=list)
    #: One line per input kind stored with nothing acting on it (a Role, a ConfigMap).
    warnings: list[str] = field(default_factory=list)


class Simulation:
    def __init__(
        self,
        objects: list[SimObject],
        scheduler_conf: str | Path | None = None,
        max_time: float = DEFAULT_MAX_TIME,
        on_progress: Callable[[float, int], None] | None = None,
        metrics: SchedulerMetrics | None = None,
        max_cron_runs: int = DEFAULT_MAX_CRON_RUNS,
        queue_policy: QueuePolicy | None = None,
        max_workload_pods: int = DEFAULT_MAX_WORKLOAD_PODS,
        plain_pod_groups: PlainPodGroups = OBJECT,
    ) -> None:
        self.arrivals = sorted(objects, key=lambda o: (o.submit_at, KIND_RANK.get(o.kind, 7)))
        self.clock = VirtualClock()
        # A fixed seed makes uids, and so every tie broken by uid, the same on every run.
        self.store = MemoryStore(self.clock, seed=0, kinds=simulator_kind)
        from stromboli.core.scheduler.builtins import register_builtins  # lazily: CLI start-up

        register_builtins()
        self.config = ConfigSource(scheduler_conf)
        self.scheduler = Scheduler(
            self.store, self.clock, self.config, plain_pod_groups=plain_pod_groups
        )
        self.lifecycle = PodLifecycle(self.store, self.clock)
        self.scheduler_names = {k.DEFAULT_SCHEDULER_NAME}
        #: One admission pass per object submitted: the input's, and what controllers create.
        self.admission = Admission()
        if queue_policy is not None:
            self.admission.queue_policy = queue_policy
        # The vcjob controller; pods it creates pass the same admission as the input's.
        self.controller = JobController(self.store, self.clock, mutate_pod=self.admission.admit)
        # The PodGroup controller's enrolment of plain pods, as the live controller runs it;
        # fed each pod as it is created rather than through a watch of its own.
        self.enroller = PodEnroller(
            self.store,
            self.scheduler_names,
            events=self.controller.recorder,
            plain_pod_groups=plain_pod_groups,
        )
        # CronJobs and JobFlows: the jobs they create get the job webhook's defaults and checks.
        self.cronjobs = CronJobController(self.store, self.clock, mutate_job=self._admit_cron_job)
        self.max_cron_runs = max_cron_runs
        #: Jobs made per CronJob (apiVersion, namespace, name), and those that reached the cap.
        self.cron_runs: dict[tuple[str, str, str], int] = {}
        self._cron_capped: list[tuple[str, str, str]] = []
        self.notes: list[str] = []
        self.jobflows = JobFlowController(self.store, self.clock, mutate_job=self._admit_job)
        # kube-controller-manager's workload controllers (Deployments, StatefulSets, batch Jobs
        # and CronJobs); their pods pass admission and enrolment as the input's do.
        self.workloads = WorkloadControllers(
            self.store,
            self.clock,
            self._create_pod,
            mutate_job=self._count_cron_job,
            max_pods=max_workload_pods,
        )
        # The framework operators (training operator, KubeRay, Spark, JobSet) and our adapters.
        self.operators = OperatorEmulation(
            self.store, self.clock, self._create_pod, max_pods=max_workload_pods
        )
        self.max_time = max_time
        self.on_progress = on_progress
        #: Fed every cycle, as ``stromboli scheduler`` feeds the one it serves.
        self.metrics = metrics
        self.rejections: list[Rejection] = []
        #: Records what the API server refused (reason ``AdmissionRejected``).
        self.api_events = EventRecorder(self.store, self.clock, API_SERVER_COMPONENT)
        #: The built-in queues the input declared: its spec replaced the scheduler's.
        self._declared_builtin: set[str] = set()

    def _admit_job(self, job: dict) -> dict:
        return self.admission.admit(job)

    def _admit_cron_job(self, job: dict) -> dict:
        return self._admit_job(self._count_cron_job(job))

    def _count_cron_job(self, job: dict) -> dict:
        """Count a job a CronJob (Volcano's or Kubernetes') makes, towards its cap."""
        meta = job.get("metadata") or {}
        owner = next(
            (r for r in meta.get("ownerReferences") or () if r.get("kind") == "CronJob"), None
        )
        if owner is not None:
            key = (
                str(owner.get("apiVersion") or k.BATCH_V1ALPHA1),
                str(meta.get("namespace") or "default"),
                str(owner.get("name")),
            )
            self.cron_runs[key] = self.cron_runs.get(key, 0) + 1
            if self.cron_runs[key] == self.max_cron_runs:
                self._cron_capped.append(key)
        return job

    async def _create_pod(self, pod: dict) -> dict:
        """A workload controller's pod, created as the API server would: admission (which
        may refuse it), the store, then the PodGroup controller's enrolment."""
        created = await self.store.create(self.admission.admit(pod))
        self.enroller.seen(POD, "ADDED", created)
        await self.enroller.enrol_waiting()
        return created

    async def _suspend_capped_cronjobs(self) -> int:
        """Suspend the CronJobs that made their last allowed job (see the module docstring)."""
        changed = 0
        while self._cron_capped:
            api_version, namespace, name = self._cron_capped.pop()
            try:
                cronjob = await self.store.get(api_version, "CronJob", name, namespace)
                cronjob["spec"] = {**(cronjob.get("spec") or {}), "suspend": True}
                await self.store.update(cronjob)
            except ApiError as err:
                self.notes.append(f"CronJob {namespace}/{name}: could not be suspended: {err}")
                continue
            changed += 1
            self.notes.append(
                f"CronJob {namespace}/{name}: suspended at {self.clock.seconds:.0f}s after "
                f"{self.max_cron_runs} runs (the simulator's limit; change it with "
                "--max-cron-runs)"
            )
        return changed

    async def _step_controllers(self) -> int:
        changed = await self.cronjobs.step()
        changed += await self.workloads.step()
        changed += await self.operators.step()
        changed += await self._suspend_capped_cronjobs()
        changed += await self.jobflows.step()
        return changed + await self.controller.step()

    def _rejection(self, item: SimObject, message: str) -> RejectedError:
        meta = item.obj.get("metadata") or {}
        return RejectedError(
            Rejection(
                item.where,
                str(item.obj.get("apiVersion") or ""),
                item.kind,
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
                message,
            )
        )

    async def _submit(self, item: SimObject) -> None:
        """Deliver ``item``; a refusal is an outcome: recorded, with a Warning Event
        ``AdmissionRejected`` on the object, and the run goes on."""
        try:
            await self._deliver(item)
        except RejectedError as err:
            self.rejections.append(err.rejection)
            await self.api_events.record(
                err.rejection.reference(), "Warning", ADMISSION_REJECTED, err.rejection.message
            )

    async def _deliver(self, item: SimObject) -> None:
        """Admit and store ``item``; raises :class:`RejectedError` if it is refused."""
        try:
            obj = self.admission.admit(item.obj)
        except ValueError as err:
            raise self._rejection(item, str(err)) from None
        if await self._declare_builtin_queue(obj):
            return
        try:
            created = await self.store.create(obj)
        except ApiError as err:
            raise self._rejection(item, str(err)) from None
        if obj.get("status") and created.get("status") != obj["status"]:
            # Objects with a status subresource drop status on create, as the API server
            # does; the simulator's input may set it (a Closed queue, a Running pod).
            created["status"] = obj["status"]
            created = await self.store.update_status(created)
        if obj["kind"] == "Queue" and not (created.get("status") or {}).get("state"):
            created["status"] = {**(created.get("status") or {}), "state": "Open"}
            created = await self.store.update_status(created)
        if obj["kind"] == "Pod":
            # Enrolled now, before the next object is created: the PodGroup's uid (and so every
            # tie broken by uid) depends on the order of creation.
            self.enroller.seen(POD, "ADDED", created)
            await self.enroller.enrol_waiting()

    async def _declare_builtin_queue(self, queue: dict) -> bool:
        """A declared ``root`` or ``default`` Queue replaces the one the scheduler created at
        start: the declared spec wins, as it would on a cluster where it was applied before
        the scheduler started. Returns whether ``queue`` was such a declaration."""
        name = (queue.get("metadata") or {}).get("name")
        if (
            (queue.get("apiVersion"), queue.get("kind")) != (k.SCHEDULING_V1BETA1, "Queue")
            or name not in (k.ROOT_QUEUE, k.DEFAULT_QUEUE)
            or name in self._declared_builtin
        ):
            return False
        try:
            current = await self.store.get(k.SCHEDULING_V1BETA1, "Queue", name)
        except NotFoundError:
            return False
        self._declared_builtin.add(name)
        meta = queue.get("metadata") or {}
        current["metadata"] = {
            **current["metadata"],
            "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {},
        }
        current["spec"] = queue.get("spec") or {}
        updated = await self.store.update(current)
        status = queue.get("status") or {}
        updated["status"] = {
            **(updated.get("status") or {}),
            **status,
            "state": status.get("state") or "Open",
        }
        await self.store.update_status(updated)
        return True

    async def run(self) -> SimulationResult:
        started = time.perf_counter()
        result = SimulationResult(self.store, self.scheduler, self.lifecycle, self.controller)
        await self.scheduler.start()
        await self.lifecycle.start()
        await self.controller.start()
        await self.cronjobs.start()
        await self.jobflows.start()
        await self.workloads.start()
        await self.operators.start()
        next_arrival = 0
        while True:
            now = self.clock.seconds
            changed = 0
            while (
                next_arrival < len(self.arrivals) and self.arrivals[next_arrival].submit_at <= now
            ):
                await self._submit(self.arrivals[next_arrival])
                next_arrival += 1
                changed += 1
            changed += await self.lifecycle.step()
            changed += await self._step_controllers()
            stats = await self.scheduler.run_once()
            if self.metrics is not None:
                self.metrics.observe(stats)
            result.cycles += 1
            result.decision_seconds += stats.decision_seconds
            result.write_seconds += stats.write_seconds
            result.pods_bound += stats.bound
            result.cycle_figures.append((stats.decision_seconds, stats.bound))
            changed += stats.bound + stats.evicted + stats.status_writes
            changed += await self._step_controllers()
            changed += await self.lifecycle.step()
            result.timeline.append(sample(now, self.scheduler))
            if self.on_progress is not None:
                self.on_progress(now, next_arrival)
            upcoming = [
                t
                for t in (
                    self.arrivals[next_arrival].submit_at
                    if next_arrival < len(self.arrivals)
                    else None,
                    self.lifecycle.next_finish(),
                    self.controller.next_wakeup(),
                    self.cronjobs.next_wakeup(),
                    self.workloads.next_wakeup(),
                )
                if t is not None
            ]
            if changed:
                target = now + 1.0
            elif upcoming:
                target = max(min(upcoming), now + 1.0)
            else:
                break
            if target > self.max_time:
                result.hit_max_time = True
                break
            self.clock.set(target)
        result.end_time = self.clock.seconds
        result.notes = [*self.notes, *self.workloads.notes, *self.operators.notes]
        result.rejections = list(self.rejections)
        result.warnings = inert_warnings((o.obj.get("apiVersion"), o.kind) for o in self.arrivals)
        result.timeline = [s for s in result.timeline]
        result.wall_seconds = time.perf_counter() - started
        return result

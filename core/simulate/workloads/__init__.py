"""The built-in workload controllers of kube-controller-manager, emulated on the simulator's
store and virtual clock: Deployment → ReplicaSet → Pods, StatefulSet, batch Job and CronJob.

Their pods pass the same admission as the input's and are enrolled into PodGroups by the same
PodGroup controller (``podgroup-<owner uid>``), so a Deployment for ``schedulerName: volcano``
is scheduled as on a cluster running Volcano.
"""

from __future__ import annotations

from typing import Any

from stromboli.core.clock import Clock
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.reconciler import JobMutator, Reconciler
from stromboli.core.events import EventRecorder
from stromboli.core.informer import Informer
from stromboli.core.simulate.workloads.batchjob import BatchJobController
from stromboli.core.simulate.workloads.common import (
    COMPONENT,
    DEFAULT_MAX_PODS,
    POD,
    CreatePod,
    OwnerController,
)
from stromboli.core.simulate.workloads.cronjob import BatchCronJobController
from stromboli.core.simulate.workloads.deployment import DeploymentController
from stromboli.core.simulate.workloads.replicaset import ReplicaSetController
from stromboli.core.simulate.workloads.statefulset import StatefulSetController

__all__ = ["DEFAULT_MAX_PODS", "WorkloadControllers"]


class WorkloadControllers:
    """All of them, stepped together; the order is the order of ownership (a CronJob makes a
    Job, a Deployment a ReplicaSet, which makes pods) so one step carries a change down."""

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        create_pod: CreatePod,
        *,
        mutate_job: JobMutator | None = None,
        max_pods: int = DEFAULT_MAX_PODS,
    ) -> None:
        self.recorder = EventRecorder(store, clock, COMPONENT)
        self.cronjobs = BatchCronJobController(store, clock, self.recorder, mutate_job=mutate_job)
        self.owners: list[OwnerController] = [
            cls(
                store,
                clock,
                self.recorder,
                create_pod,
                max_pods,
                watch_children=cls.child_kind != POD,
            )
            for cls in (
                BatchJobController,
                DeploymentController,
                ReplicaSetController,
                StatefulSetController,
            )
        ]
        self._pod_owners = [c for c in self.owners if c.child_kind == POD]
        #: One pod watch for every controller that owns pods.
        self.pods = Informer(store, [POD], self._pod_seen)
        self._started = False

    def _pod_seen(self, kind: tuple[str, str], event_type: str, pod: dict[str, Any]) -> None:
        for controller in self._pod_owners:
            controller.seen(kind, event_type, pod)

    @property
    def controllers(self) -> list[Reconciler[Any]]:
        return [self.cronjobs, *self.owners]

    async def start(self) -> None:
        await self.pods.start()
        for controller in self.controllers:
            await controller.start()
        self._started = True

    async def step(self) -> int:
        """One round of each (started first if need be, as a reconciler's ``step`` is);
        returns the objects written."""
        if not self._started:
            await self.start()
        await self.pods.pump()
        return sum([await controller.step() for controller in self.controllers])

    def next_wakeup(self) -> float | None:
        times = [t for c in self.controllers if (t := c.next_wakeup()) is not None]
        return min(times) if times else None

    @property
    def notes(self) -> list[str]:
        return [note for owner in self.owners for note in owner.notes]

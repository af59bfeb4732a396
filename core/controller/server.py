"""``stromboli controller``: the vcjob, CronJob and JobFlow controllers and PodGroup enrolment
on a live cluster.

Runs the same ``JobController`` the simulator steps, fed live events instead: by a kopf operator
(``driver="kopf"``, the default; see :mod:`.kopfdriver`) or by the controllers' own list+watch
informers (``driver="native"``). Optional leader election on a Lease so that only one replica
acts; health and controller metrics served over HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from stromboli.core.api import constants as k
from stromboli.core.clock import Clock, SystemClock
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.cronjob import CronJobController
from stromboli.core.controller.enrol import PodEnroller
from stromboli.core.controller.hypernodes import HyperNodeDiscovery
from stromboli.core.controller.job.controller import JobController
from stromboli.core.controller.jobflow import JobFlowController
from stromboli.core.controller.metrics import ControllerMetrics
from stromboli.core.httpserve import Endpoint, start_process_endpoints
from stromboli.core.informer import Informer, Kind
from stromboli.core.leaderelection import LeaderElector
from stromboli.core.scheduler.api.plaingroup import OBJECT, PlainPodGroups

if TYPE_CHECKING:
    from stromboli.core.controller.kopfdriver import KopfDriver

log = logging.getLogger(__name__)
LEASE_NAME = "vc-controller-manager"
POD = ("v1", "Pod")
DRIVERS = ("kopf", "native")


class Extension(Protocol):
    """A controller from a layer above (the framework adapters) run in this process: its
    informer is fed as ours are, and it sees the shared pod watch."""

    informer: Informer

    async def prepare(self) -> None:
        """Discover what to follow (sets ``informer``); called once, before any event."""

    def seen(self, kind: Kind, event_type: str, obj: dict) -> None:
        """A pod event of the shared watch."""

    async def run(self, own_watch: bool = True) -> None:
        """Reconcile until cancelled; ``own_watch=False`` when a driver feeds the informer."""


@dataclass(slots=True)
class ControllerOptions:
    scheduler_names: tuple[str, ...] = (k.DEFAULT_SCHEDULER_NAME,)
    healthz_address: str = ":11251"
    listen_address: str = ":8081"
    driver: str = "kopf"
    leader_elect: bool = False
    lock_object_namespace: str = "volcano-system"
    max_requeue: int = 15
    #: Where plain pods' groups live; ``memory`` must match the scheduler's flag.
    plain_pod_groups: PlainPodGroups = OBJECT


class ControllerServer:
    def __init__(
        self,
        store: ClusterStore,
        options: ControllerOptions,
        clock: Clock | None = None,
        extensions: Sequence[Extension] = (),
    ) -> None:
        if options.driver not in DRIVERS:
            raise ValueError(f"driver {options.driver!r} is not one of {', '.join(DRIVERS)}")
        self.store = store
        self.options = options
        self.clock = clock or SystemClock()
        self.metrics = ControllerMetrics()
        self.jobs = JobController(
            store, self.clock, max_requeue=options.max_requeue, metrics=self.metrics
        )
        self.cronjobs = CronJobController(store, self.clock)
        self.jobflows = JobFlowController(store, self.clock, metrics=self.metrics)
        self.hypernodes = HyperNodeDiscovery(store, self.clock, options.lock_object_namespace)
        self.enroller = PodEnroller(
            store,
            set(options.scheduler_names),
            events=self.jobs.recorder,
            plain_pod_groups=options.plain_pod_groups,
        )
        self.extensions = list(extensions)
        for quarantine in (
            self.jobs.informer.quarantine,
            self.cronjobs.informer.quarantine,
            self.jobflows.informer.quarantine,
            self.hypernodes.informer.quarantine,
            self.enroller.quarantine,
            *(extension.informer.quarantine for extension in self.extensions),
        ):
            quarantine.counter = self.metrics.invalid_objects
        # One pod watch for both: the job controller's informer hands pod events on.
        job_handler = self.jobs.informer.handler

        def handle(kind: tuple[str, str], event_type: str, obj: dict) -> None:
            job_handler(kind, event_type, obj)
            if kind == POD:
                self.enroller.seen(kind, event_type, obj)
                for extension in self.extensions:
                    extension.seen(kind, event_type, obj)

        self.jobs.informer.handler = handle
        self.driver: KopfDriver | None = None
        if options.driver == "kopf":
            from stromboli.core.cluster.kube import KubeStore
            from stromboli.core.controller.kopfdriver import KopfDriver

            if not isinstance(store, KubeStore):
                raise ValueError("driver 'kopf' needs a Kubernetes store; use driver 'native'")
            informers = [
                c.informer for c in (self.jobs, self.cronjobs, self.jobflows, self.hypernodes)
            ]
            self.driver = KopfDriver(store, informers, on_signal=self.stop)
        self.stopping = asyncio.Event()
        self.endpoints: list[Endpoint] = []
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            self.elector = LeaderElector.for_this_process(
                store, self.clock, LEASE_NAME, options.lock_object_namespace
            )

    def healthy(self) -> tuple[bool, str]:
        return True, "ok"

    def stop(self) -> None:
        self.stopping.set()

    async def run(self) -> None:
        """Serve until ``stop()``; returns early if a worker fails or the Lease is lost."""
        self.endpoints = await start_process_endpoints(
            self.metrics.registry,
            self.options.listen_address,
            self.healthy,
            self.options.healthz_address,
        )
        workers: list[asyncio.Task] = []
        driver: asyncio.Task | None = None
        try:
            if self.elector is not None:
                if not await self.elector.acquire_unless(self.stopping):
                    return
                workers.append(asyncio.create_task(self.elector.keep_renewing()))
            for extension in self.extensions:
                await extension.prepare()
                if self.driver is not None:
                    self.driver.attach(extension.informer)
            if self.driver is not None:
                # kopf gives SIGTERM back to stop() once up; if one reaches it before, kopf
                # stops itself, and its end is ours.
                driver = asyncio.create_task(self.driver.run())
                workers.append(driver)
            workers.append(asyncio.create_task(self.jobs.run()))
            workers.append(asyncio.create_task(self.cronjobs.run()))
            workers.append(asyncio.create_task(self.jobflows.run()))
            workers.append(asyncio.create_task(self.hypernodes.run()))
            workers.append(asyncio.create_task(self.enroller.run(own_watch=False)))
            for extension in self.extensions:
                own_watch = self.driver is None
                workers.append(asyncio.create_task(extension.run(own_watch=own_watch)))
            stopping = asyncio.create_task(self.stopping.wait())
            done, _ = await asyncio.wait({stopping, *workers}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = None if task is stopping or task.cancelled() else task.exception()
                if error is not None:
                    raise error
        finally:
            # Our controllers first, mid-write or not; the watches that feed them (kopf) last,
            # so that kopf, stopping, finds none of our tasks to cancel.
            ours = [task for task in workers if task is not driver]
            for task in ours:
                task.cancel()
            await asyncio.gather(*ours, return_exceptions=True)
            if driver is not None:
                driver.cancel()  # kopf is then stopped through its stop flag
                await asyncio.gather(driver, return_exceptions=True)
            if self.elector is not None:
                await self.elector.release()
            for endpoint in self.endpoints:
                await endpoint.stop()

"""``stromboli controller``: the vcjob, CronJob and JobFlow controllers and PodGroup enrolment
on a live cluster.

Runs the same ``JobController`` the simulator steps, following watches instead; optional
leader election on a Lease so that only one replica acts; health served over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from stromboli.core.api import constants as k
from stromboli.core.clock import Clock, SystemClock
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.cronjob import CronJobController
from stromboli.core.controller.enrol import PodEnroller
from stromboli.core.controller.job.controller import JobController
from stromboli.core.controller.jobflow import JobFlowController
from stromboli.core.httpserve import Endpoint, healthz_app
from stromboli.core.leaderelection import LeaderElector

log = logging.getLogger(__name__)
LEASE_NAME = "vc-controller-manager"
POD = ("v1", "Pod")


@dataclass(slots=True)
class ControllerOptions:
    scheduler_names: tuple[str, ...] = (k.DEFAULT_SCHEDULER_NAME,)
    healthz_address: str = ":11251"
    leader_elect: bool = False
    lock_object_namespace: str = "volcano-system"
    max_requeue: int = 15


class ControllerServer:
    def __init__(
        self, store: ClusterStore, options: ControllerOptions, clock: Clock | None = None
    ) -> None:
        self.store = store
        self.options = options
        self.clock = clock or SystemClock()
        self.jobs = JobController(store, self.clock, max_requeue=options.max_requeue)
        self.cronjobs = CronJobController(store, self.clock)
        self.jobflows = JobFlowController(store, self.clock)
        self.enroller = PodEnroller(store, set(options.scheduler_names))
        # One pod watch for both: the job controller's informer hands pod events on.
        job_handler = self.jobs.informer.handler

        def handle(kind: tuple[str, str], event_type: str, obj: dict) -> None:
            job_handler(kind, event_type, obj)
            if kind == POD:
                self.enroller.seen(kind, event_type, obj)

        self.jobs.informer.handler = handle
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
        if self.options.healthz_address:
            endpoint = Endpoint(healthz_app(self.healthy), self.options.healthz_address)
            await endpoint.start()
            self.endpoints.append(endpoint)
        workers: list[asyncio.Task] = []
        try:
            if self.elector is not None:
                if not await self.elector.acquire_unless(self.stopping):
                    return
                workers.append(asyncio.create_task(self.elector.keep_renewing()))
            workers.append(asyncio.create_task(self.jobs.run()))
            workers.append(asyncio.create_task(self.cronjobs.run()))
            workers.append(asyncio.create_task(self.jobflows.run()))
            workers.append(asyncio.create_task(self.enroller.run(own_watch=False)))
            stopping = asyncio.create_task(self.stopping.wait())
            done, _ = await asyncio.wait({stopping, *workers}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopping and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            for task in workers:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*workers, return_exceptions=True)
            if self.elector is not None:
                await self.elector.release()
            for endpoint in self.endpoints:
                await endpoint.stop()

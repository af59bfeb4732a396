"""The framework adapters inside ``stromboli controller``: run next to the vcjob controller,
fed by the kopf driver as the other controllers are, sharing the pod watch."""

from __future__ import annotations

import asyncio
from typing import Any

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.kopfdriver import KopfDriver
from stromboli.core.controller.server import ControllerOptions, ControllerServer
from stromboli.integrations.kinds import with_framework_kinds
from stromboli.integrations.live import PODGROUP, FrameworkController

from .test_handlers_live import ENROLL, PYTORCH, enrolled_pod, namespace, pytorchjob

POD = ("v1", "Pod")


async def eventually(check: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_the_controller_process_runs_the_adapters_on_its_pod_watch() -> None:
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds([PYTORCH]), seed=0)
    await store.create(namespace("ns", ENROLL))
    adapters = FrameworkController(store)
    options = ControllerOptions(driver="native", listen_address="", healthz_address="")
    server = ControllerServer(store, options, extensions=[adapters])
    running = asyncio.create_task(server.run())
    try:
        await store.create(pytorchjob())

        async def has_group() -> bool:
            return bool((await store.list(*PODGROUP, "ns")).items)

        await eventually(has_group)
        labels = {
            "training.kubeflow.org/job-name": "train",
            "training.kubeflow.org/replica-type": "master",
        }
        await store.create(enrolled_pod("train-master-0", labels, "train"))

        async def has_role() -> bool:
            pod = await store.get(*POD, "train-master-0", "ns")
            return pod["metadata"]["annotations"].get("volcano.sh/task-spec") == "master"

        await eventually(has_role)  # the pod came through the job controller's pod watch
    finally:
        server.stop()
        await asyncio.wait_for(running, 10)


async def test_the_kopf_driver_feeds_the_adapters_informer_after_discovery() -> None:
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds([PYTORCH]), seed=0)
    await store.create(namespace("ns", ENROLL))
    adapters = FrameworkController(store)
    server = ControllerServer(store, ControllerOptions(driver="native"), extensions=[adapters])
    driver = KopfDriver(store, [server.jobs.informer])  # type: ignore[arg-type]
    await adapters.prepare()
    driver.attach(adapters.informer)
    assert adapters.informer.fed
    # kopf's watches are registered once, at start; a framework kind comes and goes with its
    # CRD, so it has a watch of its own, not one of the driver's.
    assert PODGROUP in driver.kinds and PYTORCH not in driver.kinds
    assert list(adapters.watches.informers) == [PYTORCH]
    assert len(driver.routes[PODGROUP]) == 2  # the job controller's and the adapters'
    await driver.prime()
    await adapters.informer.start()  # released by the driver's first listing
    await store.create(pytorchjob())
    await adapters.pump()
    assert [g["metadata"]["name"] for g in (await store.list(*PODGROUP, "ns")).items] == ["train"]

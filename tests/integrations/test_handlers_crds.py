"""Framework CRDs installed and deleted while the adapters run (integrations/live.py,
integrations/watches.py), on the in-memory store: a CRD that becomes Established starts its
kind's watch, a deleted one stops it, one stored in a version we do not read is logged once
and skipped, and a kind whose watch fails is retried without stopping anything."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.integrations.kinds import CRD_KIND, framework_kind, with_framework_kinds
from stromboli.integrations.live import PODGROUP, FrameworkController
from stromboli.integrations.watches import KindWatches

from .test_crds import crd
from .test_handlers_live import ENROLL, PYTORCH, namespace, pytorchjob

CRD = (CRD_KIND.api_version, CRD_KIND.kind)
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


async def eventually(check: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def running(
    store: MemoryStore, kinds: list[Any] | None = None
) -> tuple[FrameworkController, asyncio.Task[None]]:
    await store.create(namespace("ns", ENROLL))
    adapters = FrameworkController(store, kinds=kinds)
    await adapters.prepare()
    task = asyncio.create_task(adapters.run())
    return adapters, task


async def install(store: MemoryStore, made: dict[str, Any]) -> dict[str, Any]:
    """Create a CRD and give it its status, as the API server's controllers do."""
    status = made["status"]
    created = await store.create(made)
    return await store.update_status({**created, "status": status})


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled(), task  # ended by us, not by an error of its own


async def has_group(store: MemoryStore, name: str = "train") -> bool:
    return any(g["metadata"]["name"] == name for g in (await store.list(*PODGROUP, "ns")).items)


async def test_a_crd_established_later_is_followed_and_a_deleted_one_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "stromboli.integrations")
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds(), seed=0)
    adapters, task = await running(store, kinds=[])  # none found at start
    try:
        lws = crd("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "leaderworkersets")
        lws["status"]["conditions"][1]["status"] = "False"
        created = await install(store, lws)  # created, not established yet
        await asyncio.sleep(0.05)
        assert LWS not in adapters.served_kinds
        created["status"]["conditions"][1]["status"] = "True"
        await store.update_status(created)

        async def lws_followed() -> bool:
            return LWS in adapters.served_kinds and LWS in adapters.watches.informers

        await eventually(lws_followed)
        assert (
            "framework adapter on for LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): its CRD "
            "leaderworkersets.leaderworkerset.x-k8s.io is established"
        ) in caplog.text
        await store.delete(*CRD, created["metadata"]["name"])

        async def lws_dropped() -> bool:
            return LWS not in adapters.served_kinds and LWS not in adapters.watches.informers

        await eventually(lws_dropped)
        assert (
            "framework adapter off for LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): its CRD "
            "leaderworkersets.leaderworkerset.x-k8s.io was deleted"
        ) in caplog.text
        assert not task.done()
    finally:
        await stop(task)


async def test_objects_of_a_kind_followed_later_get_their_podgroups() -> None:
    served: set[tuple[str, str]] = set()
    resolve = with_framework_kinds()

    def kinds(api_version: str, kind: str) -> Any:
        if framework_kind(api_version, kind) is not None and (api_version, kind) not in served:
            return None  # as if its CRD were not installed yet
        return resolve(api_version, kind)

    store = MemoryStore(SystemClock(), kinds=kinds, seed=0)
    adapters, task = await running(store)
    try:
        assert adapters.served_kinds == frozenset()
        served.add(PYTORCH)  # the CRD installed: the kind is served, and its CRD stored
        await install(store, crd())
        await store.create(pytorchjob())
        await eventually(lambda: has_group(store))
        job = await store.get(*PYTORCH, "train", "ns")
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 5

        async def followed() -> bool:
            groups = (await store.list(*PODGROUP, "ns")).items
            return bool(groups) and groups[0]["spec"]["minMember"] == 6

        await store.update(job)
        await eventually(followed)
        # The CRD goes: its objects first (the API server deletes them), then the CRD.
        await store.delete(*PYTORCH, "train", "ns")
        await store.delete(*CRD, "pytorchjobs.kubeflow.org")
        served.discard(PYTORCH)

        async def dropped() -> bool:
            return PYTORCH not in adapters.served_kinds

        await eventually(dropped)
        assert (
            adapters.objects() == [] and adapters.conversion_of((*PYTORCH, "ns", "train")) is None
        )
        assert not task.done()
    finally:
        await stop(task)


async def test_a_crd_stored_in_a_version_we_do_not_read_is_said_once_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "stromboli.integrations")
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds([]), seed=0)
    adapters, task = await running(store)
    try:
        v2 = await install(store, crd(versions=(("v1", True, False), ("v2", True, True))))
        await asyncio.sleep(0.1)
        v2["metadata"]["labels"] = {"touched": "yes"}  # a new version of the same CRD
        await store.update(v2)
        await asyncio.sleep(0.1)
        said = [r for r in caplog.records if "a version the adapters do not read" in r.message]
        assert len(said) == 1 and said[0].levelno == logging.WARNING
        assert "kubeflow.org/v2" in said[0].message
        assert PYTORCH not in adapters.served_kinds and not task.done()
    finally:
        await stop(task)


async def test_a_watch_that_fails_is_tried_again_and_nothing_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "stromboli.integrations")
    served: set[tuple[str, str]] = set()
    resolve = with_framework_kinds()

    def kinds(api_version: str, kind: str) -> Any:
        if framework_kind(api_version, kind) is not None and (api_version, kind) not in served:
            return None
        return resolve(api_version, kind)

    store = MemoryStore(SystemClock(), kinds=kinds, seed=0)
    _, task = await running(store)
    try:
        # The CRD says established before the kind is served (discovery lags): the watch fails
        # (404), is logged and tried again, and follows once the kind is served.
        await install(store, crd())
        await store.create(namespace("other"))

        async def failed_once() -> bool:
            return "watch of PyTorchJob failed" in caplog.text

        await eventually(failed_once)
        served.add(PYTORCH)
        await store.create(pytorchjob())
        await eventually(lambda: has_group(store), timeout=15)
        assert not task.done()
    finally:
        await stop(task)


async def test_without_crds_to_watch_the_kinds_found_at_start_are_followed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "stromboli.integrations")

    def no_crds(api_version: str, kind: str) -> Any:
        return None if (api_version, kind) == CRD else with_framework_kinds()(api_version, kind)

    store = MemoryStore(SystemClock(), kinds=no_crds, seed=0)
    _, task = await running(store)
    try:
        await store.create(pytorchjob())
        await eventually(lambda: has_group(store))
        assert "CustomResourceDefinitions cannot be watched" in caplog.text
        assert not task.done()
    finally:
        await stop(task)


async def test_kind_watches_pumped_list_once_and_close() -> None:
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds(), seed=0)
    await store.create(namespace("ns", ENROLL))
    seen: list[tuple[str, str]] = []
    adapters = FrameworkController(store)
    watches = KindWatches(
        store, lambda kind, t, o: seen.append((t, o["metadata"]["name"])), adapters.quarantine
    )
    watches.add(PYTORCH)
    await store.create(pytorchjob("a"))
    assert await watches.pump() == 0 and seen == [("ADDED", "a")]  # listed, nothing queued
    await store.create(pytorchjob("b"))
    assert await watches.pump() == 1 and seen[-1] == ("ADDED", "b")
    assert watches.remove(PYTORCH) is not None and watches.remove(PYTORCH) is None
    await watches.close()


async def test_a_kind_is_followed_in_the_version_its_crd_stores(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "stromboli.integrations")
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds(), seed=0)
    adapters, task = await running(store)
    v1, v2 = ("kubeflow.org/v1", "MPIJob"), ("kubeflow.org/v2beta1", "MPIJob")
    try:
        assert v2 in adapters.served_kinds and v1 not in adapters.served_kinds  # discovery
        # The training operator's CRD stores v1 (it serves v2beta1 too, say): v1 is followed.
        await install(
            store,
            crd(
                "kubeflow.org", "MPIJob", "mpijobs", (("v1", True, True), ("v2beta1", True, False))
            ),
        )

        async def switched() -> bool:
            return v1 in adapters.served_kinds and v2 not in adapters.served_kinds

        await eventually(switched)
        assert (
            list(adapters.watches.informers).count(v1) == 1 and v2 not in adapters.watches.informers
        )
        assert (
            "framework adapter off for MPIJob (kubeflow.org/v2beta1): its CRD mpijobs.kubeflow.org "
            "stores it as kubeflow.org/v1"
        ) in caplog.text
    finally:
        await stop(task)

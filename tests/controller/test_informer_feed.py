"""Informers fed from outside (the kopf driver of ``stromboli controller``): duplicates and
stale versions dropped, deletions missed while unwatched synthesised from a full listing, and
the job controller working unchanged on fed events."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.kubeconfig import KubeConfig
from stromboli.core.cluster.kuberesources import Resource
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.job.controller import JobController
from stromboli.core.controller.kopfdriver import KopfDriver, connection_info, kopf_settings
from stromboli.core.controller.server import ControllerOptions, ControllerServer
from stromboli.core.informer import Informer
from stromboli.core.scheduler.scheduler import builtin_queue

from .jobkit import JOB, POD, PODGROUP, vcjob

CM = ("v1", "ConfigMap")
SECRET = ("v1", "Secret")


def cm(name: str, uid: str, version: int) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(version)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def __call__(self, kind: tuple[str, str], event_type: str, obj: dict) -> None:
        meta = obj["metadata"]
        self.events.append((event_type, meta["name"], meta["resourceVersion"]))


def fed(*kinds: tuple[str, str]) -> tuple[Informer, Seen]:
    seen = Seen()
    store = MemoryStore(SystemClock(), seed=0)
    return Informer(store, kinds or [CM], seen, fed=True), seen


def test_duplicates_and_stale_versions_are_dropped() -> None:
    informer, seen = fed()
    assert informer.feed(CM, "ADDED", cm("a", "u1", 5))
    assert not informer.feed(CM, "ADDED", cm("a", "u1", 5))  # kopf's listing of a primed one
    assert not informer.feed(CM, "MODIFIED", cm("a", "u1", 4))  # older than what is held
    assert informer.feed(CM, "ADDED", cm("a", "u1", 7))  # a known object: news, not a birth
    assert not informer.feed(CM, "BOOKMARK", cm("a", "u1", 9))
    assert not informer.feed(SECRET, "ADDED", cm("a", "u1", 9))  # a kind not watched
    assert seen.events == [("ADDED", "a", "5"), ("MODIFIED", "a", "7")]


def test_deletions_of_unknown_or_older_objects_are_dropped() -> None:
    informer, seen = fed()
    assert not informer.feed(CM, "DELETED", cm("a", "u1", 3))
    informer.feed(CM, "ADDED", cm("a", "u2", 5))
    assert not informer.feed(CM, "DELETED", cm("a", "u1", 6))  # the earlier object of that name
    assert informer.feed(CM, "DELETED", cm("a", "u2", 8))
    assert seen.events == [("ADDED", "a", "5"), ("DELETED", "a", "8")]
    assert informer.known[CM] == {}


def test_an_object_replaced_under_its_name_is_deleted_first() -> None:
    informer, seen = fed()
    informer.feed(CM, "ADDED", cm("a", "u1", 5))
    informer.feed(CM, "MODIFIED", cm("a", "u2", 9))  # its deletion was never delivered
    assert seen.events[1:] == [("DELETED", "a", "5"), ("ADDED", "a", "9")]
    assert informer.known[CM][("ns", "a")]["metadata"]["uid"] == "u2"


def test_resync_synthesises_the_deletions_missed() -> None:
    informer, seen = fed()
    informer.feed(CM, "ADDED", cm("gone", "u1", 5))
    informer.feed(CM, "ADDED", cm("kept", "u2", 6))
    before = informer.snapshot(CM)
    # Between the snapshot and the comparison a new object arrives through the stream; the
    # listing (begun earlier) does not hold it, and it must not be taken for deleted.
    informer.feed(CM, "ADDED", cm("young", "u3", 8))
    vanished = informer.resync(CM, [cm("kept", "u2", 7)], before)
    assert vanished == 1
    assert seen.events[-2:] == [("DELETED", "gone", "5"), ("MODIFIED", "kept", "7")]
    assert set(informer.known[CM]) == {("ns", "kept"), ("ns", "young")}


def test_a_deleted_object_does_not_come_back_from_a_late_copy() -> None:
    informer, seen = fed()
    informer.feed(CM, "ADDED", cm("a", "u1", 5))
    before = informer.snapshot(CM)
    # The stream delivers the deletion while a listing begun just before is on its way...
    informer.feed(CM, "DELETED", cm("a", "u1", 6))
    assert informer.resync(CM, [cm("a", "u1", 5)], before) == 0
    # ... and a stream lagging behind a synthesised deletion delivers an older change.
    informer.feed(CM, "ADDED", cm("b", "u2", 7))
    informer.resync(CM, [], informer.snapshot(CM))
    assert not informer.feed(CM, "MODIFIED", cm("b", "u2", 8))
    assert seen.events == [
        ("ADDED", "a", "5"),
        ("DELETED", "a", "6"),
        ("ADDED", "b", "7"),
        ("DELETED", "b", "7"),
    ]
    assert informer.known[CM] == {}


async def test_start_waits_for_the_first_listing_of_every_kind() -> None:
    informer, _ = fed(CM, SECRET)
    started = asyncio.create_task(informer.start())
    informer.resync(CM, [cm("a", "u1", 1)], {})
    await asyncio.sleep(0.01)
    assert not started.done()  # Secrets not listed yet: a controller would act on half a picture
    informer.resync(SECRET, [], {})
    await asyncio.wait_for(started, 1)
    assert await informer.pump() == 0  # nothing queued: fed events go straight to the handler
    running = asyncio.create_task(informer.run())
    await asyncio.sleep(0.01)
    assert not running.done()
    await informer.stop()
    await asyncio.wait_for(running, 1)


async def eventually(check, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_a_fed_job_controller_creates_pods_and_forgets_a_job_deleted_unwatched() -> None:
    clock = SystemClock()
    store = MemoryStore(clock, seed=0)
    await store.create(builtin_queue("root"))
    await store.create(builtin_queue("default"))
    jobs = JobController(store, clock)
    driver = KopfDriver(store, [jobs.informer])  # type: ignore[arg-type]
    assert jobs.informer.fed
    assert set(driver.kinds) == set(jobs.informer.kinds)
    await driver.prime()
    running = asyncio.create_task(jobs.run())
    try:
        created = await store.create(vcjob("train"))
        # The store's own watch is not followed: only what the driver feeds reaches the job.
        driver.deliver(JOB, "ADDED", created)

        async def podgroup() -> dict[str, Any] | None:
            groups = (await store.list(*PODGROUP, "default")).items
            return groups[0] if groups else None

        await eventually(podgroup)
        pg = await podgroup()
        assert pg is not None
        pg["status"] = {**(pg.get("status") or {}), "phase": "Inqueue"}  # the scheduler's part
        driver.deliver(PODGROUP, "MODIFIED", await store.update(pg))

        async def pods_exist() -> bool:
            return len((await store.list(*POD, "default")).items) == 2

        await eventually(pods_exist)
        for pod in (await store.list(*POD, "default")).items:
            driver.deliver(POD, None, pod)  # a kopf listing: type None
        assert ("default", "train") in jobs.jobs
        assert len(jobs.pods[("default", "train")]) == 2
        await store.delete(*JOB, "train", "default")  # while "the watch was down"
        assert await driver.resync(JOB) == 1
        assert ("default", "train") not in jobs.jobs
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


def plain_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_the_driver_watches_pods_itself_and_lists_again_after_gone() -> None:
    clock = SystemClock()
    store = MemoryStore(clock, seed=0, history_limit=3)
    jobs = JobController(store, clock)
    driver = KopfDriver(store, [jobs.informer])  # type: ignore[arg-type]
    await store.create(plain_pod("listed"))
    await driver.prime()
    known = jobs.informer.known[POD]
    assert set(known) == {("default", "listed")}
    watching = asyncio.create_task(driver._watch(POD))
    try:
        await store.create(plain_pod("watched"))
        await eventually(lambda: _true(("default", "watched") in known))
        await store.delete(*POD, "listed", "default")
        await eventually(lambda: _true(("default", "listed") not in known))
        events_before = driver.events
        # A watch from a version the store no longer retains ends in 410 Gone: the driver
        # lists again, which brings what it missed, and watches on from the new listing.
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        for n in range(6):
            await store.create(plain_pod(f"unseen-{n}"))
        await store.delete(*POD, "watched", "default")
        resyncs = driver.resyncs
        watching = asyncio.create_task(driver._watch(POD))
        await eventually(lambda: _true(driver.resyncs == resyncs + 1))
        assert set(known) == {("default", f"unseen-{n}") for n in range(6)}
        await store.create(plain_pod("after"))
        await eventually(lambda: _true(("default", "after") in known))
        assert driver.events > events_before
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


async def _true(value: bool) -> bool:
    return value


def test_the_kopf_driver_needs_a_kubernetes_store() -> None:
    store = MemoryStore(SystemClock(), seed=0)
    with pytest.raises(ValueError, match="driver 'kopf' needs a Kubernetes store"):
        ControllerServer(store, ControllerOptions(driver="kopf"))
    with pytest.raises(ValueError, match="driver 'sidecar' is not one of kopf, native"):
        ControllerServer(store, ControllerOptions(driver="sidecar"))
    server = ControllerServer(store, ControllerOptions(driver="native"))
    assert server.driver is None and not server.jobs.informer.fed


# --- the kopf side: settings, login, registry ----------------------------------------------


def test_kopf_is_configured_to_watch_only() -> None:
    settings = kopf_settings()
    assert settings.posting.enabled is False
    assert settings.peering.standalone and settings.peering.clusterwide
    assert settings.scanning.disabled
    assert settings.watching.server_timeout and settings.watching.connect_timeout
    # Nothing kopf would write lands on an object: no progress, no last-handled state.
    patch: dict[str, Any] = {}
    body = kopf.Body({"metadata": {"name": "a", "annotations": {}}})
    settings.persistence.progress_storage.store(key="h", record={}, body=body, patch=patch)
    settings.persistence.progress_storage.touch(body=body, patch=patch, value="x")
    settings.persistence.diffbase_storage.store(body=body, patch=patch, essence={"spec": 1})
    assert patch == {}
    assert settings.persistence.diffbase_storage.fetch(body=body) is None
    assert settings.persistence.diffbase_storage.build(body=body) == {}


def test_kopf_logs_in_as_our_kubeconfig_says(tmp_path) -> None:  # type: ignore[no-untyped-def]
    certs = KubeConfig(
        server="https://10.0.0.1:6443",
        ca_data=b"-----BEGIN CERTIFICATE-----\nCA\n",
        cert_data=b"-----BEGIN CERTIFICATE-----\nME\n",
        key_data=b"-----BEGIN PRIVATE KEY-----\nKEY\n",
        namespace="team",
    )
    info = connection_info(certs)
    assert (info.server, info.ca_data, info.default_namespace) == (
        "https://10.0.0.1:6443",
        certs.ca_data,
        "team",
    )
    assert (info.certificate_data, info.private_key_data) == (certs.cert_data, certs.key_data)
    assert info.token is None and info.insecure is None and info.expiration is None
    token_file = tmp_path / "token"
    token_file.write_text("abc\n")
    projected = connection_info(
        KubeConfig(server="https://k", token_file=token_file, insecure_skip_tls_verify=True)
    )
    assert (projected.scheme, projected.token, projected.insecure) == ("Bearer", "abc", True)
    assert projected.expiration is not None  # kopf logs in again, re-reading the rotated file
    basic = connection_info(KubeConfig(server="https://k", username="u", password="p"))
    assert (basic.username, basic.password, basic.token) == ("u", "p", None)


class FakeResolver:
    async def resolve(self, api_version: str, kind: str) -> Resource:
        plural = kind.lower() + ("es" if kind.endswith("s") else "s")
        return Resource(api_version, kind, plural, kind != "PriorityClass", True)


async def test_the_registry_has_a_login_and_one_event_handler_per_watched_kind() -> None:
    store = MemoryStore(SystemClock(), seed=0)
    server = ControllerServer(store, ControllerOptions(driver="native"))
    informers = [c.informer for c in (server.jobs, server.cronjobs, server.jobflows)]
    driver = KopfDriver(store, informers)  # type: ignore[arg-type]
    store.config = KubeConfig(server="https://k")  # type: ignore[attr-defined]
    store.resources = FakeResolver()  # type: ignore[attr-defined]
    registry = await driver.registry()
    watched = {
        (h.selector.group, h.selector.version, h.selector.plural)
        for h in registry._watching.get_all_handlers()
    }
    # Pods, vcjobs and PodGroups are watched by the driver itself (OWN_WATCH_KINDS), every
    # other kind by kopf.
    for own in (("", "v1", "pods"), ("batch.volcano.sh", "v1alpha1", "jobs")):
        assert own not in watched
    assert ("scheduling.volcano.sh", "v1beta1", "podgroups") not in watched
    assert {POD, JOB, PODGROUP} <= set(driver.kinds)
    assert ("flow.volcano.sh", "v1alpha1", "jobtemplates") in watched
    assert ("bus.volcano.sh", "v1alpha1", "commands") in watched
    assert len(watched) == len(driver.kinds) - 3 == 6  # each kind once, whoever reads it
    assert len(driver.routes[JOB]) == 3
    (login,) = registry._activities.get_all_handlers()
    assert login.activity.value == "authentication"
    assert login.fn().server == "https://k"
    assert not registry._changing.get_all_handlers()  # no change handlers: no finalizers

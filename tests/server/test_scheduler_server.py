"""The long-running scheduler process on the in-memory store (the live-cluster tests run the
same server against the real control plane)."""

from __future__ import annotations

import asyncio

import aiohttp

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.leaderelection import LeaderElector
from stromboli.core.scheduler.server import SchedulerOptions, SchedulerServer


def node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def gang(name: str, size: int, cpu: str) -> list[dict]:
    objects: list[dict] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": size},
        }
    ]
    for i in range(size):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": "default",
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                    ],
                },
            }
        )
    return objects


async def bound(store: MemoryStore) -> dict[str, str]:
    pods = (await store.list("v1", "Pod")).items
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}


async def wait_for(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def options(**overrides: object) -> SchedulerOptions:
    base = {
        "schedule_period": 0.05,
        "listen_address": "127.0.0.1:0",
        "healthz_address": "127.0.0.1:0",
    }
    return SchedulerOptions(**(base | overrides))  # type: ignore[arg-type]


async def test_server_schedules_gangs_and_serves_metrics_and_health() -> None:
    store = MemoryStore(SystemClock())
    server = SchedulerServer(store, options())
    running = asyncio.create_task(server.run())
    for name in ("n1", "n2"):
        await store.create(node(name))
    for obj in gang("fits", 2, "3") + gang("too-big", 3, "3"):
        await store.create(obj)

    async def fitted() -> bool:
        placed = await bound(store)
        return bool(placed.get("fits-0")) and bool(placed.get("fits-1"))

    await wait_for(fitted)
    await asyncio.sleep(0.3)  # a few more cycles: the big gang must stay unbound
    placed = await bound(store)
    assert not any(placed[f"too-big-{i}"] for i in range(3))
    metrics_port, healthz_port = (e.port for e in server.endpoints)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as response:
            text = await response.text()
        async with http.get(f"http://127.0.0.1:{healthz_port}/healthz") as response:
            assert response.status == 200
    assert "volcano_e2e_scheduling_latency_milliseconds_count" in text
    assert 'volcano_action_scheduling_latency_milliseconds_count{action="allocate"}' in text
    assert 'volcano_unschedule_task_count{job_id="too-big"} 3.0' in text
    assert 'volcano_schedule_attempts_total{result="scheduled"} 2.0' in text
    server.stop()
    await asyncio.wait_for(running, 5)
    assert server.cycles > 3


async def test_pods_bound_once_only_across_cycles() -> None:
    """The cache assumes a binding until the watch shows it: no second bind, no error."""
    store = MemoryStore(SystemClock())
    server = SchedulerServer(store, options(listen_address="", healthz_address=""))
    running = asyncio.create_task(server.run())
    await store.create(node("n1"))
    for obj in gang("g", 2, "1"):
        await store.create(obj)
    await asyncio.sleep(0.5)
    server.stop()
    await asyncio.wait_for(running, 5)
    events = (await store.list("v1", "Event")).items
    # Pods' Scheduled events (the PodGroup's own "pod group is ready" event is also Scheduled).
    scheduled = [
        e for e in events if e["reason"] == "Scheduled" and e["involvedObject"]["kind"] == "Pod"
    ]
    assert sorted(e["involvedObject"]["name"] for e in scheduled) == ["g-0", "g-1"]
    assert all(e["count"] == 1 for e in scheduled)
    assert not [e for e in events if "failed to bind" in e.get("message", "")]


async def test_leader_election_hands_over_on_release() -> None:
    store = MemoryStore(SystemClock())
    first = LeaderElector(store, SystemClock(), "lock", "default", "a", lease_duration=5)
    second = LeaderElector(store, SystemClock(), "lock", "default", "b", lease_duration=5)
    assert await first.try_acquire_or_renew()
    assert not await second.try_acquire_or_renew()
    assert first.is_leader and not second.is_leader
    await first.release()
    assert not first.is_leader
    assert await second.try_acquire_or_renew()
    lease = await store.get("coordination.k8s.io/v1", "Lease", "lock", "default")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1


async def test_expired_lease_is_taken_over() -> None:
    store = MemoryStore(SystemClock())
    first = LeaderElector(store, SystemClock(), "lock", "default", "a", lease_duration=1)
    second = LeaderElector(store, SystemClock(), "lock", "default", "b", lease_duration=1)
    assert await first.try_acquire_or_renew()
    await asyncio.sleep(1.2)
    assert not first.is_leader
    assert await second.try_acquire_or_renew()


async def test_standby_server_does_not_schedule() -> None:
    store = MemoryStore(SystemClock())
    holder = LeaderElector(store, SystemClock(), "vc-scheduler", "volcano-system", "other", 30)
    assert await holder.try_acquire_or_renew()
    server = SchedulerServer(
        store,
        options(listen_address="", healthz_address="", leader_elect=True),
    )
    running = asyncio.create_task(server.run())
    await store.create(node("n1"))
    for obj in gang("g", 1, "1"):
        await store.create(obj)
    await asyncio.sleep(0.4)
    assert (await bound(store))["g-0"] == ""
    assert server.healthy() == (True, "ok (standby)")
    server.stop()
    await asyncio.wait_for(running, 5)

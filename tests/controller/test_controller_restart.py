"""A vcjob controller restarted on many settled vcjobs rewrites none of them and gives a new
vcjob its PodGroup and pods (restart at scale, issue 14 point 6)."""

from __future__ import annotations

from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.job.controller import JobController
from stromboli.core.scheduler.scheduler import builtin_queue

from .jobkit import JOB, POD, PODGROUP, task, vcjob

JOBS = 300


async def versions(store: MemoryStore) -> dict[tuple[str, str], str]:
    out = {}
    for kind in (JOB, POD, PODGROUP):
        for obj in (await store.list(*kind)).items:
            out[(kind[1], obj["metadata"]["name"])] = obj["metadata"]["resourceVersion"]
    return out


async def settle(store: MemoryStore, clock: VirtualClock) -> None:
    """Jobs created, their groups admitted and pods running, by a first controller."""
    for name in (k.ROOT_QUEUE, k.DEFAULT_QUEUE):
        queue = await store.create(builtin_queue(name))
        queue["status"] = {"state": "Open"}
        await store.update_status(queue)
    for j in range(JOBS):
        await store.create(vcjob(f"job-{j}", task("worker", 1)))
    first = JobController(store, clock)
    await first.step()
    for pg in (await store.list(*PODGROUP)).items:
        pg["status"] = {**(pg.get("status") or {}), "phase": "Running"}
        await store.update(pg)
    await first.step()
    for pod in (await store.list(*POD)).items:
        pod["spec"]["nodeName"] = "node-0"
        pod = await store.update(pod)
        pod["status"] = {"phase": "Running"}
        await store.update_status(pod)
    await first.step()


def names(objects: list[dict[str, Any]]) -> set[str]:
    return {obj["metadata"]["name"] for obj in objects}


async def test_a_restart_on_many_settled_vcjobs_touches_none_and_serves_a_new_one() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock, seed=3, history_limit=100_000)
    await settle(store, clock)
    assert len((await store.list(*POD)).items) == JOBS
    settled = await versions(store)

    restarted = JobController(store, clock)
    await restarted.start()
    assert len(restarted.jobs) == JOBS
    await store.create(vcjob("new", task("worker", 2)))
    writes = await restarted.step()

    after = await versions(store)
    changed = {key for key, version in settled.items() if after.get(key) != version}
    assert not changed, f"a restart rewrote settled objects: {sorted(changed)[:5]}"
    groups = [
        pg
        for pg in (await store.list(*PODGROUP)).items
        if pg["metadata"]["name"] == "new" or pg["metadata"]["name"].startswith("new-")
    ]
    assert len(groups) == 1
    # The new job's group is admitted by the scheduler; then its two pods come.
    pg = groups[0]
    pg["status"] = {**(pg.get("status") or {}), "phase": "Inqueue"}
    await store.update(pg)
    writes += await restarted.step()
    new_pods = names((await store.list(*POD)).items) - {n for kind, n in settled if kind == "Pod"}
    assert new_pods == {"new-worker-0", "new-worker-1"}
    assert set(await versions(store)) - set(settled) == {
        ("Job", "new"),
        ("PodGroup", pg["metadata"]["name"]),
        ("Pod", "new-worker-0"),
        ("Pod", "new-worker-1"),
    }
    assert writes < 10  # the new job's group, pods and status only

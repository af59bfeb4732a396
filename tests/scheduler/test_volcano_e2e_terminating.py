"""Volcano's ``test/e2e/schedulingaction/terminating_podgroup.go`` ("PodGroup terminating E2E
Test") on the in-process cluster of :mod:`.volcano_e2e`: a PodGroup whose scheduled members are
terminating (deleted, still inside their grace period) stays Running and is not reported short
of resources."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.clock import format_time

from .builders import SCHEDULING, pg_condition, pod, podgroup
from .volcano_e2e import E2ECluster

PG = "pg-sticky-releasing"


STICKY = "e2e.test/sticky"


async def terminate(c: E2ECluster, name: str) -> None:
    """What ``kubectl delete`` does to a pod with a long grace period whose container ignores
    SIGTERM: it stays Running, marked for deletion (a finalizer holds it here, as the grace
    period does on a real cluster)."""
    await c.store.delete("v1", "Pod", name, "e2e")


@pytest.mark.parametrize(
    "members", [1, 2], ids=["single-Pod PodGroup", "partially terminating multi-Pod PodGroup"]
)
async def test_podgroup_should_stay_running_while_scheduled_members_are_terminating(
    tmp_path: Path, members: int
) -> None:
    """DescribeTable("PodGroup should stay Running while scheduled members are terminating")
    with Entry("single-Pod PodGroup") and Entry("partially terminating multi-Pod PodGroup")"""
    c = await E2ECluster(tmp_path).start()
    await c.create(podgroup(PG, members, namespace="e2e", queue="default"))
    names = [f"sticky-releasing-{i}" for i in range(members)]
    for name in names:
        sticky = pod(name, namespace="e2e", group=PG, cpu="50m", memory="64Mi")
        sticky["metadata"]["finalizers"] = [STICKY]
        await c.create(sticky)

    async def phase() -> str:
        obj = await c.store.get(SCHEDULING, "PodGroup", PG, "e2e")
        return (obj.get("status") or {}).get("phase", "")

    async def all_running() -> bool:
        pods = [await c.store.get("v1", "Pod", n, "e2e") for n in names]
        running = all((p.get("status") or {}).get("phase") == "Running" for p in pods)
        return running and await phase() == "Running"

    assert await c.wait(all_running)
    started = format_time(c.sim.clock.now())
    await terminate(c, names[0])
    for _ in range(15):
        await c.step()
        assert await phase() == "Running"
        obj = await c.store.get(SCHEDULING, "PodGroup", PG, "e2e")
        condition = pg_condition(obj, "Unschedulable")
        if (
            condition is not None
            and condition.get("status") == "True"
            and condition.get("lastTransitionTime", "") >= started
        ):
            assert condition.get("reason") != "NotEnoughResources"
    leaving = await c.store.get("v1", "Pod", names[0], "e2e")
    assert leaving["metadata"].get("deletionTimestamp")
    assert leaving["status"]["phase"] == "Running"

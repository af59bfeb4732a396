"""``stromboli explain`` against the real control plane while `stromboli scheduler` and
`stromboli controller` run: a vcjob held at enqueue by its queue's capability, the queue at
capability naming who waits, and a gang short of room."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess

from stromboli.core.api import constants as k
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.devcluster import ControlPlane

from .jobs_live import (  # noqa: F401  (fixtures)
    PODGROUP,
    QUEUE,
    STROMBOLI,
    Live,
    live_fixture,
    stack_fixture,
    task,
    vcjob,
)


def explain(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STROMBOLI), "explain", *args, f"--kubeconfig={cp.kubeconfig_path}"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def queue(name: str, cpu: str) -> dict:
    return {
        "apiVersion": QUEUE[0],
        "kind": QUEUE[1],
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": False, "capability": {"cpu": cpu}},
    }


@contextlib.asynccontextmanager
async def own_queue(live: Live, name: str, cpu: str):  # type: ignore[no-untyped-def]
    await live.store.create(queue(name, cpu))
    try:
        yield name
    finally:
        await live.cleanup()
        with contextlib.suppress(NotFoundError):
            await live.store.delete(*QUEUE, name)


async def test_a_job_held_at_enqueue_and_its_queue_at_capability(
    live: Live, control_plane: ControlPlane
) -> None:
    name = f"capped-{live.ns[-4:]}"
    async with own_queue(live, name, "200m"):
        await live.create(vcjob("first", task("worker", 2, cpu="100m"), queue=name))
        await live.wait_running_pods("first", 2)
        await live.create(vcjob("second", task("worker", 2, cpu="100m"), queue=name))

        async def podgroup_of_second() -> list[dict]:
            groups = await live.podgroups()
            return [
                g
                for g in groups
                if any(r.get("name") == "second" for r in g["metadata"].get("ownerReferences", ()))
            ]

        await live.wait(podgroup_of_second, bool, "the controller makes second's PodGroup")
        await asyncio.sleep(1.0)  # a few scheduling cycles: it stays Pending

        result = explain(control_plane, "job/second", "-n", live.ns)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert re.match(
            rf"Job {live.ns}/second \(PodGroup second-[0-9a-f-]+\): phase Pending, queue {name}",
            lines[0],
        ), lines
        assert lines[1] == (
            f"Why: held at enqueue by queue capability: queue {name} holds 0.2 cpu, 32Mi memory; "
            "with this job's minResources (0.2 cpu, 32Mi memory) it would hold 0.4 cpu, "
            "64Mi memory, over its capability of 0.2 cpu by 0.2 cpu"
        ), lines

        result = explain(control_plane, f"queue/{name}", "-o", "json")
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["atCapability"] == ["cpu"]
        assert document["allocated"]["cpu"] == "200m"
        assert document["pending"] == [f"{live.ns}/second"]
        assert document["running"] == [f"{live.ns}/first"]
        text = explain(control_plane, f"queue/{name}").stdout
        assert f"Waiting: 1 Pending at enqueue ({live.ns}/second)" in text


async def test_a_gang_short_of_room(live: Live, control_plane: ControlPlane) -> None:
    name = f"roomy-{live.ns[-4:]}"
    async with own_queue(live, name, "100000"):
        await live.store.create(
            {
                "apiVersion": PODGROUP[0],
                "kind": PODGROUP[1],
                "metadata": {"name": "gang", "namespace": live.ns},
                "spec": {"minMember": 3, "queue": name},
            }
        )
        for i, cpu in enumerate(("50m", "50m", "1000")):
            await live.store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"gang-{i}",
                        "namespace": live.ns,
                        "annotations": {k.GROUP_NAME_ANNOTATION: "gang"},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                        ],
                    },
                }
            )

        async def phase() -> str:
            group = await live.store.get(*PODGROUP, "gang", live.ns)
            return str((group.get("status") or {}).get("phase") or "")

        await live.wait(phase, lambda p: p == "Inqueue", "the gang is admitted")
        result = explain(control_plane, "podgroup/gang", "-n", live.ns)
        assert result.returncode == 0, result.stderr
        match = re.search(
            r"Why: gang short of room: 2/3 members fit; 1 needs ([\d.]+) cpu more on any node "
            r"\(closest: \S+ has ([\d.]+) cpu free; each asks 1000 cpu\)",
            result.stdout,
        )
        assert match, result.stdout
        short, free = float(match.group(1)), float(match.group(2))
        assert abs(short + free - 1000) < 0.01
        assert "gang-2: need" in result.stdout.replace("  ", "")


async def test_an_object_that_does_not_exist(live: Live, control_plane: ControlPlane) -> None:
    result = explain(control_plane, "job/nothing-here", "-n", live.ns)
    assert result.returncode == 1
    assert f"vcjob {live.ns}/nothing-here does not exist" in result.stderr
    await live.cleanup()

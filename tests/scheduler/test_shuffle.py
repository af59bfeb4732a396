"""shuffle: running pods the victimTasks plugins nominate are evicted (reference §3.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.framework.plugin import PLUGINS, Plugin
from stromboli.core.scheduler.framework.session import Session

from .builders import Cluster, conf, node, pod, podgroup

LABEL = "shuffle.example.com/evict"


class Nominate(Plugin):
    """Nominates every running pod labelled ``shuffle.example.com/evict: "yes"``."""

    name = "test-shuffle-nominate"

    def on_session_open(self, ssn: Session) -> None:
        def victims(tasks: list[TaskInfo]) -> list[TaskInfo]:
            return [
                t
                for t in tasks
                if ((t.pod.get("metadata") or {}).get("labels") or {}).get(LABEL) == "yes"
            ]

        ssn.register("victim_tasks", self.name, victims)


@pytest.fixture(autouse=True)
def nominate_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PLUGINS, Nominate.name, Nominate)


def pdb(name: str, min_available: int, allowed: int, labels: dict[str, str]) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed},
    }


async def cluster(tmp_path: Path, config: str, *objects: dict) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    for obj in objects:
        status = obj.get("status")
        [made] = await c.add(obj)
        if obj["kind"] == "PodDisruptionBudget" and status:
            made["status"] = status
            await c.store.update_status(made)
    return c


def pods(count: int, labels: dict[str, str] | None = None) -> list[dict]:
    return [
        podgroup("app", 1),
        *[pod(f"app-{i}", group="app", cpu="1", labels=labels) for i in range(count)],
    ]


async def start(c: Cluster, count: int) -> None:
    await c.run()
    for i in range(count):
        await c.set_phase(f"app-{i}", "Running")


async def test_nominated_pods_are_evicted(tmp_path: Path) -> None:
    config = conf("allocate, shuffle", [Nominate.name])
    c = await cluster(
        tmp_path,
        config,
        node("n1"),
        *pods(2),
        podgroup("other", 1),
        pod("other-0", group="other", cpu="1", labels={LABEL: "yes"}),
    )
    await c.run()
    for name in ("app-0", "app-1", "other-0"):
        await c.set_phase(name, "Running")
    stats = await c.run()
    assert stats.evicted == 1
    assert not await c.exists("Pod", "other-0")
    assert await c.exists("Pod", "app-0") and await c.exists("Pod", "app-1")
    [event] = await c.events(reason="Evict", name="other-0")
    assert event["message"] == "Pod is evicted, because of shuffle"


async def test_only_running_pods_are_offered(tmp_path: Path) -> None:
    config = conf("allocate, shuffle", [Nominate.name])
    c = await cluster(tmp_path, config, node("n1"), *pods(2, {LABEL: "yes"}))
    # Bound but not yet running: not a shuffle victim.
    assert (await c.run()).evicted == 0
    await c.set_phase("app-0", "Running")
    assert (await c.run()).evicted == 1
    assert await c.exists("Pod", "app-1")


async def test_nothing_nominated_nothing_evicted(tmp_path: Path) -> None:
    config = conf("allocate, shuffle", ["priority", "gang", "pdb"])
    c = await cluster(tmp_path, config, node("n1"), *pods(2, {LABEL: "yes"}))
    await start(c, 2)
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_pdb_vetoes_nominated_victims(tmp_path: Path) -> None:
    config = conf("allocate, shuffle", [Nominate.name, "pdb"])
    c = await cluster(
        tmp_path,
        config,
        node("n1"),
        pdb("app-budget", 2, 1, {"app": "web"}),
        *pods(3, {LABEL: "yes", "app": "web"}),
    )
    await start(c, 3)
    # The budget allows one disruption: one pod goes, the two it keeps stay.
    assert (await c.run()).evicted == 1
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert sum([await c.exists("Pod", f"app-{i}") for i in range(3)]) == 2

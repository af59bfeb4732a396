"""The controller's watch of CRDs (integrations/crdwatch.py) on the in-memory store: only
framework CRDs reach the handler, a deletion missed while unwatched is said after the next
list, a watch too old (410 Gone) lists again, a failing handler stops nothing."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.integrations.crdwatch import CRD, CrdWatch
from stromboli.integrations.kinds import with_framework_kinds

from .test_crds import crd


def store(history: int = 10_000) -> MemoryStore:
    return MemoryStore(SystemClock(), kinds=with_framework_kinds(), history_limit=history, seed=0)


def recorder() -> tuple[list[tuple[str, str, Any]], Any]:
    seen: list[tuple[str, str, Any]] = []

    def handler(event_type: str, made: dict[str, Any]) -> None:
        seen.append((event_type, made["metadata"]["name"], made["spec"]["group"]))

    return seen, handler


async def test_only_framework_crds_are_handed_on_and_a_missed_deletion_is_said() -> None:
    memory = store()
    await memory.create(crd())
    await memory.create(crd("example.com", "Widget", "widgets"))
    seen, handler = recorder()
    watch = CrdWatch(memory, handler)
    await watch.relist()
    assert seen == [("ADDED", "pytorchjobs.kubeflow.org", "kubeflow.org")]
    assert list(watch.framework) == ["pytorchjobs.kubeflow.org"]
    # Deleted while nobody watched: the next list says so, with the group and kind.
    await memory.delete(*CRD, "pytorchjobs.kubeflow.org")
    await watch.relist()
    assert seen[-1] == ("DELETED", "pytorchjobs.kubeflow.org", "kubeflow.org")
    assert watch.framework == {}


async def test_events_after_the_list_and_a_handler_that_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = store()
    seen, record = recorder()

    def handler(event_type: str, made: dict[str, Any]) -> None:
        record(event_type, made)
        if made["spec"]["group"] == "ray.io":
            raise RuntimeError("a bug in one reading")

    task = asyncio.create_task(CrdWatch(memory, handler).run())
    try:
        await asyncio.sleep(0.05)
        await memory.create(crd("ray.io", "RayCluster", "rayclusters"))
        await memory.create(crd())
        await memory.delete(*CRD, "pytorchjobs.kubeflow.org")
        for _ in range(200):
            if len(seen) == 3:
                break
            await asyncio.sleep(0.01)
        assert [(t, n) for t, n, _ in seen] == [
            ("ADDED", "rayclusters.ray.io"),
            ("ADDED", "pytorchjobs.kubeflow.org"),
            ("DELETED", "pytorchjobs.kubeflow.org"),
        ]
        assert "handling CRD rayclusters.ray.io failed" in caplog.text
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_watch_too_old_lists_again(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "stromboli.integrations")
    memory = store(history=2)
    await memory.create(crd("example.com", "Gadget", "gadgets"))
    seen, handler = recorder()
    watch = CrdWatch(memory, handler)
    version = await watch.relist()
    assert version not in ("", "0")
    for n in range(5):  # the store forgets the versions the watch would resume from
        await memory.create(crd("example.com", "Widget", f"widgets{n}"))
    await memory.create(crd())
    await asyncio.wait_for(watch._watch(version), 5)  # 410 Gone ends it, said
    assert "watch of CustomResourceDefinitions expired" in caplog.text
    await watch.relist()
    assert seen == [("ADDED", "pytorchjobs.kubeflow.org", "kubeflow.org")]
    assert watch.lists == 2

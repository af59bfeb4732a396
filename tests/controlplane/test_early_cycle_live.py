"""Early cycles on a real API server: with a schedule period far longer than the test, a gang
created after the scheduler's first cycle is bound all the same, by a cycle the watch started
(ordering, not time: nothing else would run before the period ends)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from tests.controlplane.test_scheduler_conf_live import gang

STROMBOLI = Path(sys.executable).with_name("stromboli")

SCHEDULER = "early-cycle-test"


@pytest.fixture
async def store(control_plane: ControlPlane) -> AsyncIterator[KubeStore]:
    control_plane.apply_manifests(build_crds())
    kube = KubeStore(KubeConfig.load(control_plane.kubeconfig_path))
    yield kube
    await kube.close()


async def bound_within(store: KubeStore, namespace: str, prefix: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = (await store.list("v1", "Pod", namespace)).items
        mine = [p for p in pods if p["metadata"]["name"].startswith(prefix)]
        if mine and all(p["spec"].get("nodeName") for p in mine):
            return True
        await asyncio.sleep(0.2)
    return False


async def test_a_gang_created_after_the_first_cycle_is_bound_before_the_period_ends(
    control_plane: ControlPlane, store: KubeStore, tmp_path: Path
) -> None:
    namespace = f"early-{uuid.uuid4().hex[:8]}"
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    log = tmp_path / "scheduler.log"
    scheduler = subprocess.Popen(
        [
            str(STROMBOLI),
            "scheduler",
            f"--kubeconfig={control_plane.kubeconfig_path}",
            f"--scheduler-name={SCHEDULER}",  # no other test's pods
            "--schedule-period=30m",
            "--early-cycle-gap=20ms",
            "--listen-address=",
            "--healthz-address=",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        for obj in gang("first", namespace, SCHEDULER, 2):
            await store.create(obj)
        # The first cycle runs at start; this gang is bound by it or by an early cycle.
        assert await bound_within(store, namespace, "first-", 120), log.read_text()[-3000:]
        for obj in gang("second", namespace, SCHEDULER, 3):
            await store.create(obj)
        # The next cycle on the period is 30 minutes away.
        assert await bound_within(store, namespace, "second-", 120), log.read_text()[-3000:]
    finally:
        scheduler.terminate()
        scheduler.wait(30)
        await store.delete("v1", "Namespace", namespace)

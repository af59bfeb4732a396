"""On a real API server: `stromboli scheduler` given a Volcano configuration (from its ConfigMap,
as the chart mounts it) that names a plugin and an argument Stromboli lacks starts, schedules,
posts a Warning event per skipped name on that ConfigMap and exports them as a metric; with
``--strict-config`` it refuses to start."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.controlplane import free_port

STROMBOLI = Path(sys.executable).with_name("stromboli")
CONFIG_KEY = "volcano-scheduler.conf"
CONFIG_MAP = "volcano-scheduler-configmap"
VOLCANO_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: task-topology
- plugins:
  - name: predicates
    arguments:
      predicate.GPUSharingEnable: true
  - name: proportion
  - name: nodeorder
"""


@pytest.fixture
async def store(control_plane: ControlPlane) -> AsyncIterator[KubeStore]:
    control_plane.apply_manifests(build_crds())
    kube = KubeStore(KubeConfig.load(str(control_plane.kubeconfig_path)))
    yield kube
    await kube.close()


async def config_map_as_mounted(store: KubeStore, namespace: str, into: Path) -> tuple[Path, str]:
    """Create the scheduler's ConfigMap and write its key where the kubelet would mount it."""
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    created = await store.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": namespace},
            "data": {CONFIG_KEY: VOLCANO_CONF},
        }
    )
    read = await store.get("v1", "ConfigMap", CONFIG_MAP, namespace)
    path = into / CONFIG_KEY
    path.write_text(read["data"][CONFIG_KEY])
    return path, created["metadata"]["uid"]


def gang(name: str, namespace: str, scheduler: str, size: int) -> list[dict]:
    objects: list[dict] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": size, "queue": "default"},
        }
    ]
    for i in range(size):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": namespace,
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {
                    "schedulerName": scheduler,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ],
                },
            }
        )
    return objects


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout}s")
        await asyncio.sleep(0.2)


async def test_unknown_plugin_is_skipped_reported_and_the_scheduler_schedules(
    control_plane: ControlPlane, store: KubeStore, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    namespace, scheduler_name = f"sched-conf-{suffix}", f"volcano-{suffix}"
    conf_path, uid = await config_map_as_mounted(store, namespace, tmp_path)
    metrics_port = free_port()
    log = tmp_path / "scheduler.log"
    process = subprocess.Popen(
        [
            str(STROMBOLI),
            "scheduler",
            f"--kubeconfig={control_plane.kubeconfig_path}",
            f"--scheduler-name={scheduler_name}",
            f"--scheduler-conf={conf_path}",
            f"--scheduler-configmap={namespace}/{CONFIG_MAP}",
            "--schedule-period=200ms",
            f"--listen-address=127.0.0.1:{metrics_port}",
            "--healthz-address=",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        for obj in gang("g", namespace, scheduler_name, 2):
            await store.create(obj)

        async def bound() -> bool:
            pods = (await store.list("v1", "Pod", namespace)).items
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        await until(bound)

        async def warned() -> list[dict]:
            events = (await store.list("v1", "Event", namespace)).items
            return [e for e in events if e["involvedObject"].get("kind") == "ConfigMap"]

        await until(lambda: _at_least(warned, 2))
        by_reason = {e["reason"]: e for e in await warned()}
        plugin, argument = by_reason["UnknownPlugin"], by_reason["UnknownConfiguration"]
        for event in (plugin, argument):
            assert event["type"] == "Warning"
            assert event["involvedObject"]["name"] == CONFIG_MAP
            assert event["involvedObject"]["uid"] == uid  # so `kubectl describe cm` lists it
        assert (
            "Volcano's plugin 'task-topology' is not implemented by Stromboli" in plugin["message"]
        )
        assert "'predicate.GPUSharingEnable' of Volcano's predicates" in argument["message"]

        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        assert (
            'stromboli_scheduler_config_skipped{key="",owner="task-topology",volcano="true"} 1.0'
            in metrics
        )
        assert (
            'stromboli_scheduler_config_skipped{key="predicate.GPUSharingEnable",'
            'owner="predicates",volcano="true"} 1.0' in metrics
        )
    finally:
        process.terminate()
        process.wait(30)
    text = log.read_text()
    assert "Volcano's plugin 'task-topology' is not implemented by Stromboli; skipped" in text
    assert f"Binding Task <{namespace}/g-0> to node" in text


async def _at_least(fetch: Callable[[], Awaitable[list[dict]]], count: int) -> bool:
    return len(await fetch()) >= count


def test_strict_config_refuses_the_same_file(control_plane: ControlPlane, tmp_path: Path) -> None:
    path = tmp_path / CONFIG_KEY
    path.write_text(VOLCANO_CONF)
    done = subprocess.run(
        [
            str(STROMBOLI),
            "scheduler",
            f"--kubeconfig={control_plane.kubeconfig_path}",
            f"--scheduler-conf={path}",
            "--strict-config",
            "--listen-address=",
            "--healthz-address=",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Volcano's plugin 'task-topology' is not implemented by Stromboli" in done.stderr
    assert "'predicate.GPUSharingEnable' of Volcano's predicates" in done.stderr

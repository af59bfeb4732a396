"""On a real API server: a bare pod and a vcjob whose containers put ``volcano.sh/vgpu-memory``
and ``volcano.sh/vgpu-cores`` in ``requests`` (not only ``limits``) run. ``stromboli
controller`` copies those amounts into the PodGroup's ``minResources`` as Volcano's controllers
do; ``stromboli scheduler`` reads past them in enqueue (no node lists them), as Volcano's
ignored devices (issue #12).

The cluster is its own: one kwok node with one registered 40960 MiB card."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from stromboli.core.api import constants as k
from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from tests.controlplane.conftest import own_control_plane
from tests.controlplane.test_e2e_scheduler import SchedulerProcess, eventually

STROMBOLI = Path(sys.executable).with_name("stromboli")
PG = (k.SCHEDULING_V1BETA1, "PodGroup")
CARD = {
    "id": "GPU-0",
    "index": 0,
    "count": 10,
    "devmem": 40960,
    "devcore": 100,
    "type": "NVIDIA-A100-SXM4-40GB",
    "numa": 0,
    "mode": "hami-core",
    "health": True,
}
CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - name: predicates
  - name: proportion
  - name: overcommit
  - name: capacity
  - name: deviceshare
    arguments: {deviceshare.VGPUEnable: true}
"""
VGPU = {
    "volcano.sh/vgpu-number": "1",
    "volcano.sh/vgpu-memory": "4000",
    "volcano.sh/vgpu-cores": "30",
}


def _gpu_node(cp: ControlPlane) -> None:
    cp.apply_manifests(build_crds())
    cp.add_nodes(
        1,
        cpu="8",
        memory="64Gi",
        pods=110,
        name_prefix="gpu-node-",
        annotations={k.NODE_VGPU_REGISTER_KEY: json.dumps([CARD])},
        extra_resources={"volcano.sh/vgpu-number": "10"},
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from own_control_plane(tmp_path_factory, nodes=0, prepare=_gpu_node)


@pytest.fixture
async def store(cluster: ControlPlane) -> AsyncIterator[KubeStore]:
    kube = KubeStore(KubeConfig.load(str(cluster.kubeconfig_path)))
    yield kube
    await kube.close()


def container() -> dict:
    # Extended resources must be requested as much as limited, so requests carry them too.
    amounts = {"cpu": "1", **VGPU}
    return {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
    }


def bare_pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "containers": [container()]},
    }


def vcjob(name: str) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 2,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container()]}},
                }
            ],
        },
    }


async def test_pods_with_vgpu_amounts_in_requests_run(
    cluster: ControlPlane, store: KubeStore, tmp_path: Path
) -> None:
    conf = tmp_path / "scheduler.conf"
    conf.write_text(CONF)
    log = tmp_path / "scheduler.log"
    scheduler = SchedulerProcess(cluster, log, f"--scheduler-conf={conf}")
    controller_log = tmp_path / "controller.log"
    controller = subprocess.Popen(
        [
            str(STROMBOLI),
            "controller",
            f"--kubeconfig={cluster.kubeconfig_path}",
            "--listen-address=",
            "--healthz-address=",
            "--driver=native",
            "--no-frameworks",
        ],
        stdout=controller_log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        await store.create(bare_pod("bare"))
        await store.create(vcjob("train"))

        async def all_bound() -> bool:
            pods = (await store.list("v1", "Pod", "default")).items
            return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

        try:
            await eventually(all_bound, timeout=120)
        except AssertionError:
            pods = (await store.list("v1", "Pod", "default")).items
            groups = (await store.list(*PG, "default")).items
            raise AssertionError(
                f"{json.dumps(pods)[-3000:]}\n{json.dumps(groups)[-3000:]}\n"
                f"{log.read_text()[-3000:]}\n{controller_log.read_text()[-2000:]}"
            ) from None
    finally:
        controller.terminate()
        controller.wait(30)
        assert scheduler.stop() == 0, log.read_text()[-3000:]
    groups = (await store.list(*PG, "default")).items
    assert len(groups) == 2
    for group in groups:
        # The groups keep the amounts, as Volcano's controllers write them ...
        assert "volcano.sh/vgpu-memory" in json.dumps(group["spec"].get("minResources") or {})
        # ... and were admitted all the same.
        assert (group.get("status") or {}).get("phase") in ("Inqueue", "Running")
    for pod in (await store.list("v1", "Pod", "default")).items:
        notes = pod["metadata"].get("annotations") or {}
        assert notes[k.VGPU_IDS_NEW_KEY].startswith("GPU-0,")

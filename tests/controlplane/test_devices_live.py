"""On a real API server: `stromboli scheduler` writes the vGPU assignment and the NUMA
topology decision on the pods it binds, and a scheduler started afresh reads them back from
the pods, so it never hands a card's memory or a CPU out twice.

The cluster is its own (one kwok node with two registered 20000 MiB cards and two 4-CPU NUMA
nodes), so the arithmetic is exact."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from stromboli.core.api import constants as k
from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane, build_control_plane
from stromboli.core.scheduler.util.cpuset import parse_cpuset
from tests.controlplane.test_e2e_scheduler import SchedulerProcess, eventually

CARDS = [
    {
        "id": f"GPU-{i}",
        "index": i,
        "count": 10,
        "devmem": 20000,
        "devcore": 100,
        "type": "NVIDIA-A100-SXM4-40GB",
        "numa": 0,
        "mode": "hami-core",
        "health": True,
    }
    for i in range(2)
]
CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: numa-aware
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, str]]:
    run_dir = tmp_path_factory.mktemp("devices-live")
    cp = ControlPlane(build_control_plane(log_path=run_dir / "build.log"), run_dir=run_dir)
    try:
        cp.start()
        cp.apply_manifests(build_crds())
        (name,) = cp.add_nodes(
            1,
            cpu="8",
            memory="64Gi",
            pods=110,
            name_prefix="gpu-node-",
            annotations={k.NODE_VGPU_REGISTER_KEY: json.dumps(CARDS)},
            extra_resources={"volcano.sh/vgpu-number": "20"},
        )
    except Exception as err:
        cp.stop()
        pytest.fail(f"control plane did not start: {err}\n{cp.log_tail(60)}", pytrace=False)
    try:
        yield cp, name
    finally:
        cp.stop()


@pytest.fixture
async def store(cluster: tuple[ControlPlane, str]) -> AsyncIterator[KubeStore]:
    kube = KubeStore(KubeConfig.load(str(cluster[0].kubeconfig_path)))
    yield kube
    await kube.close()


def numatopology(node: str) -> dict:
    detail = {str(c): {"numa": c // 4, "socket": c // 4, "core": c} for c in range(8)}
    return {
        "apiVersion": k.NODEINFO_V1ALPHA1,
        "kind": "Numatopology",
        "metadata": {"name": node},
        "spec": {
            "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
            "numares": {"cpu": {"allocatable": "0-7", "capacity": 8}},
            "cpuDetail": detail,
        },
    }


def podgroup(name: str) -> dict:
    """Each pod is its own gang (no controller runs here to make the PodGroups)."""
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1},
    }


def vgpu_pod(name: str, memory: int) -> dict:
    limits = {"cpu": "500m", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {k.GROUP_NAME_ANNOTATION: name},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
        },
    }


def pinned_pod(name: str, cpus: int) -> dict:
    amount = {"cpu": str(cpus), "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                k.NUMA_TOPOLOGY_POLICY_KEY: "single-numa-node",
                k.GROUP_NAME_ANNOTATION: name,
            },
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": amount, "limits": amount},
                }
            ],
        },
    }


async def annotations(store: KubeStore, name: str) -> dict[str, str]:
    pod = await store.get("v1", "Pod", name, "default")
    return (pod["metadata"].get("annotations") or {}) if pod["spec"].get("nodeName") else {}


def card_of(notes: dict[str, str]) -> str:
    return notes[k.VGPU_IDS_NEW_KEY].split(",")[0]


def cpus_of(notes: dict[str, str]) -> frozenset[int]:
    return parse_cpuset(json.loads(notes[k.TOPOLOGY_DECISION_KEY])["cpu"])


async def test_device_assignments_survive_a_scheduler_restart(
    cluster: tuple[ControlPlane, str], store: KubeStore, tmp_path: Path
) -> None:
    cp, node = cluster
    await store.create(numatopology(node))
    conf = tmp_path / "scheduler.conf"
    conf.write_text(CONF)
    log = tmp_path / "scheduler.log"
    scheduler = SchedulerProcess(cp, log, f"--scheduler-conf={conf}")
    try:
        for obj in (vgpu_pod("big-0", 15000), vgpu_pod("big-1", 15000), pinned_pod("pin-0", 3)):
            await store.create(podgroup(obj["metadata"]["name"]))
            await store.create(obj)

        async def first_bound() -> bool:
            notes = [await annotations(store, n) for n in ("big-0", "big-1", "pin-0")]
            return all(k.VGPU_IDS_NEW_KEY in n for n in notes[:2]) and bool(notes[2])

        try:
            await eventually(first_bound, timeout=90)
        except AssertionError:
            pods = (await store.list("v1", "Pod", "default")).items
            raise AssertionError(f"{pods}\n{log.read_text()[-3000:]}") from None
    finally:
        assert scheduler.stop() == 0, log.read_text()[-3000:]
    big = [await annotations(store, n) for n in ("big-0", "big-1")]
    assert {card_of(n) for n in big} == {"GPU-0", "GPU-1"}  # 15000 + 15000 > 20000: one each
    assert all(n[k.VGPU_NODE_KEY] == node for n in big)
    first_cpus = cpus_of(await annotations(store, "pin-0"))
    assert len(first_cpus) == 3 and len({c // 4 for c in first_cpus}) == 1

    # A new scheduler process knows nothing but what the API server holds.
    scheduler = SchedulerProcess(cp, log, f"--scheduler-conf={conf}")
    try:
        for obj in (vgpu_pod("small", 4000), vgpu_pod("too-big", 15000), pinned_pod("pin-1", 3)):
            await store.create(podgroup(obj["metadata"]["name"]))
            await store.create(obj)

        async def second_bound() -> bool:
            return bool(await annotations(store, "small")) and bool(
                await annotations(store, "pin-1")
            )

        await eventually(second_bound, timeout=90)

        async def too_big_refused() -> bool:
            pod = await store.get("v1", "Pod", "too-big", "default")
            conditions = (pod.get("status") or {}).get("conditions") or []
            return any(c.get("type") == "PodScheduled" for c in conditions)

        await eventually(too_big_refused, timeout=60)
    finally:
        assert scheduler.stop() == 0, log.read_text()[-3000:]
    too_big = await store.get("v1", "Pod", "too-big", "default")
    assert not too_big["spec"].get("nodeName")  # 5000 MiB left on each card
    message = next(c for c in too_big["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "no enough vgpu resources" in message["message"]
    small = await annotations(store, "small")
    assert card_of(small) in {"GPU-0", "GPU-1"}
    second_cpus = cpus_of(await annotations(store, "pin-1"))
    assert not first_cpus & second_cpus  # the restarted scheduler kept pin-0's CPUs
    assert len({c // 4 for c in second_cpus}) == 1

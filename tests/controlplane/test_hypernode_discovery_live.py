"""On a real API server: the controller's HyperNode discovery from node labels creates the
HyperNodes (with ``status.nodeCount`` through the status subresource), follows a label move,
and deletes a HyperNode whose value is gone, leaving a hand-written one alone."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest

from stromboli.core.api import constants as k
from stromboli.core.api.crds import build_crds
from stromboli.core.clock import SystemClock
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.controller.hypernodes import CONFIG_KEY, CONFIG_MAP_NAME, HyperNodeDiscovery
from stromboli.core.devcluster import ControlPlane, build_control_plane
from tests.controlplane.test_e2e_scheduler import eventually

CONF = """\
networkTopologyDiscovery:
- source: label
  enabled: true
  config:
    networkTopologyTypes:
      fabric:
      - nodeLabel: example.dev/spine
      - nodeLabel: example.dev/rack
      - nodeLabel: kubernetes.io/hostname
"""
HN = (k.TOPOLOGY_V1ALPHA1, "HyperNode")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    run_dir = tmp_path_factory.mktemp("discovery-live")
    cp = ControlPlane(build_control_plane(log_path=run_dir / "build.log"), run_dir=run_dir)
    try:
        cp.start()
        cp.apply_manifests(build_crds())
        for rack in ("r1", "r2"):
            cp.add_nodes(
                2, labels={"example.dev/spine": "s1", "example.dev/rack": rack}, name_prefix=rack
            )
    except Exception as err:
        cp.stop()
        pytest.fail(f"control plane did not start: {err}\n{cp.log_tail(60)}", pytrace=False)
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
async def store(cluster: ControlPlane) -> AsyncIterator[KubeStore]:
    kube = KubeStore(KubeConfig.load(str(cluster.kubeconfig_path)))
    yield kube
    await kube.close()


async def discovered(store: KubeStore) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in (await store.list(*HN)).items}


async def test_label_discovery_follows_the_nodes(store: KubeStore) -> None:
    await store.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}}
    )
    await store.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP_NAME, "namespace": "volcano-system"},
            "data": {CONFIG_KEY: CONF},
        }
    )
    await store.create(
        {
            "apiVersion": HN[0],
            "kind": HN[1],
            "metadata": {"name": "by-hand"},
            "spec": {
                "tier": 3,
                "members": [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": ".*"}}}],
            },
        }
    )
    controller = HyperNodeDiscovery(store, SystemClock())
    task = asyncio.create_task(controller.run())
    try:

        async def three() -> bool:
            found = await discovered(store)
            spine = found.get("fabric-t2-s1")
            return spine is not None and (spine.get("status") or {}).get("nodeCount") == 4

        await eventually(three)
        found = await discovered(store)
        assert {"fabric-t1-r1", "fabric-t1-r2", "fabric-t2-s1", "by-hand"} == set(found)
        assert found["fabric-t1-r1"]["status"]["nodeCount"] == 2

        # Both nodes of rack r2 move to r1: r2's HyperNode goes, r1 counts four.
        for node in (await store.list("v1", "Node")).items:
            if node["metadata"]["labels"].get("example.dev/rack") == "r2":
                node["metadata"]["labels"]["example.dev/rack"] = "r1"
                await store.update(node)

        async def moved() -> bool:
            found = await discovered(store)
            rack = found.get("fabric-t1-r1") or {}
            return "fabric-t1-r2" not in found and (rack.get("status") or {}).get("nodeCount") == 4

        await eventually(moved)
        assert "by-hand" in await discovered(store)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

"""Events on a real API server: repeats of one event are one Event object whose ``count`` the
recorder PATCHes, written in the background, as client-go's recorder leaves them for
``kubectl describe``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from stromboli.core.eventbroadcast import EventBroadcaster


@pytest.fixture
async def store(control_plane: ControlPlane) -> AsyncIterator[KubeStore]:
    kube = KubeStore(KubeConfig.load(control_plane.kubeconfig_path))
    yield kube
    await kube.close()


async def test_ten_repeats_are_one_event_with_count_ten(store: KubeStore) -> None:
    namespace = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    pod = await store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "waiting", "namespace": namespace},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
        }
    )
    ref = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "waiting",
        "namespace": namespace,
        "uid": pod["metadata"]["uid"],
    }
    broadcaster = EventBroadcaster(store, SystemClock(), "volcano")
    try:
        for i in range(10):
            await broadcaster.record(ref, "Warning", "FailedScheduling", "0/3 nodes are available")
            if i == 4:
                assert await broadcaster.flush(30)  # half of them written before the rest
        await broadcaster.record(ref, "Normal", "Scheduled", "Successfully assigned")
        assert await broadcaster.flush(30)
        listed = (await store.list("v1", "Event", namespace)).items
        by_reason = {e["reason"]: e for e in listed}
        assert sorted(e["reason"] for e in listed) == ["FailedScheduling", "Scheduled"]
        failed = by_reason["FailedScheduling"]
        assert failed["count"] == 10
        assert failed["involvedObject"]["uid"] == pod["metadata"]["uid"]
        assert failed["source"] == {"component": "volcano"}
        assert failed["lastTimestamp"] >= failed["firstTimestamp"]
        assert by_reason["Scheduled"]["count"] == 1
        assert broadcaster.dropped == 0
    finally:
        await broadcaster.close()
        await store.delete("v1", "Namespace", namespace)

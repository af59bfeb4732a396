"""Per-card vGPU amounts (``volcano.sh/vgpu-memory``, ``-memory-percentage``, ``-cores``) are
Volcano's "ignored devices": no node lists them, so enqueue and queue accounting must not wait
for them, while ``volcano.sh/vgpu-number`` stays a counted scalar (issue #12)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.actions.enqueue import EnqueueAction
from stromboli.core.scheduler.api.pod import (
    IGNORED_DEVICE_RESOURCES,
    pod_requests,
    without_ignored_devices,
)
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load

from .builders import conf, make_cache, make_session, node, pod, podgroup, queue

VGPU = {
    "volcano.sh/vgpu-memory": "4000",
    "volcano.sh/vgpu-memory-percentage": "50",
    "volcano.sh/vgpu-cores": "100",
}
VOTERS = ["overcommit", "proportion", "capacity"]


def enqueued(objects: list[dict], voter: str) -> set[str]:
    ssn = make_session(objects, conf("enqueue", ["priority", "gang"], [voter]))
    EnqueueAction().execute(ssn)
    return {uid.split("/", 1)[1] for uid in ssn.enqueued}


@pytest.mark.parametrize("voter", VOTERS)
@pytest.mark.parametrize("name", sorted(IGNORED_DEVICE_RESOURCES))
def test_a_per_card_amount_in_min_resources_does_not_hold_the_group(voter: str, name: str) -> None:
    group = podgroup("pg", 1, min_resources={"cpu": "1", name: VGPU[name]})
    assert enqueued([node("n1", cpu="4"), group], voter) == {"pg"}


@pytest.mark.parametrize("voter", VOTERS)
def test_the_rest_of_min_resources_is_still_compared(voter: str) -> None:
    group = podgroup("pg", 1, min_resources={"cpu": "100", **VGPU})
    assert enqueued([node("n1", cpu="4"), group], voter) == set()


@pytest.mark.parametrize("voter", VOTERS)
def test_vgpu_number_stays_a_counted_scalar(voter: str) -> None:
    wanted = {"cpu": "1", "volcano.sh/vgpu-number": "2", **VGPU}
    bare = [node("n1", cpu="4"), podgroup("pg", 1, min_resources=wanted)]
    assert enqueued(bare, voter) == set()
    listed = [
        node("n1", cpu="4", extra={"volcano.sh/vgpu-number": "10"}),
        podgroup("pg", 1, min_resources=wanted),
    ]
    assert enqueued(listed, voter) == {"pg"}


def test_queue_capability_in_per_card_amounts_is_no_limit() -> None:
    objects = [
        node("n1", cpu="4"),
        queue("q", capability={"cpu": "4", "volcano.sh/vgpu-memory": "1"}),
        podgroup("pg", 1, queue="q", min_resources={"cpu": "1", "volcano.sh/vgpu-memory": "8000"}),
    ]
    assert enqueued(objects, "capacity") == {"pg"}
    snapshot = make_cache(objects).snapshot()
    capability = snapshot.queues["q"].capability
    assert capability is not None and set(capability.names()) == {"cpu"}


def test_the_snapshot_drops_per_card_amounts_everywhere() -> None:
    objects = [
        node("n1", cpu="4", extra={"volcano.sh/vgpu-memory": "40960", "nvidia.com/gpu": "1"}),
        podgroup("pg", 1, min_resources={"cpu": "1", "requests.cpu": "1", **VGPU}),
    ]
    snapshot = make_cache(objects).snapshot()
    job = snapshot.jobs["default/pg"]
    assert job.min_resources is not None and set(job.min_resources.names()) == {"cpu"}
    nodes = snapshot.nodes
    assert nodes.nodes[nodes.position["n1"]].allocatable.get("volcano.sh/vgpu-memory") == 0
    assert set(nodes.total_allocatable().names()) == {"cpu", "memory", "pods", "nvidia.com/gpu"}


def test_requests_and_limits_of_a_pod_are_read_alike() -> None:
    in_requests = pod("a", extra={"cpu": "1", "volcano.sh/vgpu-number": "1", **VGPU})
    in_limits = pod("b", cpu="1")
    in_limits["spec"]["containers"][0]["resources"]["limits"] = {
        "volcano.sh/vgpu-number": "1",
        **VGPU,
    }
    assert pod_requests(in_requests)[1].amounts == pod_requests(in_limits)[1].amounts
    assert set(pod_requests(in_requests)[1].names()) == {"cpu", "volcano.sh/vgpu-number"}


names = st.one_of(
    st.sampled_from(sorted(IGNORED_DEVICE_RESOURCES)),
    st.sampled_from(["cpu", "memory", "volcano.sh/vgpu-number", "nvidia.com/gpu"]),
    st.text(min_size=1, max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(names, st.text(max_size=8), max_size=8))
def test_only_the_per_card_names_are_dropped(resources: dict[str, str]) -> None:
    kept = without_ignored_devices(resources)
    assert set(kept) == set(resources) - IGNORED_DEVICE_RESOURCES
    assert all(kept[n] == resources[n] for n in kept)


@pytest.mark.parametrize("value", [None, "text", 3, ["volcano.sh/vgpu-memory"]])
def test_anything_but_a_mapping_passes_through_to_be_refused(value: object) -> None:
    assert without_ignored_devices(value) is value


# -- the simulator ------------------------------------------------------------------------------

VGPU_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - name: predicates
  - name: proportion
  - name: deviceshare
    arguments: {deviceshare.VGPUEnable: true}
"""
SCENARIO = """
apiVersion: v1
kind: Node
metadata:
  name: gpu-node
  annotations:
    volcano.sh/node-vgpu-register: >-
      [{"id": "GPU-0", "index": 0, "count": 10, "devmem": 40960, "devcore": 100,
        "type": "NVIDIA-A100-SXM4-40GB", "numa": 0, "mode": "hami-core", "health": true}]
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110", volcano.sh/vgpu-number: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: in-requests}
spec:
  schedulerName: volcano
  containers:
  - name: main
    image: vllm
    resources:
      requests: {cpu: "1", volcano.sh/vgpu-number: "1", volcano.sh/vgpu-memory: "4000",
                 volcano.sh/vgpu-cores: "30"}
      limits: {volcano.sh/vgpu-number: "1", volcano.sh/vgpu-memory: "4000",
               volcano.sh/vgpu-cores: "30"}
---
apiVersion: v1
kind: Pod
metadata: {name: percentage}
spec:
  schedulerName: volcano
  containers:
  - name: main
    image: vllm
    resources:
      requests: {cpu: "1", volcano.sh/vgpu-number: "1", volcano.sh/vgpu-memory-percentage: "25"}
      limits: {volcano.sh/vgpu-number: "1", volcano.sh/vgpu-memory-percentage: "25"}
"""


async def test_a_pod_with_vgpu_memory_in_its_requests_runs(tmp_path: Path) -> None:
    source, conf_path = tmp_path / "in.yaml", tmp_path / "conf.yaml"
    source.write_text(SCENARIO)
    conf_path.write_text(VGPU_CONF)
    result = await Simulation(load([str(source)]), conf_path).run()
    pods = {p["metadata"]["name"]: p for p in (await result.store.list("v1", "Pod")).items}
    for name in ("in-requests", "percentage"):
        assert pods[name]["spec"].get("nodeName") == "gpu-node", name
        assert pods[name]["status"]["phase"] == "Running", name
    groups = (await result.store.list("scheduling.volcano.sh/v1beta1", "PodGroup")).items
    # The PodGroup keeps the amounts as Volcano's controller writes them; only the scheduler
    # reads past them.
    assert any("volcano.sh/vgpu-memory" in (g["spec"].get("minResources") or {}) for g in groups)

"""The ``deviceshare`` plugin through the real scheduler: device ids written on the pods with
the binding, cards never given past their memory or cores, and a restarted scheduler that
rebuilds every card's use from the pods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api import constants as k
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.scheduler.util.devices import vgpu
from tests.scheduler.builders import Cluster, conf, container, node, pod, podgroup

register_builtins()

VGPU_ARGS = {"deviceshare.VGPUEnable": True}
SHARE_ARGS = {"deviceshare.GPUSharingEnable": True, "deviceshare.GPUNumberEnable": True}


def config(arguments: dict[str, Any]) -> str:
    return conf(
        "enqueue, allocate",
        ["priority", "gang"],
        ["drf", "proportion", {"name": "deviceshare", "arguments": arguments}],
    )


def register(*cards: dict[str, Any]) -> str:
    return json.dumps(list(cards))


def card(uuid: str, index: int = 0, memory: int = 40000, count: int = 10, **more: Any) -> dict:
    return {
        "id": uuid,
        "index": index,
        "count": count,
        "devmem": memory,
        "devcore": 100,
        "type": more.pop("type", "NVIDIA-A100-SXM4-40GB"),
        "numa": 0,
        "mode": more.pop("mode", "hami-core"),
        "health": more.pop("health", True),
    }


def vgpu_node(name: str, *cards: dict[str, Any], slots: int = 40) -> dict:
    obj = node(name, cpu="64", memory="256Gi", extra={"volcano.sh/vgpu-number": str(slots)})
    obj["metadata"]["annotations"] = {k.NODE_VGPU_REGISTER_KEY: register(*cards)}
    return obj


def share_node(name: str, cards: int = 2, memory: int = 16000) -> dict:
    return node(
        name,
        cpu="64",
        memory="256Gi",
        extra={"volcano.sh/gpu-number": str(cards), "volcano.sh/gpu-memory": str(cards * memory)},
    )


def vgpu_pod(
    name: str, number: int = 1, memory: int = 0, cores: int = 0, **more: Any
) -> list[dict]:
    extra = {"volcano.sh/vgpu-number": str(number)}
    if memory:
        extra["volcano.sh/vgpu-memory"] = str(memory)
    if cores:
        extra["volcano.sh/vgpu-cores"] = str(cores)
    return [
        podgroup(name, 1),
        pod(name, group=name, containers=[container("1", "1Gi", extra=extra)], **more),
    ]


async def cluster(tmp_path: Path, arguments: dict[str, Any], *objects: dict) -> Cluster:
    c = await Cluster(tmp_path, config(arguments)).start()
    await c.add(*objects)
    return c


def notes(obj: dict) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


async def test_vgpu_ids_written_on_the_pod_with_the_binding(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path, VGPU_ARGS, vgpu_node("n1", card("GPU-a")), *vgpu_pod("p", 1, 3000, 30)
    )
    await c.run()
    bound = await c.pod("p")
    assert bound["spec"]["nodeName"] == "n1"
    written = notes(bound)
    assert written[k.VGPU_IDS_NEW_KEY] == "GPU-a,NVIDIA-A100-SXM4-40GB,3000,30:"
    assert written[k.DEVICES_TO_ALLOCATE_KEY] == written[k.VGPU_IDS_NEW_KEY]
    assert written[k.VGPU_NODE_KEY] == "n1"
    assert written[k.BIND_PHASE_KEY] == "allocating"
    assert written[k.VGPU_TIME_KEY].isdigit()


async def test_a_card_is_never_given_past_its_memory(tmp_path: Path) -> None:
    objects = [vgpu_node("n1", card("GPU-a", memory=10000))]
    for i in range(4):
        objects += vgpu_pod(f"p{i}", 1, 4000)
    c = await cluster(tmp_path, VGPU_ARGS, *objects)
    await c.run(2)
    placed = [
        name for name in ("p0", "p1", "p2", "p3") if (await c.pod(name))["spec"].get("nodeName")
    ]
    assert len(placed) == 2


async def test_cores_bound_sharing(tmp_path: Path) -> None:
    objects = [vgpu_node("n1", card("GPU-a"))]
    for i in range(3):
        objects += vgpu_pod(f"p{i}", 1, 1000, 40)
    c = await cluster(tmp_path, VGPU_ARGS, *objects)
    await c.run(2)
    placed = [n for n in ("p0", "p1", "p2") if (await c.pod(n))["spec"].get("nodeName")]
    assert len(placed) == 2


async def test_restarted_scheduler_keeps_assignments_and_never_double_books(
    tmp_path: Path,
) -> None:
    objects = [vgpu_node("n1", card("GPU-a", 0, 10000), card("GPU-b", 1, 10000))]
    objects += vgpu_pod("first", 1, 6000) + vgpu_pod("second", 1, 6000)
    c = await cluster(tmp_path, VGPU_ARGS, *objects)
    await c.run()
    before = {n: notes(await c.pod(n))[k.VGPU_IDS_NEW_KEY] for n in ("first", "second")}
    assert {v.split(",")[0] for v in before.values()} == {"GPU-a", "GPU-b"}
    # A new scheduler over the same store: it knows nothing but what the pods say.
    c.scheduler = Scheduler(c.store, c.clock, c.config)
    await c.scheduler.start()
    await c.add(*vgpu_pod("third", 1, 6000), *vgpu_pod("small", 1, 4000))
    await c.run(2)
    assert not (await c.pod("third"))["spec"].get("nodeName")
    small = await c.pod("small")
    assert small["spec"]["nodeName"] == "n1"
    assert {n: notes(await c.pod(n))[k.VGPU_IDS_NEW_KEY] for n in ("first", "second")} == before


async def test_gpu_share_by_memory_writes_the_card_index(tmp_path: Path) -> None:
    objects = [share_node("n1", cards=2, memory=16000)]
    for i in range(3):
        objects += [
            podgroup(f"s{i}", 1),
            pod(
                f"s{i}",
                group=f"s{i}",
                containers=[container("1", extra={"volcano.sh/gpu-memory": "10000"})],
            ),
        ]
    c = await cluster(tmp_path, SHARE_ARGS, *objects)
    await c.run(2)
    indexes = [notes(await c.pod(f"s{i}")).get(k.GPU_INDEX_KEY) for i in range(3)]
    assert sorted(i for i in indexes if i) == ["0", "1"]
    assert indexes.count(None) == 1
    placed = [await c.pod(f"s{i}") for i in range(3)]
    assert all(k.PREDICATE_TIME_KEY in notes(p) for p in placed if p["spec"].get("nodeName"))


async def test_gpu_number_takes_whole_idle_cards(tmp_path: Path) -> None:
    objects = [share_node("n1", cards=4, memory=16000)]
    objects += [
        podgroup("half", 1),
        pod(
            "half",
            group="half",
            containers=[container("1", extra={"volcano.sh/gpu-memory": "1000"})],
        ),
        podgroup("three", 1),
        pod(
            "three",
            group="three",
            containers=[container("1", extra={"volcano.sh/gpu-number": "3"})],
        ),
    ]
    c = await cluster(tmp_path, SHARE_ARGS, *objects)
    await c.run(2)
    half = notes(await c.pod("half"))[k.GPU_INDEX_KEY]
    three = notes(await c.pod("three"))[k.GPU_INDEX_KEY].split(",")
    assert len(three) == 3 and half not in three


async def test_type_filter_sends_the_pod_to_the_right_model(tmp_path: Path) -> None:
    objects = [
        vgpu_node("a100", card("GPU-a", type="NVIDIA-A100-SXM4-40GB")),
        vgpu_node("h100", card("GPU-h", type="NVIDIA-H100-80GB")),
    ]
    objects += vgpu_pod("p", 1, 1000, annotations={k.USE_GPU_TYPE_KEY: "H100"})
    c = await cluster(tmp_path, VGPU_ARGS, *objects)
    await c.run()
    assert (await c.pod("p"))["spec"]["nodeName"] == "h100"


async def test_whole_gpus_select_the_model_by_feature_discovery_label(tmp_path: Path) -> None:
    a100 = node(
        "a100", extra={"nvidia.com/gpu": "8"}, labels={"nvidia.com/gpu.product": "NVIDIA-A100"}
    )
    h100 = node(
        "h100", extra={"nvidia.com/gpu": "8"}, labels={"nvidia.com/gpu.product": "NVIDIA-H100"}
    )
    objects = [a100, h100, podgroup("p", 1)]
    objects.append(
        pod(
            "p",
            group="p",
            containers=[container("1", extra={"nvidia.com/gpu": "1"})],
            annotations={k.NOUSE_GPU_TYPE_KEY: "A100"},
        )
    )
    c = await cluster(tmp_path, {}, *objects)
    await c.run()
    assert (await c.pod("p"))["spec"]["nodeName"] == "h100"


async def test_device_use_counts_in_queue_allocated(tmp_path: Path) -> None:
    objects = [vgpu_node("n1", card("GPU-a"), card("GPU-b", 1)), *vgpu_pod("p", 2, 1000)]
    c = await cluster(tmp_path, VGPU_ARGS, *objects)
    await c.run(2)
    ids = vgpu.decode(notes(await c.pod("p"))[k.VGPU_IDS_NEW_KEY])
    assert sorted(g.uuid for g in ids[0]) == ["GPU-a", "GPU-b"]
    queue = await c.get("Queue", "default")
    assert queue["status"]["allocated"].get("volcano.sh/vgpu-number") == "2"


async def test_a_pod_with_a_bad_vgpu_request_is_refused_with_its_field(tmp_path: Path) -> None:
    objects = [vgpu_node("n1", card("GPU-a"))]
    objects += vgpu_pod("p", 1, 1000, 250)
    c = await cluster(tmp_path, VGPU_ARGS, *objects)
    await c.run()
    bad = await c.pod("p")
    assert not bad["spec"].get("nodeName")
    messages = " ".join(
        cond.get("message", "") for cond in (bad.get("status") or {}).get("conditions") or ()
    )
    assert "volcano.sh/vgpu-cores" in messages


async def test_a_malformed_registration_offers_no_vgpus_and_breaks_nothing(
    tmp_path: Path,
) -> None:
    broken = vgpu_node("broken", card("GPU-x"))
    broken["metadata"]["annotations"][k.NODE_VGPU_REGISTER_KEY] = "[{not json"
    objects = [broken, vgpu_node("good", card("GPU-g")), *vgpu_pod("p", 1, 1000)]
    c = await cluster(tmp_path, VGPU_ARGS, *objects)
    await c.run()
    assert (await c.pod("p"))["spec"]["nodeName"] == "good"


@pytest.mark.parametrize("policy, expected", [("binpack", "GPU-a"), ("spread", "GPU-b")])
async def test_schedule_policy_picks_the_card(tmp_path: Path, policy: str, expected: str) -> None:
    objects = [vgpu_node("n1", card("GPU-a", 0), card("GPU-b", 1))]
    objects += vgpu_pod("first", 1, 1000)
    args = {**VGPU_ARGS, "deviceshare.SchedulePolicy": policy}
    c = await cluster(tmp_path, args, *objects)
    await c.run()
    assert notes(await c.pod("first"))[k.VGPU_IDS_NEW_KEY].startswith("GPU-a")
    await c.add(*vgpu_pod("second", 1, 1000))
    await c.run()
    assert vgpu.decode(notes(await c.pod("second"))[k.VGPU_IDS_NEW_KEY])[0][0].uuid == expected


async def test_exclusive_rule_keeps_matching_pods_on_separate_cards(tmp_path: Path) -> None:
    args = {**VGPU_ARGS, "deviceshare.GPUExclusiveRules": [{"app": "trainer"}]}
    objects = [vgpu_node("n1", card("GPU-a", 0), card("GPU-b", 1))]
    for i in range(3):
        objects += vgpu_pod(f"t{i}", 1, 1000, labels={"app": "trainer"})
    c = await cluster(tmp_path, args, *objects)
    await c.run(2)
    given = [notes(await c.pod(f"t{i}")).get(k.VGPU_IDS_NEW_KEY) for i in range(3)]
    assert sorted(g.split(",")[0] for g in given if g) == ["GPU-a", "GPU-b"]
    assert given.count(None) == 1


async def test_a_gang_that_does_not_fit_writes_no_device_ids(tmp_path: Path) -> None:
    gang = [podgroup("g", 2)]
    extra = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "30000"}
    for i in range(2):
        gang.append(pod(f"g-{i}", group="g", containers=[container("1", extra=extra)]))
    c = await cluster(tmp_path, VGPU_ARGS, vgpu_node("n1", card("GPU-a")), *gang)
    await c.run(2)
    for i in range(2):
        member = await c.pod(f"g-{i}")
        assert not member["spec"].get("nodeName")
        assert k.VGPU_IDS_NEW_KEY not in notes(member)

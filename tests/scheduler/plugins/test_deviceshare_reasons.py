"""The reasons a node's devices refuse a pod, as `stromboli explain` and the pod's
PodScheduled condition show them: wrong GPU model, no card with the memory or cores asked,
no MIG instance that large, every card shared out; each starting with Volcano's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.api import constants as k
from stromboli.core.scheduler.util.devices import vgpu
from tests.scheduler.builders import container, node, pod, podgroup
from tests.scheduler.plugins.test_deviceshare import (
    VGPU_ARGS,
    card,
    cluster,
    vgpu_node,
    vgpu_pod,
)


async def condition_message(tmp_path: Path, *objects: dict, arguments: dict = VGPU_ARGS) -> str:
    c = await cluster(tmp_path, arguments, *objects)
    await c.run(2)
    waiting = await c.pod("p")
    assert not waiting["spec"].get("nodeName")
    found = next(x for x in waiting["status"]["conditions"] if x["type"] == "PodScheduled")
    return str(found["message"])


@pytest.mark.parametrize(
    ("cards", "asks", "notes", "reason"),
    [
        (
            [card("GPU-a", type="NVIDIA-H100-80GB")],
            (1, 1000, 0),
            {k.USE_GPU_TYPE_KEY: "A100"},
            vgpu.WRONG_TYPE,
        ),
        ([card("GPU-a")], (1, 1000, 0), {k.VGPU_NOUSE_UUID_KEY: "GPU-a"}, vgpu.WRONG_TYPE),
        ([card("GPU-a", memory=8000)], (1, 9000, 0), {}, vgpu.NO_MEMORY),
        ([card("GPU-a")], (1, 1000, 0), {k.VGPU_MODE_KEY: "mig"}, vgpu.WRONG_MODE),
        (
            [card("GPU-a", mode="mig", count=7)],
            (1, 41000, 0),
            {k.VGPU_MODE_KEY: "mig"},
            vgpu.NO_MIG_INSTANCE,
        ),
        ([card("GPU-a", count=1)], (1, 1000, 0), {}, vgpu.CARDS_IN_USE),
        ([card("GPU-a")], (1, 1000, 80), {}, vgpu.NO_CORES),
    ],
)
async def test_each_refusal_names_what_no_card_meets(
    tmp_path: Path,
    cards: list[dict],
    asks: tuple[int, int, int],
    notes: dict[str, str],
    reason: str,
) -> None:
    number, memory, cores = asks
    objects = [vgpu_node("n1", *cards)]
    # One pod already holds a vGPU with 30% of the cores on each card (cards of count 1 are
    # then full; the 80%-cores pod no longer fits).
    objects += vgpu_pod("first", 1, 1000, 30)
    objects += vgpu_pod("p", number, memory, cores, annotations=notes)
    if reason in (vgpu.WRONG_TYPE, vgpu.WRONG_MODE, vgpu.NO_MIG_INSTANCE):
        objects = [objects[0], *objects[3:]]  # no first pod: the card itself refuses
    message = await condition_message(tmp_path, *objects)
    assert f"1 {reason}" in message
    assert message.startswith("0/1 nodes are unavailable")


async def test_whole_gpus_of_the_wrong_model_say_so(tmp_path: Path) -> None:
    a100 = node("a100", extra={"nvidia.com/gpu": "8"}, labels={"nvidia.com/gpu.product": "A100"})
    objects = [
        a100,
        podgroup("p", 1),
        pod(
            "p",
            group="p",
            containers=[container("1", extra={"nvidia.com/gpu": "1"})],
            annotations={k.USE_GPU_TYPE_KEY: "H100"},
        ),
    ]
    message = await condition_message(tmp_path, *objects, arguments={})
    assert "1 gpu type not allowed" in message

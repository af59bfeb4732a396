"""The vGPU device-config ConfigMap: its ``nvidia.knownMigGeometries`` replace the built-in
MIG layouts, from the ConfigMap the ``deviceshare`` arguments name; a broken or missing one
leaves the built-in layouts in force."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.api import constants as k
from stromboli.core.scheduler.util.devices.config import known_geometries
from stromboli.core.scheduler.util.devices.request import DeviceError
from tests.scheduler.plugins.test_deviceshare import VGPU_ARGS, card, cluster, vgpu_node, vgpu_pod

DEVICE_CONFIG = """\
nvidia:
  resourceCountName: volcano.sh/vgpu-number
  resourceMemoryName: volcano.sh/vgpu-memory
  resourceCoreName: volcano.sh/vgpu-cores
  deviceSplitCount: 10
  knownMigGeometries:
  - models: [A100-SXM4-40GB]
    allowedGeometries:
    - group: halves
      geometries:
      - {name: 3g.20gb, memory: 20000, count: 2}
"""


def config_map(text: str, name: str = "volcano-vgpu-device-config", namespace: str = "kube-system"):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"device-config.yaml": text},
    }


def mig_objects() -> list[dict]:
    return [
        vgpu_node("n1", card("GPU-m", mode="mig", count=7, memory=40960)),
        *vgpu_pod("p", 1, 8000, annotations={k.VGPU_MODE_KEY: "mig"}),
    ]


async def assigned(tmp_path: Path, arguments: dict, *objects: dict) -> str:
    c = await cluster(tmp_path, arguments, *objects)
    await c.run(2)
    bound = await c.pod("p")
    return str((bound["metadata"].get("annotations") or {}).get(k.VGPU_IDS_NEW_KEY, ""))


async def test_the_configmap_geometries_replace_the_built_in_ones(tmp_path: Path) -> None:
    ids = await assigned(tmp_path, VGPU_ARGS, config_map(DEVICE_CONFIG), *mig_objects())
    assert ids == "GPU-m[halves-0],NVIDIA-A100-SXM4-40GB,20000,0:"


async def test_without_the_configmap_the_built_in_geometries_apply(tmp_path: Path) -> None:
    ids = await assigned(tmp_path, VGPU_ARGS, *mig_objects())
    assert ids == "GPU-m[group2-0],NVIDIA-A100-SXM4-40GB,10240,0:"


async def test_the_arguments_name_the_configmap(tmp_path: Path) -> None:
    arguments = {
        **VGPU_ARGS,
        "deviceshare.KnownGeometriesCMName": "gpu-layouts",
        "deviceshare.KnownGeometriesCMNamespace": "gpu-system",
    }
    objects = [config_map(DEVICE_CONFIG, "gpu-layouts", "gpu-system"), *mig_objects()]
    assert "[halves-0]" in await assigned(tmp_path, arguments, *objects)
    # The default-named ConfigMap is not the one these arguments name.
    (tmp_path / "other").mkdir()
    assert "[group2-0]" in await assigned(
        tmp_path / "other", arguments, config_map(DEVICE_CONFIG), *mig_objects()
    )


async def test_a_broken_configmap_leaves_the_built_in_geometries(tmp_path: Path) -> None:
    broken = config_map("nvidia:\n  knownMigGeometries: [{models: 3}]\n")
    assert "[group2-0]" in await assigned(tmp_path, VGPU_ARGS, broken, *mig_objects())


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("nvidia: {knownMigGeometries: 3}", "knownMigGeometries"),
        (
            "nvidia:\n  knownMigGeometries: [{models: [A100], allowedGeometries: [{geometries: "
            "[{name: x, memory: -1, count: 1}]}]}]",
            "memory",
        ),
        ("[" * 400, "device-config.yaml"),
    ],
)
def test_errors_name_the_configmap_and_the_field(text: str, field: str) -> None:
    with pytest.raises(DeviceError, match="ConfigMap kube-system/cm") as err:
        known_geometries({"device-config.yaml": text}, "ConfigMap kube-system/cm")
    assert field in str(err.value)
    assert known_geometries({}, "cm") is None
    assert known_geometries({"device-config.yaml": "nvidia: {}"}, "cm") is None

"""examples/gpu-share.yaml with examples/gpu-share-conf.yaml through `stromboli simulate`."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.scheduler.conf import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PODS = EXAMPLES / "gpu-share.yaml"
CONF = EXAMPLES / "gpu-share-conf.yaml"


def pods() -> dict[str, dict]:
    result = CliRunner().invoke(
        main, ["simulate", str(PODS), "--scheduler-conf", str(CONF), "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    state = orjson.loads(result.stdout)
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "Pod"}


def ids(obj: dict) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get("volcano.sh/vgpu-ids-new")


def test_the_configuration_enables_vgpus() -> None:
    config = load_config(CONF)
    assert "deviceshare" in config.plugin_names()


def test_inference_pods_share_one_card_and_the_mig_pod_gets_a_2g_10gb() -> None:
    by_name = pods()
    for name in ("infer-0", "infer-1", "infer-2"):
        assert by_name[name]["spec"]["nodeName"] == "gpu-node"
        assert ids(by_name[name]) == "GPU-0a,NVIDIA-A100-SXM4-40GB,10000,30:"
    assert by_name["mig-0"]["spec"]["nodeName"] == "mig-node"
    assert ids(by_name["mig-0"]) == "GPU-9m[group2-0],NVIDIA-A100-SXM4-40GB,10240,0:"


def test_the_trainer_waits_for_two_cards() -> None:
    trainer = pods()["trainer"]
    assert not trainer["spec"].get("nodeName")
    assert ids(trainer) is None

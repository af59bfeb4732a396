"""examples/gpu/ through `stromboli simulate` and `stromboli explain`: where each pod lands, the
GPU figures the output carries, and the device or topology reason of each pod left waiting."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.scheduler.util.devices.fragmentation import PodShape, WorkloadMix
from stromboli.core.scheduler.util.devices.vgpu import NO_MEMORY, NO_MIG_INSTANCE, WRONG_TYPE

GPU = Path(__file__).resolve().parents[2] / "examples" / "gpu"
VGPU = GPU / "vgpu-binpack-vs-spread.yaml"
BINPACK = GPU / "vgpu-binpack-conf.yaml"
SPREAD = GPU / "vgpu-spread-conf.yaml"


@functools.cache
def run(example: str, conf: str) -> dict:
    result = CliRunner().invoke(
        main, ["simulate", str(GPU / example), "--scheduler-conf", str(GPU / conf), "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def pods(state: dict) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "Pod"}


def cards_of(pod: dict) -> list[str]:
    """The card ids in the pod's volcano.sh/vgpu-ids-new, e.g. ``GPU-gpu-a-0``."""
    ids = (pod["metadata"].get("annotations") or {}).get("volcano.sh/vgpu-ids-new", "")
    return [item.split(",")[0] for item in ids.split(":") if item]


def explain(target: str, example: str, conf: str) -> str:
    result = CliRunner().invoke(
        main,
        ["explain", target, "--simulate", str(GPU / example), "--scheduler-conf", str(GPU / conf)],
        env={"COLUMNS": "400"},  # rich's width: one line per reason
    )
    assert result.exit_code == 0, result.output
    return result.output


def report(example: str, conf: str, *extra: str) -> str:
    result = CliRunner().invoke(
        main,
        ["simulate", str(GPU / example), "--scheduler-conf", str(GPU / conf), *extra],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_every_example_header_runs_with_files_that_exist() -> None:
    for path in GPU.glob("*.yaml"):
        if path.name.endswith("-conf.yaml"):
            continue
        header = [line for line in path.read_text().splitlines() if line.startswith("#")]
        runs = [line for line in header if "stromboli simulate examples/gpu/" in line]
        assert runs, f"{path.name}: its header says how to run it"
        for line in runs:
            for word in line.split():
                if word.startswith("examples/gpu/"):
                    assert (GPU.parents[1] / word).is_file(), f"{path.name}: {word}"


# -- shared vGPUs: binpack against spread -----------------------------------------------------


def test_binpack_puts_the_four_inference_pods_on_one_card_and_big_on_an_idle_one() -> None:
    by_name = pods(run(VGPU.name, BINPACK.name))
    for i in range(4):
        assert cards_of(by_name[f"infer-{i}"]) == ["GPU-gpu-a-0"]
    assert by_name["big"]["spec"]["nodeName"]
    assert cards_of(by_name["big"]) != ["GPU-gpu-a-0"]


def test_spread_puts_one_pod_per_card_and_big_waits_for_memory() -> None:
    by_name = pods(run(VGPU.name, SPREAD.name))
    cards = [cards_of(by_name[f"infer-{i}"])[0] for i in range(4)]
    assert sorted(cards) == ["GPU-gpu-a-0", "GPU-gpu-a-1", "GPU-gpu-b-0", "GPU-gpu-b-1"]
    assert not by_name["big"]["spec"].get("nodeName")
    assert NO_MEMORY in explain("big", VGPU.name, SPREAD.name)


INFER = PodShape(2000.0, 0.0, 1, gpu_memory=10000, gpu_cores=25)
BIG = PodShape(2000.0, 0.0, 1, gpu_memory=40000)
H100 = PodShape(2000.0, 0.0, 1, gpu_memory=10000, use_types=("H100",))


def shares() -> dict[PodShape, float]:
    """Each shape's share of the mix, as the fragmentation plugin weighs the pods seen."""
    mix = WorkloadMix()
    for shape in [INFER] * 4 + [BIG, H100]:
        mix.observe(shape)
    mix._derive()  # the plugin's weights for exactly these pods
    total = float(mix.weights.sum())
    return {shape: float(w) / total for shape, w in zip(mix.shapes, mix.weights, strict=True)}


def test_spread_fragmentation_is_the_mix_that_cannot_use_the_free_memory() -> None:
    # Each card keeps 750 milli free (75% of its cores): the inference pods could use it, big
    # (977 milli of a card) and h100-only (no H100) not, so each node's 1.5 free cards are a
    # fragment for their share of the mix.
    share = shares()
    gpu = run(VGPU.name, SPREAD.name)["gpu"]
    end = gpu["timeline"][-1]
    assert end["free"] == pytest.approx(3.0)
    assert end["fragmented"] == pytest.approx(3.0 * (share[BIG] + share[H100]), abs=1e-3)
    assert end["fragmentation"] == pytest.approx(share[BIG] + share[H100], abs=1e-3)
    assert gpu["summary"]["fragmentation"]["end"] == end["fragmentation"]
    assert end["sharedCards"] == 4
    assert end["cores"] == pytest.approx(0.25)
    # Binpack leaves gpu-b's two idle cards, lost only to h100-only, and a sliver of 23 milli
    # on gpu-a's second card (960 MiB) that no pod can use.
    packed = run(VGPU.name, BINPACK.name)["gpu"]["timeline"][-1]
    assert packed["free"] == pytest.approx(2.023)
    assert packed["fragmented"] == pytest.approx(0.023 + 2 * share[H100], abs=1e-3)
    assert packed["fragmented"] < end["fragmented"] / 2


def test_the_gpu_map_lists_every_card_with_the_pods_holding_it() -> None:
    nodes = {n["name"]: n for n in run(VGPU.name, BINPACK.name)["gpu"]["nodes"]}
    assert set(nodes) == {"gpu-a", "gpu-b"}
    card = next(c for c in nodes["gpu-a"]["cards"] if c["uuid"] == "GPU-gpu-a-0")
    assert card["memoryUsedMiB"] == 40000 and card["memoryTotalMiB"] == 40960
    assert card["coresUsed"] == 100
    assert [p["pod"] for p in card["pods"]] == [f"default/infer-{i}" for i in range(4)]
    assert all(p["memoryMiB"] == 10000 and p["cores"] == 25 for p in card["pods"])
    assert all(not c["pods"] for c in nodes["gpu-b"]["cards"])


def test_a_pod_asking_for_a_model_no_card_is_waits_with_the_model_named() -> None:
    for conf in (BINPACK.name, SPREAD.name):
        assert not pods(run(VGPU.name, conf))["h100-only"]["spec"].get("nodeName")
        assert WRONG_TYPE in explain("h100-only", VGPU.name, conf)


def test_the_text_report_shows_gpus_over_time_and_the_map() -> None:
    out = report(VGPU.name, SPREAD.name)
    assert "GPUs over time (4 cards)" in out
    share = shares()
    assert "fragmentation (of free)" in out
    assert f"{(share[BIG] + share[H100]) * 100:.0f}%" in out
    assert "GPU map at the end (2 nodes)" in out
    short = report(VGPU.name, SPREAD.name, "--gpu-map", "1")
    assert "the 1 most fragmented" in short and "--gpu-map all" in short


# -- MIG -------------------------------------------------------------------------------------


def test_each_mig_pod_gets_the_smallest_free_instance_that_holds_it() -> None:
    by_name = pods(run("mig.yaml", BINPACK.name))
    ids = {
        name: (by_name[name]["metadata"].get("annotations") or {}).get(
            "volcano.sh/vgpu-ids-new", ""
        )
        for name in ("small", "small-2", "medium", "large")
    }
    assert ids["small"].startswith("GPU-mig-node-0[group1-0],")
    assert ids["small-2"].startswith("GPU-mig-node-0[group1-1],")
    assert ids["medium"].startswith("GPU-mig-node-1[group2-0],")
    assert ids["large"].startswith("GPU-mig-node-2[group3-0],")
    assert ",5120," in ids["small"] and ",10240," in ids["medium"] and ",20480," in ids["large"]


def test_a_mig_pod_larger_than_every_geometry_waits_and_is_explained() -> None:
    assert not pods(run("mig.yaml", BINPACK.name))["huge"]["spec"].get("nodeName")
    assert NO_MIG_INSTANCE in explain("huge", "mig.yaml", BINPACK.name)


def test_the_gpu_map_shows_each_mig_cards_split_and_instances() -> None:
    gpu = run("mig.yaml", BINPACK.name)["gpu"]
    (node,) = gpu["nodes"]
    cards = {c["index"]: c for c in node["cards"]}
    assert [cards[i]["migGroup"] for i in range(3)] == ["group1", "group2", "group3"]
    assert [(p["pod"], p["migInstance"]) for p in cards[0]["pods"]] == [
        ("default/small", "1g.5gb"),
        ("default/small-2", "1g.5gb"),
    ]
    assert cards[2]["pods"][0]["migInstance"] == "3g.20gb"
    assert gpu["timeline"][-1]["migInstances"] == 4
    assert gpu["timeline"][-1]["migCards"] == 3


# -- NUMA ------------------------------------------------------------------------------------


def test_single_numa_node_pods_take_one_numa_node_each_and_the_wide_one_is_refused() -> None:
    by_name = pods(run("numa.yaml", "numa-conf.yaml"))
    decisions = {
        name: json.loads(by_name[name]["metadata"]["annotations"]["volcano.sh/topology-decision"])
        for name in ("trainer", "loader")
    }
    assert {d["cpu"] for d in decisions.values()} == {"0-5", "8-13"}
    assert not by_name["wide"]["spec"].get("nodeName")
    out = explain("wide", "numa.yaml", "numa-conf.yaml")
    assert "numa-aware" in out and "single-numa-node: no NUMA node has 4 free CPUs" in out


def test_the_numatopology_is_not_reported_as_inert() -> None:
    args = ["simulate", str(GPU / "numa.yaml"), "--scheduler-conf", str(GPU / "numa-conf.yaml")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0
    assert "Numatopology" not in result.stderr  # numa-aware reads it


def test_whole_gpus_are_counted_per_node() -> None:
    gpu = run("numa.yaml", "numa-conf.yaml")["gpu"]
    (node,) = gpu["nodes"]
    whole = node["wholeGpus"]
    assert (whole["total"], whole["used"]) == (4, 3)
    assert whole["model"] == "NVIDIA-H100-80GB-HBM3"
    assert whole["pods"] == [
        {"pod": "default/loader", "gpus": 1},
        {"pod": "default/trainer", "gpus": 2},
    ]
    assert gpu["timeline"][-1]["whole"] == 3 and gpu["timeline"][-1]["gpus"] == 4


# -- HyperNodes ------------------------------------------------------------------------------


def test_the_soft_gang_lands_in_one_nvlink_domain_and_the_hard_one_waits() -> None:
    by_name = pods(run("hypernodes.yaml", "hypernodes-conf.yaml"))
    domains = {"gpu-0": "nvl-0", "gpu-1": "nvl-0", "gpu-2": "nvl-1", "gpu-3": "nvl-1"}
    domains |= {"gpu-4": "nvl-2", "gpu-5": "nvl-2"}
    finetune = {by_name[f"finetune-worker-{i}"]["spec"]["nodeName"] for i in range(2)}
    assert len(finetune) == 2 and len({domains[n] for n in finetune}) == 1
    for i in range(3):
        assert not by_name[f"pretrain-worker-{i}"]["spec"].get("nodeName")


def test_explain_names_the_tier_the_hard_gang_may_not_span() -> None:
    reason = "the gang does not fit in any hyperNode of tier <= 1 (networkTopology mode hard)"
    job = explain("job/pretrain", "hypernodes.yaml", "hypernodes-conf.yaml")
    assert f"gang short of room: {reason}" in job
    assert "closest: hyperNode nvl-" in job and "2/3 members fit" in job
    assert "the next allocate places" not in job
    assert reason in explain("pretrain-worker-0", "hypernodes.yaml", "hypernodes-conf.yaml")


# -- fragmentation against binpack -------------------------------------------------------------


def test_binpack_strands_a_card_that_fragmentation_keeps_usable() -> None:
    packed = run("fragmentation.yaml", "fragmentation-binpack-conf.yaml")
    aware = run("fragmentation.yaml", "fragmentation-conf.yaml")
    assert pods(packed)["etl"]["spec"]["nodeName"] == "gpu-a"
    assert not pods(packed)["train-1"]["spec"].get("nodeName")
    assert pods(aware)["etl"]["spec"]["nodeName"] == "cpu-b"
    assert pods(aware)["train-1"]["spec"]["nodeName"] == "gpu-a"
    # Binpack's free card cannot be used by any pod seen (no cpu left beside it).
    assert packed["gpu"]["summary"]["fragmentation"]["end"] == pytest.approx(1.0)
    assert aware["gpu"]["timeline"][-1]["free"] == pytest.approx(0.0)
    assert "Insufficient cpu" in explain(
        "train-1", "fragmentation.yaml", "fragmentation-binpack-conf.yaml"
    )


def test_the_html_report_draws_the_gpu_charts_and_map(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    report("fragmentation.yaml", "fragmentation-binpack-conf.yaml", "--html", str(page))
    html = page.read_text()
    for key in ("gpu:allocated", "gpu:memory", "gpu:fragmentation", "gpu:mig-instances"):
        assert f'data-series="{key}"' in html
    assert 'class="gpu-map"' in html and 'data-node="gpu-a"' in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org", "")

"""The simulator's GPU figures: sampling (legacy share, whole GPUs, hostile registrations),
the pure helpers the report and page share, and that clusters without GPUs show none."""

from __future__ import annotations

import io
import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from stromboli.core.cli import main
from stromboli.core.simulate.engine import Simulation, SimulationResult
from stromboli.core.simulate.gpu_figures import (
    changed_only,
    gpu_document,
    most_fragmented,
    sparkline,
    summaries,
)
from stromboli.core.simulate.gpus import GpuSample, NodeGpus, sampler_for
from stromboli.core.simulate.loader import load
from stromboli.core.simulate.report import print_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BARS = set("▁▂▃▄▅▆▇█")

SHARE_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - name: predicates
  - name: proportion
  - name: deviceshare
    arguments: {deviceshare.GPUSharingEnable: true, deviceshare.GPUNumberEnable: true}
"""
VGPU_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - name: predicates
  - name: proportion
  - name: deviceshare
    arguments: {deviceshare.VGPUEnable: true}
"""


def sample(t: float, **figures: float) -> GpuSample:
    values = dict.fromkeys(
        ("gpus", "whole", "memory", "cores", "allocated", "free", "fragmented"), 0.0
    )
    counts = dict.fromkeys(("shared_cards", "mig_instances", "mig_cards"), 0)
    values.update({k: v for k, v in figures.items() if k in values})
    counts.update({k: int(v) for k, v in figures.items() if k in counts})
    return GpuSample(time=t, **values, **counts)  # type: ignore[arg-type]


async def simulate(tmp_path: Path, text: str, conf: str) -> SimulationResult:
    source, conf_path = tmp_path / "in.yaml", tmp_path / "conf.yaml"
    source.write_text(text)
    conf_path.write_text(conf)
    return await Simulation(load([str(source)]), conf_path).run()


# -- pure helpers ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1e6, allow_nan=False), st.floats(0, 1e6, allow_nan=False)),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 64),
)
def test_a_sparkline_has_one_bar_per_bucket(points: list[tuple[float, float]], width: int) -> None:
    points.sort()
    times = [t for t, _ in points]
    values = [v for _, v in points]
    line = sparkline(times, values, width)
    assert len(line) == width
    assert set(line) <= BARS
    if max(values) == 0:
        assert set(line) == {"▁"}


def test_a_sparkline_follows_a_step() -> None:
    line = sparkline([0, 50, 100], [0.0, 1.0, 1.0], 10)
    assert line == "▁" * 5 + "█" * 5
    assert sparkline([5.0], [3.0], 4) == "████"
    assert sparkline([], [], 4) == ""


def test_summaries_weigh_each_sample_by_how_long_it_held() -> None:
    samples = [sample(0, fragmented=1.0, free=2.0), sample(30, free=2.0), sample(40, free=2.0)]
    by_key = {s.metric.key: s for s in summaries(samples)}
    assert by_key["fragmented"].mean == pytest.approx(0.75)
    assert by_key["fragmented"].peak == 1.0 and by_key["fragmented"].end == 0.0
    assert by_key["fragmentation"].peak == pytest.approx(0.5)
    assert samples[0].fragmentation == 0.5 and sample(0).fragmentation == 0.0


def test_the_json_timeline_keeps_only_changes_and_the_last_sample() -> None:
    samples = [sample(0, gpus=2), sample(1, gpus=2), sample(2, gpus=2, whole=1), sample(3, gpus=2)]
    samples.append(sample(4, gpus=2))
    assert [s.time for s in changed_only(samples)] == [0, 2, 3, 4]
    assert changed_only([]) == []


def test_the_map_lists_the_most_fragmented_nodes_first() -> None:
    nodes = [
        NodeGpus("b", fragmented=0.5, free=1.0),
        NodeGpus("a", fragmented=0.5, free=1.0),
        NodeGpus("c", fragmented=2.0, free=3.0),
        NodeGpus("d", fragmented=0.5, free=4.0),
    ]
    assert [n.name for n in most_fragmented(nodes, None)] == ["c", "d", "a", "b"]
    assert [n.name for n in most_fragmented(nodes, 2)] == ["c", "d"]
    assert most_fragmented(nodes, 0) == []


# -- sampling --------------------------------------------------------------------------------


LEGACY = """apiVersion: v1
kind: Node
metadata: {name: share-node}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110", volcano.sh/gpu-number: "2",
                       volcano.sh/gpu-memory: "32000"}}
---
apiVersion: v1
kind: Pod
metadata: {name: slice}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {limits: {cpu: "1", volcano.sh/gpu-memory: "6000"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: whole, annotations: {sim.stromboli.dev/submit-at: 1s}}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {limits: {cpu: "1", volcano.sh/gpu-number: "1"}}}]
"""


async def test_legacy_share_cards_count_a_slice_and_a_whole_card(tmp_path: Path) -> None:
    result = await simulate(tmp_path, LEGACY, SHARE_CONF)
    end = result.timeline[-1].gpu
    assert end is not None
    assert (end.gpus, end.whole, end.shared_cards) == (2, 1, 1)
    assert end.memory == pytest.approx((6000 + 16000) / 32000)
    (node,) = sampler_for(result.scheduler).node_map(result.scheduler)
    held = {c.index: [(h.pod, h.memory) for h in c.holdings] for c in node.cards}
    assert sorted(held.values()) == [[("default/slice", 6000)], [("default/whole", 16000)]]
    assert {c.mode for c in node.cards} == {"gpu-share"}
    # The slice's card keeps 10000 MiB free, usable by the slice's shape but not a whole card.
    assert node.free == pytest.approx(10000 / 16000)
    assert 0 < node.fragmented < node.free


def test_a_cluster_without_gpus_reports_none() -> None:
    runner = CliRunner()
    text = runner.invoke(main, ["simulate", str(EXAMPLES / "gang-waits.yaml")])
    assert text.exit_code == 0 and "GPU" not in text.output
    out = runner.invoke(main, ["simulate", str(EXAMPLES / "gang-waits.yaml"), "-o", "json"])
    assert "gpu" not in orjson.loads(out.stdout)


def test_yaml_output_carries_the_same_gpu_keys() -> None:
    import yaml

    args = ["simulate", str(EXAMPLES / "gpu-share.yaml"), "--scheduler-conf"]
    args.append(str(EXAMPLES / "gpu-share-conf.yaml"))
    as_json = orjson.loads(CliRunner().invoke(main, [*args, "-o", "json"]).stdout)
    as_yaml = yaml.safe_load(CliRunner().invoke(main, [*args, "-o", "yaml"]).stdout)
    assert as_yaml["gpu"] == as_json["gpu"]
    assert set(as_json["gpu"]) == {"summary", "timeline", "nodes"}


def test_gpu_map_refuses_what_is_not_a_count() -> None:
    args = ["simulate", str(EXAMPLES / "gpu-share.yaml"), "--gpu-map"]
    for bad in ("x", "-1"):
        result = CliRunner().invoke(main, [*args, bad])
        assert result.exit_code == 2 and "--gpu-map" in result.output
    conf = ["--scheduler-conf", str(EXAMPLES / "gpu-share-conf.yaml")]
    shown = CliRunner().invoke(main, [*args, "all", *conf], env={"COLUMNS": "200"}).output
    assert "GPU map at the end (2 nodes)" in shown and "gpu-node" in shown
    hidden = CliRunner().invoke(main, [*args, "0", *conf], env={"COLUMNS": "200"}).output
    assert "GPUs over time" in hidden and "GPU map" not in hidden


def _register(cards: int, memory: int) -> str:
    entries = [
        {"id": f"G{i}", "index": i, "count": 10, "devmem": memory, "devcore": 100,
         "type": "[/x] <b>A100-SXM4-80GB", "mode": "mig" if i % 2 else "hami-core"}
        for i in range(cards)
    ]  # fmt: skip
    return json.dumps(json.dumps(entries))


async def test_hostile_registrations_neither_crash_nor_stall(tmp_path: Path) -> None:
    nodes = f"""apiVersion: v1
kind: Node
metadata:
  name: wide
  annotations: {{volcano.sh/node-vgpu-register: {_register(128, 1 << 40)}}}
status: {{allocatable: {{cpu: "64", memory: 1Ti, pods: "110", volcano.sh/vgpu-number: "1280",
                        nvidia.com/gpu: "1000000000"}}}}
---
apiVersion: v1
kind: Node
metadata:
  name: broken
  annotations: {{volcano.sh/node-vgpu-register: "[{{\\"id\\": 7}}]"}}
status: {{allocatable: {{cpu: "8", memory: 8Gi, pods: "110", volcano.sh/vgpu-number: "10"}}}}
"""
    pods = "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: p{i}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{limits: {{cpu: "100m",
    volcano.sh/vgpu-number: "{1 + i % 3}", volcano.sh/vgpu-memory: "{1000 * (i + 1)}"}}}}}}]
"""
        for i in range(40)
    )
    result = await simulate(tmp_path, nodes + pods, VGPU_CONF)
    out = io.StringIO()
    print_report(result, {"items": []}, Console(file=out, width=200), gpu_map=None)
    assert "[/x] <b>" in out.getvalue()  # the model as registered, not read as markup
    end = result.timeline[-1].gpu
    assert end is not None
    assert end.gpus == 128 + 1_000_000_000
    assert 0 <= end.fragmented <= end.free + 1e-9
    document = gpu_document(result)
    assert document is not None
    names = [n["name"] for n in document["nodes"]]
    assert names == ["wide"]  # the unreadable registration offers no card
    assert len(document["nodes"][0]["cards"]) == 128


def _churn(seed: int) -> str:
    """Three vGPU nodes (one of MIG cards) and pods of random shapes arriving and finishing."""
    import random

    rng = random.Random(seed)
    out = []
    for n, mode in enumerate(("hami-core", "hami-core", "mig")):
        cards = [
            {"id": f"N{n}G{i}", "index": i, "count": 4, "devmem": 40960, "devcore": 100,
             "type": "NVIDIA-A100-SXM4-40GB", "mode": mode}
            for i in range(2)
        ]  # fmt: skip
        out.append(
            f"""apiVersion: v1
kind: Node
metadata:
  name: n{n}
  annotations: {{volcano.sh/node-vgpu-register: {json.dumps(json.dumps(cards))}}}
status: {{allocatable: {{cpu: "16", memory: 64Gi, pods: "110", volcano.sh/vgpu-number: "8"}}}}
"""
        )
    for i in range(30):
        memory = rng.choice((4000, 9000, 19000, 30000))
        cores = rng.choice((0, 25, 50))
        mig = ", volcano.sh/vgpu-mode: mig" if rng.random() < 0.3 else ""
        out.append(
            f"""apiVersion: v1
kind: Pod
metadata:
  name: p{i}
  annotations: {{sim.stromboli.dev/submit-at: {rng.randrange(20)}s,
                sim.stromboli.dev/runtime: {rng.randrange(1, 15)}s{mig}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{limits: {{cpu: "{rng.randrange(1, 6)}",
    volcano.sh/vgpu-number: "1", volcano.sh/vgpu-memory: "{memory}",
    volcano.sh/vgpu-cores: "{cores}"}}}}}}]
"""
        )
    return "---\n".join(out)


@pytest.mark.parametrize("seed", range(4))
async def test_the_kept_inventory_reads_as_one_built_afresh(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import copy

    from stromboli.core.simulate.gpus import GpuSampler

    checked: list[float] = []
    incremental = GpuSampler.sample

    def both(self: GpuSampler, now: float, scheduler: object) -> GpuSample | None:
        kept = incremental(self, now, scheduler)  # type: ignore[arg-type]
        fresh = GpuSampler()
        fresh._seen, fresh.mix = set(self._seen), copy.deepcopy(self.mix)
        again = incremental(fresh, now, scheduler)  # type: ignore[arg-type]
        assert kept is not None and again is not None
        for name in GpuSample.__slots__:
            assert getattr(kept, name) == pytest.approx(getattr(again, name)), (now, name)
        checked.append(now)
        return kept

    monkeypatch.setattr(GpuSampler, "sample", both)
    result = await simulate(tmp_path, _churn(seed), VGPU_CONF)
    assert len(checked) == len(result.timeline) > 10
    assert result.pods_bound >= 10

"""Every example in examples/ run through `stromboli simulate`, checked for its outcome."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulate(*args: str) -> dict:
    result = CliRunner().invoke(main, ["simulate", *args, "--output", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def pods(state: dict) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "Pod"}


def test_gang_waits_for_room_and_starts_whole() -> None:
    state = simulate(str(EXAMPLES / "gang-waits.yaml"))
    by_name = pods(state)
    for i in range(2):
        assert by_name[f"small-job-{i}"]["status"]["startTime"] == "1970-01-01T00:00:00Z"
    big = [by_name[f"big-gang-{i}"] for i in range(4)]
    # Two pods would have fitted at t=5s, but the gang starts whole once the small job ends.
    assert {p["status"]["startTime"] for p in big} == {"1970-01-01T00:01:00Z"}
    assert all(p["status"]["phase"] == "Succeeded" for p in big)
    groups = {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "PodGroup"}
    assert groups["big-gang"]["status"]["phase"] == "Completed"


def test_queues_share_the_cluster_by_weight() -> None:
    by_name = pods(simulate(str(EXAMPLES / "queues-by-weight.yaml")))
    bound = {"research": 0, "production": 0}
    for name, pod in by_name.items():
        if pod["spec"].get("nodeName"):
            bound[name.split("-")[0]] += 1
    assert bound == {"research": 4, "production": 12}
    pending = [p for p in by_name.values() if not p["spec"].get("nodeName")]
    assert len(pending) == 8
    assert all(p["metadata"]["name"].startswith("research") for p in pending)


def test_default_config_spreads_pods() -> None:
    by_name = pods(simulate(str(EXAMPLES / "binpack-vs-spread.yaml")))
    assert {p["spec"]["nodeName"] for p in by_name.values()} == {"node-0", "node-1", "node-2"}


def test_binpack_config_packs_pods_onto_one_node() -> None:
    by_name = pods(
        simulate(
            str(EXAMPLES / "binpack-vs-spread.yaml"),
            "--scheduler-conf",
            str(EXAMPLES / "binpack-conf.yaml"),
        )
    )
    assert len({p["spec"]["nodeName"] for p in by_name.values()}) == 1


def test_affinity_and_taints() -> None:
    state = simulate(str(EXAMPLES / "affinity-and-taints.yaml"))
    by_name = pods(state)
    assert by_name["trainer"]["spec"]["nodeName"] == "node-gpu-0"
    assert by_name["web"]["spec"]["nodeName"] in {"node-cpu-0", "node-cpu-1"}
    lost = by_name["lost"]
    assert "nodeName" not in lost["spec"]
    condition = next(c for c in lost["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["message"].startswith("0/3 nodes are unavailable: ")
    assert "node affinity/selector" in condition["message"]
    events = [o for o in state["items"] if o["kind"] == "Event"]
    assert any(
        e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "lost" for e in events
    )


def test_human_report_names_the_pending_reason() -> None:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLES / "affinity-and-taints.yaml")])
    assert result.exit_code == 0, result.output
    assert "lost" in result.output
    assert "node affinity/selector" in result.output


def test_html_report_is_written(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    result = CliRunner().invoke(
        main, ["simulate", str(EXAMPLES / "queues-by-weight.yaml"), "--html", str(target)]
    )
    assert result.exit_code == 0, result.output
    html = target.read_text()
    assert "<svg" in html and "research" in html and "production" in html


NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi}}
"""


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", "Gadget"),
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
            "metadata: {name: pg}\nspec: {minMembr: 2}\n",
            "spec.minMembr",
        ),
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"
            "metadata: {name: q}\nspec: {capability: {cpu: lots}}\n",
            "spec.capability.cpu",
        ),
        (NODE, "duplicate Node 'n1'"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
            "    sim.stromboli.dev/runtime: soon\nspec: {containers: []}\n",
            "sim.stromboli.dev/runtime",
        ),
    ],
)
def test_bad_input_names_file_document_and_field(
    tmp_path: Path, document: str, expected: str
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(NODE + "---\n" + document)
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert result.exit_code != 0
    assert f"{path} document 2" in result.output
    assert expected in result.output

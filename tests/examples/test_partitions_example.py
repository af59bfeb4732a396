"""examples/partitions.yaml through `stromboli simulate`: each vcjob partition lands whole in
one rack, the partitioned job in one spine with its HyperNode recorded, and a partition with
no rack left waits whole."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.api import constants as k
from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RACK = {f"node-{i}": f"rack-{i // 2}" for i in range(8)}
SPINE = {f"node-{i}": "spine-a" if i < 4 else "spine-b" for i in range(8)}


def final_state() -> list[dict]:
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(EXAMPLES / "partitions.yaml"),
            "--scheduler-conf",
            str(EXAMPLES / "hypernodes-conf.yaml"),
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)["items"]


def test_partitions_are_whole_in_one_rack_and_the_last_one_waits() -> None:
    items = final_state()
    partitions: dict[tuple[str, str], list[str]] = {}
    for obj in items:
        if obj["kind"] == "Pod":
            job = obj["metadata"]["name"].split("-worker-")[0]
            part = obj["metadata"]["labels"][k.PARTITION_ID_KEY]
            partitions.setdefault((job, part), []).append(obj["spec"].get("nodeName") or "")
    llm = [partitions[("llm", p)] for p in ("0", "1")]
    assert all(len({RACK[n] for n in nodes}) == 1 for nodes in llm)
    assert len({SPINE[n] for nodes in llm for n in nodes}) == 1
    for p in ("0", "1"):
        nodes = partitions[("elastic", p)]
        assert all(nodes) and len({RACK[n] for n in nodes}) == 1
    assert partitions[("elastic", "2")] == ["", ""]  # no rack left: waits whole
    groups = {o["metadata"]["name"].split("-")[0]: o for o in items if o["kind"] == "PodGroup"}
    llm_spine = SPINE[llm[0][0]]
    notes = groups["llm"]["metadata"]["annotations"]
    assert notes[k.JOB_ALLOCATED_HYPERNODE_KEY] == llm_spine
    assert groups["elastic"]["status"]["phase"] == "Running"

"""examples/hypernodes.yaml through `stromboli simulate`: hard jobs stay inside one HyperNode
of their allowed tier (or wait), a soft one prefers a single rack."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCENARIO = EXAMPLES / "hypernodes.yaml"
CONF = EXAMPLES / "hypernodes-conf.yaml"
RACKS = {f"node-{i}": f"rack-{i // 2}" for i in range(8)}
SPINES = {f"node-{i}": "spine-a" if i < 4 else "spine-b" for i in range(8)}


def placements() -> dict[str, list[str]]:
    result = CliRunner().invoke(
        main, ["simulate", str(SCENARIO), "--scheduler-conf", str(CONF), "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    state = orjson.loads(result.stdout)
    jobs: dict[str, list[str]] = {}
    for obj in state["items"]:
        if obj["kind"] == "Pod":
            job = obj["metadata"]["name"].rsplit("-worker-", 1)[0]
            jobs.setdefault(job, []).append(obj["spec"].get("nodeName") or "")
    return jobs


def test_every_job_lands_as_its_network_topology_says() -> None:
    jobs = placements()
    assert len({RACKS[n] for n in jobs["allreduce"]}) == 1  # hard, tier 1
    trainer = jobs["trainer"]
    assert all(trainer) and len({RACKS[n] for n in trainer}) > 1  # no rack holds it...
    assert len({SPINES[n] for n in trainer}) == 1  # ...one spine does
    assert jobs["too-wide"] == ["", "", ""]  # hard tier 1, three nodes: waits
    assert all(jobs["chatty"]) and len({RACKS[n] for n in jobs["chatty"]}) == 1  # soft

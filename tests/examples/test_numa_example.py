"""examples/numa.yaml through `stromboli simulate`: single-numa-node pods on the node whose
topology manager runs that policy, each within one NUMA node; a best-effort pod spread over
both NUMA nodes of the other node; a pod that would have to span waits, saying why."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.api import constants as k
from stromboli.core.cli import main
from stromboli.core.scheduler.plugins.numa_aware import NO_FIT
from stromboli.core.scheduler.util.cpuset import parse_cpuset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def pods() -> dict[str, dict]:
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(EXAMPLES / "numa.yaml"),
            "--scheduler-conf",
            str(EXAMPLES / "numa-conf.yaml"),
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    items = orjson.loads(result.stdout)["items"]
    return {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}


def cpus(obj: dict) -> frozenset[int]:
    return parse_cpuset(json.loads(obj["metadata"]["annotations"][k.TOPOLOGY_DECISION_KEY])["cpu"])


def numa_of(cpu: int) -> int:
    return cpu // 8


def test_each_pod_gets_cpus_as_its_policy_says() -> None:
    found = pods()
    latency = [found["latency-worker-0"], found["latency-worker-1"]]
    assert {p["spec"]["nodeName"] for p in latency} == {"numa-node-a"}
    held = [cpus(p) for p in latency]
    assert all(len(h) == 6 and len({numa_of(c) for c in h}) == 1 for h in held)
    assert not held[0] & held[1]

    batch = found["batch-worker-0"]
    assert batch["spec"]["nodeName"] == "numa-node-b"
    assert len(cpus(batch)) == 10 and {numa_of(c) for c in cpus(batch)} == {0, 1}

    waiting = found["too-big"]
    assert not waiting["spec"].get("nodeName")
    assert k.TOPOLOGY_DECISION_KEY not in (waiting["metadata"].get("annotations") or {})
    condition = next(c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled")
    assert NO_FIT in condition["message"]

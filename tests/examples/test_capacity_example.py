"""examples/capacity-queues.yaml with examples/capacity-conf.yaml through `stromboli simulate`."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.scheduler.conf import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUEUES = EXAMPLES / "capacity-queues.yaml"
CONF = EXAMPLES / "capacity-conf.yaml"


def simulate() -> dict:
    result = CliRunner().invoke(
        main, ["simulate", str(QUEUES), "--scheduler-conf", str(CONF), "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def by_kind(state: dict, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == kind}


def test_the_configuration_uses_capacity_instead_of_proportion() -> None:
    names = load_config(CONF).plugin_names()
    assert "capacity" in names
    assert "proportion" not in names


def test_capability_and_guarantee_hold() -> None:
    state = simulate()
    pods = by_kind(state, "Pod")
    bound: dict[str, int] = {}
    for name, obj in pods.items():
        if obj["spec"].get("nodeName"):
            job = name.rsplit("-", 1)[0]
            bound[job] = bound.get(job, 0) + 1
    # research stops at its capability (12 of 16), sandbox at 2 of 4; production's gang
    # finds its guaranteed 6 cpu free when it arrives.
    assert bound == {"research-sweep": 12, "sandbox-notebook": 2, "production-train": 6}
    starts = {pods[f"production-train-{i}"]["status"]["startTime"] for i in range(6)}
    assert starts == {"1970-01-01T00:00:30Z"}
    queues = by_kind(state, "Queue")
    assert queues["research"]["status"]["allocated"]["cpu"] == "12"
    assert queues["sandbox"]["status"]["allocated"]["cpu"] == "2"
    assert queues["production"]["status"]["allocated"]["cpu"] == "6"


def test_waiting_pods_say_their_queue_is_full() -> None:
    pods = by_kind(simulate(), "Pod")
    waiting = [p for p in pods.values() if not p["spec"].get("nodeName")]
    assert len(waiting) == 6
    for obj in waiting:
        condition = next(c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled")
        queue = "research" if obj["metadata"]["name"].startswith("research") else "sandbox"
        # Volcano's gang sentence (the running job is ready), then Stromboli's detail.
        message = condition["message"]
        assert message.startswith("pod group is ready, 1 minAvailable, "), message
        assert message.endswith(f"; queue {queue} has not enough resources left for the task")

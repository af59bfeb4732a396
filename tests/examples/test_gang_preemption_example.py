"""examples/gang-preemption.yaml with examples/gang-preemption-conf.yaml through
`stromboli simulate`: an urgent gang preempts lower-priority gangs, none left broken."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.scheduler.conf import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCENARIO = EXAMPLES / "gang-preemption.yaml"
CONF = EXAMPLES / "gang-preemption-conf.yaml"


def simulate() -> dict:
    result = CliRunner().invoke(
        main, ["simulate", str(SCENARIO), "--scheduler-conf", str(CONF), "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def by_kind(state: dict, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == kind}


def test_the_configuration_runs_the_gang_actions() -> None:
    config = load_config(CONF)
    assert config.actions == ["enqueue", "allocate", "gangpreempt", "gangreclaim", "backfill"]
    assert config.action_args("gangpreempt").get_bool("allowWholeBundle", False) is True


def test_only_the_surplus_of_each_victim_gang_is_evicted() -> None:
    state = simulate()
    evictions = [
        o
        for o in state["items"]
        if o["kind"] == "Event" and o["reason"] == "Evict" and o["involvedObject"]["kind"] == "Pod"
    ]
    assert sorted(e["involvedObject"]["name"] for e in evictions) == [
        "etl-2",
        "etl-3",
        "sim-2",
        "sim-3",
    ]
    assert {e["message"] for e in evictions} == {"Pod is evicted, because of gangpreempt"}

    pods = by_kind(state, "Pod")
    groups = by_kind(state, "PodGroup")
    for victim in ("etl", "sim"):
        kept = [p for name, p in pods.items() if name.startswith(f"{victim}-")]
        # Each victim gang keeps its minMember running from the start to the end.
        assert len(kept) == groups[victim]["spec"]["minMember"] == 2
        for member in kept:
            assert member["status"]["startTime"] == "1970-01-01T00:00:00Z"
            assert member["status"]["phase"] == "Succeeded"
        assert groups[victim]["status"]["phase"] == "Completed"


def test_the_urgent_gang_starts_whole_a_cycle_later() -> None:
    pods = by_kind(simulate(), "Pod")
    urgent = [pods[f"urgent-train-{i}"] for i in range(4)]
    assert {p["status"]["startTime"] for p in urgent} == {"1970-01-01T00:00:31Z"}
    assert {p["status"]["phase"] for p in urgent} == {"Succeeded"}
    assert {p["spec"]["nodeName"] for p in urgent} == {"node-0", "node-1"}

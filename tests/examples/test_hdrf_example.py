"""examples/hdrf.yaml with examples/hdrf-conf.yaml through `stromboli simulate`."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.scheduler.conf import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCENARIO = EXAMPLES / "hdrf.yaml"
CONF = EXAMPLES / "hdrf-conf.yaml"


def simulate(*conf: str) -> dict:
    result = CliRunner().invoke(main, ["simulate", str(SCENARIO), *conf, "--output", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def bound_per_job(state: dict) -> dict[str, int]:
    bound: dict[str, int] = {}
    for obj in state["items"]:
        if obj["kind"] == "Pod" and obj["spec"].get("nodeName"):
            job = obj["metadata"]["name"].rsplit("-", 1)[0]
            bound[job] = bound.get(job, 0) + 1
    return bound


def test_the_configuration_uses_hierarchical_drf_without_proportion() -> None:
    config = load_config(CONF)
    drf = [o for tier in config.tiers for o in tier if o.name == "drf"]
    assert len(drf) == 1 and drf[0].hierarchy
    assert "proportion" not in config.plugin_names()


def test_departments_share_by_weight_and_teams_within_them() -> None:
    bound = bound_per_job(simulate("--scheduler-conf", str(CONF)))
    # eng (weight 3) gets 12 of 16 cpu, split evenly between its two demanding teams;
    # research gets 4: the served notebook keeps its one cpu and nlp takes the rest.
    assert bound == {"dev-train": 6, "prod-serve": 6, "nlp-sweep": 3, "vision-notebook": 1}
    eng = bound["dev-train"] + bound["prod-serve"]
    research = bound["nlp-sweep"] + bound["vision-notebook"]
    assert eng == 3 * research


def test_queues_hold_what_their_pods_do() -> None:
    state = simulate("--scheduler-conf", str(CONF))
    queues = {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "Queue"}
    assert queues["eng-dev"]["status"]["allocated"]["cpu"] == "6"
    assert queues["research-nlp"]["status"]["allocated"]["cpu"] == "3"
    assert queues["research-vision"]["status"]["allocated"]["cpu"] == "1"


def test_default_configuration_ignores_the_hierarchy() -> None:
    # Volcano's default configuration (proportion, drf without enableHierarchy) splits the
    # cluster by spec.weight, 1 for every queue: the notebook's unused share goes evenly to the
    # other three queues and the departments play no part.
    bound = bound_per_job(simulate())
    assert bound == {"dev-train": 5, "prod-serve": 5, "nlp-sweep": 5, "vision-notebook": 1}


def test_report_shows_the_shares_held_and_no_deserved_share() -> None:
    # hdrf computes no deserved amount: the report gives what each queue holds and "–".
    result = CliRunner().invoke(
        main,
        ["simulate", str(SCENARIO), "--scheduler-conf", str(CONF), "--no-progress"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    rows = {
        line.split()[0]: line.split()
        for line in result.output.splitlines()
        if line.strip().startswith(("eng-", "research-"))
    }
    # 16 cpu: dev and prod hold 6 each (38%), nlp 3 (19%), vision 1 (6%).
    assert rows["eng-dev"][-6:] == ["38%", "/", "–", "38%", "/", "–"]
    assert rows["research-nlp"][-6:] == ["19%", "/", "–", "19%", "/", "–"]
    assert rows["research-vision"][-6:] == ["6%", "/", "–", "6%", "/", "–"]

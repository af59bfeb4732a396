"""examples/starvation.yaml through `stromboli simulate`: Volcano's default configuration
starves the 64-pod gang; examples/starvation-conf.yaml (with reservation) starts it."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.clock import parse_time
from stromboli.core.scheduler.conf import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCENARIO = EXAMPLES / "starvation.yaml"
CONF = EXAMPLES / "starvation-conf.yaml"


def simulate(*extra: str) -> dict[str, dict]:
    args = ["simulate", str(SCENARIO), "--max-time", "30m", "--output", "json", *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    state = orjson.loads(result.stdout)
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "Pod"}


def gang_pods(pods: dict[str, dict]) -> list[dict]:
    found = [pods[f"big-gang-{i}"] for i in range(64) if f"big-gang-{i}" in pods]
    assert len(found) == 64
    return found


def test_the_configuration_is_the_default_plus_reservation() -> None:
    names = load_config(CONF).plugin_names()
    default = load_config(None).plugin_names()
    assert set(names) == set(default) | {"reservation"}
    assert "reservation" not in default


def test_without_the_guard_the_gang_waits_forever() -> None:
    pods = simulate()
    gang = gang_pods(pods)
    assert not any(p["spec"].get("nodeName") for p in gang)
    # The stream of small jobs kept running all along.
    assert pods["small-170"]["spec"].get("nodeName")


def test_with_reservation_the_gang_starts_within_bounded_time() -> None:
    pods = simulate("--scheduler-conf", str(CONF))
    gang = gang_pods(pods)
    starts = {p["status"].get("startTime") for p in gang}
    assert None not in starts
    assert len(starts) == 1  # the gang starts whole
    start = parse_time(starts.pop()).timestamp()
    # Arrives at 5s, starves after 2m, the small jobs already running finish within 60s.
    assert 125 <= start <= 5 + 120 + 60 + 30
    # Small jobs resume after the gang.
    assert pods["small-170"]["spec"].get("nodeName")

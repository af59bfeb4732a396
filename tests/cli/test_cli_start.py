"""The ``stromboli`` command starts without loading what it does not need: ``--version``,
``--help`` and each sub-command's ``--help`` import none of the heavy libraries or of the
scheduler's, API models' or cluster's code (what makes a start slow). Timings are in
``benchmarks/cli_start_bench.py``; this checks the behaviour that makes them."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from stromboli.core.cli import COMMANDS, main

#: Libraries that cost tens to hundreds of milliseconds to import.
HEAVY_LIBRARIES = (
    "aiohttp",
    "cerberus",
    "croniter",
    "cryptography",
    "kfp",
    "kopf",
    "kubernetes",
    "numpy",
    "prometheus_client",
    "pydantic",
    "rich",
)
#: Stromboli's own packages that pull those in (models, scheduler, controller, simulator).
HEAVY_OWN = (
    "stromboli.core.api.models",
    "stromboli.core.api.crds",
    "stromboli.core.admission",
    "stromboli.core.controller",
    "stromboli.core.devcluster",
    "stromboli.core.scheduler",
    "stromboli.core.simulate",
    "stromboli.webhooks",
    "stromboli.core.cluster.kube",
)

PROBE = """
import json, sys
from stromboli.core.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``stromboli ARGV``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in HEAVY_LIBRARIES
        or any(m == own or m.startswith(own + ".") for own in HEAVY_OWN)
    )


@pytest.mark.parametrize("argv", [("--version",), ("--help",)])
def test_version_and_help_import_no_command(argv: tuple[str, ...]) -> None:
    modules = imported_by(*argv)
    assert heavy(modules) == []
    assert not [
        m for m in modules if m.startswith("stromboli.core.cli.") and m != "stromboli.core.cli"
    ]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_commands_help_imports_nothing_heavy(command: str) -> None:
    modules = imported_by(command, "--help")
    assert heavy(modules) == []
    module = COMMANDS[command][0]
    assert f"stromboli.core.cli.{module}" in modules  # the command itself did load


def test_running_a_command_loads_it() -> None:
    """The probe can see heavy imports: running a command does bring in its machinery."""
    modules = imported_by("crds")
    assert "stromboli.core.api.crds" in modules
    assert "pydantic" in modules


def test_the_command_table_matches_the_commands() -> None:
    ctx = click.Context(main)
    for name, (_, _, text) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(1000) == click.Command(
            name, help=text
        ).get_short_help_str(1000), (
            f"update COMMANDS[{name!r}] in core/cli/__init__.py to the command's docstring"
        )


def test_help_lists_every_command_in_table_order() -> None:
    result = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    listed = [
        line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()
    ]
    assert listed == list(COMMANDS)


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["shedule"])
    assert result.exit_code == 2
    assert "No such command 'shedule'" in result.output


def test_defaults_repeated_for_a_fast_help_equal_the_real_ones() -> None:
    from stromboli.core.admission.queue import DEFAULT_MAX_QUEUE_DEPTH
    from stromboli.core.cli import controller, devcluster, simulate, webhook
    from stromboli.core.controller.server import DRIVERS
    from stromboli.core.devcluster.daemon import STATE_DIR_ENV
    from stromboli.core.simulate import engine
    from stromboli.webhooks.services import DEFAULT_ENABLED_ADMISSION

    assert controller.DRIVERS == DRIVERS
    assert devcluster.STATE_DIR_ENV == STATE_DIR_ENV
    assert simulate.DEFAULT_MAX_CRON_RUNS == engine.DEFAULT_MAX_CRON_RUNS
    assert simulate.DEFAULT_MAX_WORKLOAD_PODS == engine.DEFAULT_MAX_WORKLOAD_PODS
    assert webhook.DEFAULT_ENABLED_ADMISSION == DEFAULT_ENABLED_ADMISSION
    assert webhook.DEFAULT_MAX_QUEUE_DEPTH == DEFAULT_MAX_QUEUE_DEPTH


def test_a_vcctl_command_reaches_the_cluster_without_the_api_models() -> None:
    """``job list`` builds its Kubernetes store from the kinds table alone: no pydantic, no
    models, no scheduler, before its first request (refused here: nothing listens)."""
    modules = imported_by("job", "list", "-s", "https://127.0.0.1:9")
    assert "stromboli.core.cluster.kube" in modules
    assert not [m for m in modules if m.split(".")[0] == "pydantic"]
    assert not [
        m
        for m in modules
        if m.startswith(("stromboli.core.api.models", "stromboli.core.scheduler"))
    ]

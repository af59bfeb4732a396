"""The report counts vcjobs whose PodGroup the controller removed when they finished."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_finished_vcjob_is_reported_with_its_times() -> None:
    result = CliRunner().invoke(
        main, ["simulate", str(EXAMPLES / "vcjob-complete.yaml")], terminal_width=120
    )
    assert result.exit_code == 0, result.output
    line = next(row for row in result.output.splitlines() if "default/train" in row)
    assert "Completed" in line and "1m30s" in line
    assert "No jobs" not in result.output


def test_failed_vcjob_is_reported_failed() -> None:
    result = CliRunner().invoke(
        main, ["simulate", str(EXAMPLES / "vcjob-retry.yaml")], terminal_width=120
    )
    assert result.exit_code == 0, result.output
    line = next(row for row in result.output.splitlines() if "default/flaky" in row)
    assert "Failed" in line

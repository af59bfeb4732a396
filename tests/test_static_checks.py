"""The checks that keep the code's shape: ruff, the import layers (import-linter contracts in
pyproject.toml) and the type checker (mypy, configured there too), run as the README's test
command runs everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_import_layers_hold() -> None:
    result = run("lint-imports", "--no-cache")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_types_check() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_ruff_is_clean() -> None:
    check = run("ruff", "check", ".")
    assert check.returncode == 0, check.stdout[-4000:]
    formatted = run("ruff", "format", "--check", ".")
    assert formatted.returncode == 0, formatted.stdout[-4000:]

"""The sdist and wheel, built once per session from the working tree, as a release would be
(``python -m build``: the sdist first, then the wheel from the unpacked sdist)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (sdist,) = out.glob("stromboli-*.tar.gz")
    (wheel,) = out.glob("stromboli-*.whl")
    return Dists(sdist, wheel)

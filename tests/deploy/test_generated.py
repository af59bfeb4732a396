"""The committed CRDs under deploy/ are what the models generate now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from stromboli.core.api.crds import build_crds, crd_filename

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CRD_DIRS = (DEPLOY / "crds", DEPLOY / "helm" / "stromboli" / "crds")


def test_committed_crds_match_build_crds() -> None:
    expected = {crd_filename(crd): crd for crd in build_crds()}
    for folder in CRD_DIRS:
        committed = {p.name: yaml.safe_load(p.read_text()) for p in folder.glob("*.yaml")}
        assert sorted(committed) == sorted(expected), f"{folder}: run python deploy/generate.py"
        for name, crd in expected.items():
            assert committed[name] == crd, f"{folder / name} is stale: regenerate it"


def test_generate_check_passes() -> None:
    """The script's own --check agrees (byte for byte, headers included)."""
    result = subprocess.run(
        [sys.executable, str(DEPLOY / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_crds_cover_every_volcano_kind_we_serve() -> None:
    names = {crd["metadata"]["name"] for crd in build_crds()}
    for name in (
        "queues.scheduling.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "jobs.batch.volcano.sh",
        "commands.bus.volcano.sh",
        "hypernodes.topology.volcano.sh",
    ):
        assert name in names

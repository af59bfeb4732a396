"""deploy/Dockerfile, checked without a Docker daemon (none runs here or in CI): what it copies
exists and is what the package build needs, it installs the project, runs as the unprivileged
uid the manifests require, and its entrypoint is the `stromboli` console script."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_base_image_and_install() -> None:
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    runs = " ".join(args for word, args in steps if word == "RUN")
    assert "pip install ." in runs


def test_copies_everything_the_package_build_reads() -> None:
    copied = set()
    for word, args in instructions():
        if word == "COPY":
            *sources, _dest = args.split()
            copied.update(sources)
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["readme"] in copied
    assert {"pyproject.toml", "setup.py"} <= copied
    setup = (ROOT / "setup.py").read_text()
    folders = re.search(r"FOLDERS = \(([^)]*)\)", setup)
    assert folders, "setup.py no longer lists its FOLDERS"
    for folder in re.findall(r'"([^"]+)"', folders.group(1)):
        assert folder in copied, f"setup.py packages {folder}/ but the Dockerfile does not copy it"
    assert "src" in copied, "setup.py builds the package from src/ (links to the folders)"


def test_dockerignore_lets_the_copied_files_through() -> None:
    ignore = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for word, args in instructions():
        if word == "COPY":
            *sources, _dest = args.split()
            assert set(sources) <= allowed


def test_runs_as_the_uid_the_manifests_require() -> None:
    users = [args for word, args in instructions() if word == "USER"]
    assert users, "the image must not run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "runAsNonRoot needs a numeric, non-zero USER"
    for name in ("scheduler.yaml", "controller.yaml"):
        for obj in yaml.safe_load_all((ROOT / "deploy" / name).read_text()):
            if obj["kind"] == "Deployment":
                context = obj["spec"]["template"]["spec"]["securityContext"]
                assert context["runAsNonRoot"] is True
                assert context["runAsUser"] == int(uid)


def test_entrypoint_is_the_console_script() -> None:
    entrypoints = [args for word, args in instructions() if word == "ENTRYPOINT"]
    assert json.loads(entrypoints[-1]) == ["stromboli"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["stromboli"] == "stromboli.core.cli:main"
    for name in ("scheduler.yaml", "controller.yaml"):
        for obj in yaml.safe_load_all((ROOT / "deploy" / name).read_text()):
            if obj["kind"] == "Deployment":
                main = obj["spec"]["template"]["spec"]["containers"][0]
                assert "command" not in main, "the image's entrypoint runs `stromboli`"
                assert main["args"][0] in ("scheduler", "controller")

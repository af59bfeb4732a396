"""The distributions a user installs: every module and the package data a non-editable install
needs (the control plane's pins and build script, the examples), none of the repository's
tests, benchmarks or trace data, and metadata that ``twine check`` accepts."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser

from stromboli.core.cli.examples import FOLDERS
from tests.deploy.conftest import ROOT, Dists

CODE_FOLDERS = ("core", "integrations", "webhooks")
HACK_FILES = ("go.mod", "go.sum", "tools.go", "build-control-plane.sh")
FORBIDDEN = re.compile(r"(^|/)(tests|benchmarks|traces|__pycache__)/|\.(pyc|csv|parquet)$")


def wheel_names(dists: Dists) -> set[str]:
    with zipfile.ZipFile(dists.wheel) as wheel:
        return set(wheel.namelist())


def sdist_names(dists: Dists) -> set[str]:
    with tarfile.open(dists.sdist) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        return {n.removeprefix(f"{top}/") for n in sdist.getnames() if n != top}


def checkout_modules() -> set[str]:
    """Every module of the code folders, as the wheel would name it."""
    found = set()
    for folder in CODE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.add(f"stromboli/{path.relative_to(ROOT).as_posix()}")
    return found


def test_wheel_has_every_module_of_the_code_folders(dists: Dists) -> None:
    missing = checkout_modules() - wheel_names(dists)
    assert not missing, f"not in the wheel (a folder without __init__.py?): {sorted(missing)}"
    assert {"stromboli/__init__.py", "stromboli/py.typed"} <= wheel_names(dists)


def test_wheel_carries_the_control_plane_build_inputs_unchanged(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        for name in HACK_FILES:
            # Byte for byte: the cache directory's name hashes go.mod and go.sum, so an
            # installed copy reuses binaries a checkout built.
            assert wheel.read(f"stromboli/hack/{name}") == (ROOT / "hack" / name).read_bytes()
    hack = {n for n in wheel_names(dists) if n.startswith("stromboli/hack/")}
    assert hack == {f"stromboli/hack/{n}" for n in HACK_FILES}


def test_wheel_carries_every_example(dists: Dists) -> None:
    names = wheel_names(dists)
    for sub in FOLDERS:  # the folders --example lists
        for path in (ROOT / "examples" / sub).glob("*.yaml"):
            assert f"stromboli/{path.relative_to(ROOT).as_posix()}" in names
    assert "stromboli/examples/gpu/mig.yaml" in names
    assert "stromboli/examples/frameworks/pytorchjob.yaml" in names
    assert "stromboli/examples/pipelines/gang_training.py" not in names


def test_no_tests_benchmarks_or_data_in_either(dists: Dists) -> None:
    for names in (wheel_names(dists), sdist_names(dists)):
        leaked = sorted(n for n in names if FORBIDDEN.search(n))
        assert not leaked, leaked


def test_sdist_builds_the_same_package(dists: Dists) -> None:
    names = sdist_names(dists)
    assert {"pyproject.toml", "setup.py", "README.md", "PKG-INFO"} <= names
    in_sdist = {n.removeprefix("src/") for n in names if n.startswith("src/stromboli/")}
    in_wheel = {n for n in wheel_names(dists) if not n.startswith("stromboli-")}
    # The wheel was built from this sdist; the links under src/stromboli are folders there.
    assert in_wheel <= in_sdist
    assert not any(n.startswith(("core/", "hack/", "examples/")) for n in names)


def test_metadata(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        (meta_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(wheel.read(meta_name).decode())
        entry_points = wheel.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Name"] == "stromboli"
    assert meta["Requires-Python"] == ">=3.11"
    requires = meta.get_all("Requires-Dist") or []
    assert "kubernetes==30.1.0" in requires
    assert not any("pytest" in r and "extra" not in r for r in requires)
    assert "stromboli = stromboli.core.cli:main" in entry_points


def test_twine_check_accepts_both(dists: Dists) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dists.sdist), str(dists.wheel)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2


def test_package_data_links_point_at_the_checkout_folders() -> None:
    # An editable install reads the same files through these links that a wheel copies.
    for link in ("hack", "examples"):
        target = ROOT / "src" / "stromboli" / link
        assert target.is_symlink() and target.resolve() == (ROOT / link).resolve()

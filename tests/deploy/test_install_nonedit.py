"""``pip install stromboli`` as a user does it: the built wheel into a fresh virtual environment
(not editable, dependencies from the package index), then the commands run from outside the
checkout: ``simulate --example`` on the packaged examples and ``dev-cluster up``/``down``
with the build script and pins that the wheel carries.

The dev cluster uses the cached control plane (built here from the checkout first if needed,
as the ``control_plane`` fixture does): the installed copy must find the same cache directory,
so its commands run with no Go toolchain on ``PATH`` and would fail if they tried to build.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stromboli.core.devcluster import build_control_plane
from stromboli.core.devcluster.daemon import Paths, client_from_kubeconfig, read_state
from tests.controlplane.test_devcluster_cli import kill_leftovers, recorded_processes, wait_dead
from tests.deploy.conftest import ROOT, Dists

PIP_TIMEOUT = 1200
"""Resolving some 80 dependencies against the index takes minutes even from pip's cache."""


@dataclass(frozen=True)
class Installed:
    venv: Path
    cwd: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self) -> dict[str, str]:
        """What a user's shell gives: this venv's bin and the system's, no Go, no checkout."""
        env = {
            "HOME": os.environ["HOME"],
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        }
        if "STROMBOLI_CACHE" in os.environ:
            env["STROMBOLI_CACHE"] = os.environ["STROMBOLI_CACHE"]
        return env

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            cwd=self.cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("user")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # pip needs the index settings of this machine (proxy, index URL), nothing of our venv.
    pip_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    result = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", str(dists.wheel)],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT,
        env=pip_env,
        cwd=root,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    work = root / "work"
    work.mkdir()
    return Installed(venv, work)


def test_the_installed_package_is_a_copy_not_the_checkout(installed: Installed) -> None:
    result = installed.run(
        "python",
        "-c",
        "import stromboli, pathlib; print(pathlib.Path(stromboli.__file__).resolve())",
    )
    assert result.returncode == 0, result.stderr
    where = Path(result.stdout.strip())
    assert where.is_relative_to(installed.venv)
    assert not where.is_relative_to(ROOT)


def test_simulate_a_packaged_example(installed: Installed) -> None:
    result = installed.run("stromboli", "simulate", "--example", "gang-waits", "--no-progress")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 pods bound" in result.stdout
    assert "default/big-gang" in result.stdout and "Completed" in result.stdout


def test_the_example_listing_points_into_the_installed_package(installed: Installed) -> None:
    result = installed.run("stromboli", "simulate", "--example", "list")
    assert result.returncode == 0, result.stderr
    conf = next(line for line in result.stdout.splitlines() if "--example preemption " in line)
    conf_path = Path(conf.split("--scheduler-conf ")[1].split()[0])
    assert conf_path.is_relative_to(installed.venv) and conf_path.is_file()
    ran = installed.run(
        "stromboli", "simulate", "--example", "preemption", "--scheduler-conf", str(conf_path)
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.fixture
def dev_cluster_dir(installed: Installed) -> Iterator[Path]:
    build_control_plane()  # the shared cache, as the control_plane fixture fills it
    state_dir = installed.cwd / "dev-cluster"
    try:
        yield state_dir
    finally:
        state = read_state(Paths(state_dir))
        installed.run("stromboli", "dev-cluster", "down", f"--state-dir={state_dir}")
        kill_leftovers(recorded_processes(state))


def test_dev_cluster_up_and_down_from_the_wheel(
    installed: Installed, dev_cluster_dir: Path
) -> None:
    script = installed.run(
        "python",
        "-c",
        "from stromboli.core.devcluster.build import build_script; print(build_script())",
    )
    assert Path(script.stdout.strip()).is_relative_to(installed.venv), script.stderr

    up = installed.run(
        "stromboli", "dev-cluster", "up", "--nodes=2", f"--state-dir={dev_cluster_dir}", timeout=600
    )
    assert up.returncode == 0, f"up failed:\n{up.stderr}\n{up.stdout}"
    kubeconfig = Path(up.stdout.splitlines()[-1])
    state = read_state(Paths(dev_cluster_dir))
    assert state is not None and state["phase"] == "running"

    client = client_from_kubeconfig(kubeconfig, installed.cwd)
    try:
        assert len(client.get("/api/v1/nodes")["items"]) == 2
    finally:
        client.close()
    # The installed CLI talks to it through the same kubeconfig.
    listed = installed.run("stromboli", "queue", "list", f"--kubeconfig={kubeconfig}")
    assert listed.returncode == 0, listed.stdout + listed.stderr

    down = installed.run("stromboli", "dev-cluster", "down", f"--state-dir={dev_cluster_dir}")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "dev cluster stopped" in down.stdout + down.stderr
    pids = [pid for pid, _ in recorded_processes(state)]
    assert wait_dead(pids) == []
    assert not kubeconfig.exists()  # ours and unchanged, so down removed it

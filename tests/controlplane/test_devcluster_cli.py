"""``stromboli dev-cluster up|down|status`` for real: the command runs in a subprocess, the
daemon it leaves behind owns real etcd/kube-apiserver/kwok processes, and ``down`` must leave
none of them. Every test directory is torn down (and, as a backstop, every recorded process
killed) even when a test fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.devcluster.daemon import (
    Paths,
    client_from_kubeconfig,
    pid_alive,
    pid_runs,
    read_state,
)

CLI = [sys.executable, "-c", "from stromboli.core.cli import main; main()", "dev-cluster"]
NODES = 2


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``stromboli dev-cluster ARGS`` in a fresh interpreter, as a user would."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def recorded_processes(state: dict | None) -> list[tuple[int, str | None]]:
    """(pid, executable) of the daemon and every component a state file names."""
    if not state:
        return []
    procs: list[tuple[int, str | None]] = [(state["pid"], None)]
    for comp in (state.get("components") or {}).values():
        procs.append((comp["pid"], comp["argv0"]))
    return procs


def is_daemon(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return pid_alive(pid) and b"stromboli.core.devcluster.daemon" in cmdline


def kill_leftovers(procs: list[tuple[int, str | None]]) -> None:
    """Kill what a failed test left, checking each pid still runs what it ran then."""
    for pid, exe in procs:
        if pid_runs(pid, exe) if exe else is_daemon(pid):
            os.kill(pid, signal.SIGKILL)


def wait_dead(pids: list[int], timeout: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if pid_alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


class DevCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = Paths(root)
        self.seen: list[tuple[int, str | None]] = []

    def state(self) -> dict | None:
        state = read_state(self.paths)
        self.seen.extend(recorded_processes(state))
        return state

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = cli(*args, f"--state-dir={self.root}")
        self.state()  # remember whatever it started, for the teardown backstop
        return result


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[DevCluster]:
    cluster = DevCluster(tmp_path / "dev-cluster")
    try:
        yield cluster
    finally:
        cluster.state()
        cli("down", f"--state-dir={cluster.root}", timeout=120)
        kill_leftovers(cluster.seen)


def test_up_status_second_up_and_down(dev_cluster: DevCluster, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "somewhere" / "admin.kubeconfig"
    up = dev_cluster.run("up", f"--nodes={NODES}", f"--kubeconfig={kubeconfig}")
    assert up.returncode == 0, f"up failed:\n{up.stderr}\n{up.stdout}"
    assert up.stdout.splitlines()[-1] == str(kubeconfig)
    assert "dev-cluster down" in up.stderr

    # The command has returned; the cluster lives on in the daemon it detached.
    state = dev_cluster.state()
    assert state and state["phase"] == "running"
    assert pid_alive(state["pid"])
    assert set(state["components"]) == {"etcd", "kube-apiserver", "kube-controller-manager", "kwok"}
    pids = [pid for pid, _ in recorded_processes(state)]

    client = client_from_kubeconfig(kubeconfig, tmp_path)
    try:
        nodes = client.get("/api/v1/nodes")["items"]
        assert len(nodes) == NODES
        crd = client.get(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/queues.scheduling.volcano.sh"
        )
        assert any(
            c["type"] == "Established" and c["status"] == "True"
            for c in crd["status"]["conditions"]
        )
        queue = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "try-me"},
            "spec": {"weight": 1},
        }
        client.post("/apis/scheduling.volcano.sh/v1beta1/queues", queue)
    finally:
        client.close()

    status = dev_cluster.run("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "status:     running" in status.stdout
    assert f"server:     {state['server']}" in status.stdout
    assert f"nodes:      {NODES} ({NODES} ready)" in status.stdout
    assert f"kubeconfig: {kubeconfig}" in status.stdout

    again = dev_cluster.run("up", "--nodes=5")
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stderr
    assert again.stdout.splitlines()[-1] == str(kubeconfig)
    assert dev_cluster.state()["pid"] == state["pid"]  # type: ignore[index]

    down = dev_cluster.run("down")
    assert down.returncode == 0, down.stderr
    assert "stopped" in down.stdout
    assert wait_dead(pids) == []
    assert not dev_cluster.paths.state.exists()
    assert not kubeconfig.exists(), "down removes the kubeconfig it wrote"

    after = dev_cluster.run("status")
    assert after.returncode != 0
    assert "not running" in after.stdout

    down_again = dev_cluster.run("down")
    assert down_again.returncode == 0
    assert "no dev cluster is running" in down_again.stdout


def test_a_killed_daemon_takes_its_components_along(dev_cluster: DevCluster) -> None:
    up = dev_cluster.run("up", "--nodes=1")
    assert up.returncode == 0, up.stderr
    assert up.stdout.splitlines()[-1] == str(dev_cluster.paths.default_kubeconfig.resolve())
    state = dev_cluster.state()
    assert state is not None
    components = [comp["pid"] for comp in state["components"].values()]

    os.kill(state["pid"], signal.SIGKILL)
    assert wait_dead([state["pid"], *components]) == [], "components outlived their daemon"

    status = dev_cluster.run("status")
    assert status.returncode != 0
    assert "stale state" in status.stdout

    # A new `up` starts from scratch (the dead daemon's etcd data is not reused) ...
    up = dev_cluster.run("up", "--nodes=1")
    assert up.returncode == 0, up.stderr
    fresh = dev_cluster.state()
    assert fresh and fresh["pid"] != state["pid"]
    # ... and `down` stops it.
    down = dev_cluster.run("down")
    assert down.returncode == 0, down.stderr
    assert wait_dead([pid for pid, _ in recorded_processes(fresh)]) == []


def test_status_and_down_without_a_cluster(tmp_path: Path) -> None:
    runner = CliRunner()
    root = tmp_path / "never-started"
    status = runner.invoke(main, ["dev-cluster", "status", f"--state-dir={root}"])
    assert status.exit_code == 1
    assert "not running" in status.output
    down = runner.invoke(main, ["dev-cluster", "down", f"--state-dir={root}"])
    assert down.exit_code == 0, down.output
    assert "no dev cluster is running" in down.output


def test_status_names_the_failure_a_daemon_recorded(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "failed")
    paths.root.mkdir()
    paths.state.write_text(
        json.dumps({"pid": 1, "phase": "failed", "error": "ControlPlaneError: etcd died\nlog..."})
    )
    result = CliRunner().invoke(main, ["dev-cluster", "status", f"--state-dir={paths.root}"])
    assert result.exit_code == 1
    assert "it failed (ControlPlaneError: etcd died;" in result.output
    down = CliRunner().invoke(main, ["dev-cluster", "down", f"--state-dir={paths.root}"])
    assert down.exit_code == 0, down.output
    assert not paths.state.exists()

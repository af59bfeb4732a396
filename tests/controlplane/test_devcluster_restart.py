"""The dev cluster survives its components dying: the daemon starts a SIGKILLed kube-apiserver
(or kwok, or kube-controller-manager) again in place, etcd and what it stores are kept, and
``status`` says ``restarting`` while that happens and ``running`` after. A component that keeps
dying fails the cluster instead of being restarted forever (the budget is tested in-process)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.devcluster import node_is_ready
from stromboli.core.devcluster.daemon import (
    RESTARTING,
    RUNNING,
    CrashLoopError,
    Paths,
    RestartBudget,
    client_from_kubeconfig,
    pid_alive,
    read_state,
    status,
)
from tests.controlplane.test_devcluster_cli import (  # noqa: F401 - dev_cluster is a fixture
    DevCluster,
    dev_cluster,
    recorded_processes,
    wait_dead,
)

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


def kill_and_watch(cluster: DevCluster, name: str, timeout: float = 180.0) -> dict[str, Any]:
    """SIGKILL component ``name``; follow state.json until the daemon reports it running
    again under a new pid. Asserts that ``restarting`` was reported (and that ``status``
    said so at that moment); returns the final state."""
    before = cluster.state()
    assert before and before["phase"] == RUNNING
    pid = before["components"][name]["pid"]
    os.killpg(pid, signal.SIGKILL)
    said: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        state = read_state(cluster.paths) or {}
        cluster.seen.extend(recorded_processes(state))
        if state.get("phase") == RESTARTING and not said:
            report = status(cluster.paths)
            said.append(report.message)
            assert not report.running
        if state.get("phase") == RUNNING and state["components"][name]["pid"] != pid:
            break
        assert state.get("phase") in (RUNNING, RESTARTING), state
        assert time.monotonic() < deadline, f"{name} not restarted; state {state}"
        time.sleep(0.05)
    assert said and said[0].startswith(f"restarting {name} "), said
    assert not pid_alive(pid)
    return state


def test_killed_apiserver_kwok_and_controller_manager_come_back_with_the_data(
    dev_cluster: DevCluster,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    up = dev_cluster.run("up", "--nodes=1")
    assert up.returncode == 0, f"up failed:\n{up.stderr}\n{up.stdout}"
    kubeconfig = Path(up.stdout.splitlines()[-1])
    first = dev_cluster.state()
    assert first is not None
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "made-before"},
        "spec": {"weight": 3},
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "made-before"},
        "data": {"k": "v"},
    }
    client = client_from_kubeconfig(kubeconfig, tmp_path)
    try:
        client.post(QUEUES, queue)
        client.post("/api/v1/namespaces/default/configmaps", config)
    finally:
        client.close()

    after_apiserver = kill_and_watch(dev_cluster, "kube-apiserver")
    assert after_apiserver["components"]["etcd"]["pid"] == first["components"]["etcd"]["pid"]
    assert after_apiserver["server"] == first["server"]
    assert after_apiserver["restarts"] == {"kube-apiserver": 1}
    assert pid_alive(first["pid"]), "the daemon itself was replaced"

    report = dev_cluster.run("status")
    assert report.returncode == 0, report.stdout + report.stderr
    assert "status:     running" in report.stdout
    assert "restarted:  kube-apiserver 1" in report.stdout

    after_kwok = kill_and_watch(dev_cluster, "kwok")
    assert after_kwok["restarts"] == {"kube-apiserver": 1, "kwok": 1}
    assert after_kwok["components"]["etcd"]["pid"] == first["components"]["etcd"]["pid"]

    client = client_from_kubeconfig(kubeconfig, tmp_path)
    try:
        # Same etcd, same data: what was made before both deaths is still stored.
        assert client.get(f"{QUEUES}/made-before")["spec"]["weight"] == 3
        assert client.get("/api/v1/namespaces/default/configmaps/made-before")["data"] == {"k": "v"}
        deadline = time.monotonic() + 60
        while not all(node_is_ready(n) for n in client.get("/api/v1/nodes")["items"]):
            assert time.monotonic() < deadline, "the node is not Ready under the new kwok"
            time.sleep(0.2)
    finally:
        client.close()

    after_kcm = kill_and_watch(dev_cluster, "kube-controller-manager")
    assert after_kcm["restarts"] == {"kube-apiserver": 1, "kwok": 1, "kube-controller-manager": 1}
    client = client_from_kubeconfig(kubeconfig, tmp_path)
    try:
        # The new controller manager collects garbage: a dependent goes with its owner.
        configmaps = "/api/v1/namespaces/default/configmaps"
        owner = client.post(configmaps, config | {"metadata": {"name": "owner"}})
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner"}
        ref["uid"] = owner["metadata"]["uid"]
        client.post(configmaps, config | {"metadata": {"name": "owned", "ownerReferences": [ref]}})
        client.delete(f"{configmaps}/owner")
        deadline = time.monotonic() + 60
        while "owned" in {c["metadata"]["name"] for c in client.get(configmaps)["items"]}:
            assert time.monotonic() < deadline, "owned not collected after its owner went"
            time.sleep(0.2)
    finally:
        client.close()

    report = dev_cluster.run("status")
    assert report.returncode == 0, report.stdout + report.stderr
    assert "nodes:      1 (1 ready)" in report.stdout
    assert "restarted:  kube-apiserver 1, kube-controller-manager 1, kwok 1" in report.stdout

    final = dev_cluster.state()
    down = dev_cluster.run("down")
    assert down.returncode == 0, down.stderr
    assert wait_dead([pid for pid, _ in recorded_processes(final)]) == []


# --- in-process ----------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_restart_budget_allows_the_limit_within_the_window_then_refuses() -> None:
    clock = FakeClock()
    budget = RestartBudget(limit=3, window=60, clock=clock)
    for _ in range(3):
        budget.spend("kube-apiserver")
        clock.now += 1
    with pytest.raises(CrashLoopError, match="kube-apiserver died 4 times within 60s"):
        budget.spend("kube-apiserver")
    budget.spend("kwok")  # each component has its own budget
    assert budget.total == {"kube-apiserver": 3, "kwok": 1}


def test_restart_budget_forgets_deaths_older_than_the_window() -> None:
    clock = FakeClock()
    budget = RestartBudget(limit=2, window=60, clock=clock)
    for _ in range(10):  # one death every 31s is two per window at most: never a crash loop
        budget.spend("kwok")
        clock.now += 31
    assert budget.total == {"kwok": 10}


def test_restart_budget_of_zero_refuses_the_first_restart() -> None:
    with pytest.raises(CrashLoopError):
        RestartBudget(limit=0, window=60, clock=FakeClock()).spend("etcd")


def write_running_daemon_state(paths: Paths, **fields: Any) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    state = {
        "pid": os.getpid(),
        "server": "https://127.0.0.1:1",
        "kubeconfig": str(paths.default_kubeconfig),
        "run_dir": str(paths.run_dir),
        "components": {},
        **fields,
    }
    paths.state.write_text(json.dumps(state))


def test_status_reports_a_restart_under_way(tmp_path: Path) -> None:
    """With a live daemon (this process holds the daemon lock) whose state says restarting,
    ``status`` says so, names the component and exits 1, without asking the API server."""
    import fcntl

    paths = Paths(tmp_path / "restarting")
    write_running_daemon_state(
        paths, phase=RESTARTING, restarting=["kube-apiserver"], restarts={"kwok": 2}
    )
    fd = os.open(paths.daemon_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = CliRunner().invoke(main, ["dev-cluster", "status", f"--state-dir={paths.root}"])
    finally:
        os.close(fd)
    assert result.exit_code == 1, result.output
    assert "status:     restarting kube-apiserver (daemon pid" in result.output
    assert "the cluster's data is kept" in result.output
    assert "restarted:  kwok 2 (after they died)" in result.output

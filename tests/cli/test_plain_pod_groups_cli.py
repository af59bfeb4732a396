"""``--plain-pod-groups`` on the commands: the same choices everywhere, and ``stromboli
simulate`` scheduling plain pods without PodGroups in ``memory`` mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.cli.process import PLAIN_POD_GROUP_MODES as CLI_MODES
from stromboli.core.scheduler.api.plaingroup import PLAIN_POD_GROUP_MODES

INPUT = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      schedulerName: volcano
      containers:
      - name: main
        image: nginx
        resources: {requests: {cpu: "1"}}
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  schedulerName: volcano
  containers:
  - name: main
    image: busybox
    resources: {requests: {cpu: "2"}}
"""


def test_the_commands_offer_the_modes_the_scheduler_knows() -> None:
    assert CLI_MODES == PLAIN_POD_GROUP_MODES
    for command in ("scheduler", "controller", "simulate"):
        result = CliRunner().invoke(main, [command, "--help"])
        assert result.exit_code == 0, result.output
        assert "--plain-pod-groups [object|memory]" in result.output


@pytest.mark.parametrize("mode", ["object", "memory"])
def test_simulate_schedules_plain_pods_in_both_modes(tmp_path: Path, mode: str) -> None:
    source = tmp_path / "plain.yaml"
    source.write_text(INPUT)
    result = CliRunner().invoke(
        main, ["simulate", str(source), "--plain-pod-groups", mode, "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)["items"]
    pods = [i for i in items if i["kind"] == "Pod"]
    groups = [i for i in items if i["kind"] == "PodGroup"]
    assert len(pods) == 4
    placed = sorted(p["spec"].get("nodeName", "") for p in pods)
    # 4 cpus: the three 1-cpu web pods and the 2-cpu pod cannot all fit; the same ones go
    # in either mode.
    assert placed.count("n1") == 3
    if mode == "object":
        assert {g["metadata"]["name"].startswith("podgroup-") for g in groups} == {True}
        assert len(groups) == 2  # one per owner: the ReplicaSet, and the lone pod
    else:
        assert groups == []
        assert not any(
            "scheduling.k8s.io/group-name" in (p["metadata"].get("annotations") or {}) for p in pods
        )


def test_simulate_refuses_an_unknown_mode(tmp_path: Path) -> None:
    source = tmp_path / "plain.yaml"
    source.write_text(INPUT)
    result = CliRunner().invoke(main, ["simulate", str(source), "--plain-pod-groups", "fast"])
    assert result.exit_code == 2
    assert "'fast' is not one of 'object', 'memory'" in result.output


def test_simulate_reports_in_memory_groups_as_jobs(tmp_path: Path) -> None:
    source = tmp_path / "plain.yaml"
    source.write_text(INPUT)
    reports = {}
    for mode in ("object", "memory"):
        result = CliRunner().invoke(
            main, ["simulate", str(source), "--plain-pod-groups", mode], terminal_width=100
        )
        assert result.exit_code == 0, result.output
        text = result.stdout
        reports[mode] = text[text.index("Jobs") : text.index("Utilisation")]
    assert "default/web-" in reports["memory"] and "default/solo" in reports["memory"]
    assert reports["memory"] == reports["object"]

"""The vcctl-style commands against a real API server (the shared ``control_plane``), through
the default Kubernetes store built from ``--kubeconfig``: one walk through each group."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from stromboli.core.api.crds import build_crds
from stromboli.core.cli import main
from stromboli.core.devcluster import ControlPlane


@pytest.fixture(scope="module")
def kubeconfig(control_plane: ControlPlane) -> str:
    control_plane.apply_manifests(build_crds())
    return str(control_plane.kubeconfig_path)


def cli(kubeconfig: str, *args: str) -> Result:
    result = CliRunner().invoke(main, [*args, "-k", kubeconfig], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_job_commands(control_plane: ControlPlane, kubeconfig: str) -> None:
    name = unique("vcctl-job")
    assert cli(kubeconfig, "job", "run", "-N", name, "-r", "2", "-m", "2").output == (
        f"run job {name} successfully\n"
    )
    listed = cli(kubeconfig, "job", "list", "--selector", name).output.splitlines()
    assert listed[1].split()[0] == name
    cells = listed[1].split()
    assert cells[cells.index("Batch") + 1] == "2"  # replicas (no phase yet: no controller runs)
    assert f"Name:        {name}" in cli(kubeconfig, "job", "view", "-N", name).output

    cli(kubeconfig, "job", "suspend", "-N", name)
    commands = control_plane.client.get(
        "/apis/bus.volcano.sh/v1alpha1/namespaces/default/commands"
    )["items"]
    (command,) = [c for c in commands if c["target"]["name"] == name]
    assert command["action"] == "AbortJob"
    assert command["metadata"]["name"].startswith(f"{name}-abortjob-")
    assert command["metadata"]["ownerReferences"][0]["kind"] == "Job"

    assert cli(kubeconfig, "job", "delete", "-N", name).output == (
        f"delete job {name} successfully\n"
    )
    assert cli(kubeconfig, "job", "list", "--selector", name).output == "No resources found\n"


def test_queue_commands(control_plane: ControlPlane, kubeconfig: str) -> None:
    name = unique("vcctl-q")
    cli(kubeconfig, "queue", "create", "-n", name, "-w", "3")
    row = next(
        line
        for line in cli(kubeconfig, "queue", "list").output.splitlines()
        if line.startswith(name)
    )
    assert row.split()[:2] == [name, "3"]

    cli(kubeconfig, "queue", "operate", "-n", name, "-a", "close")
    commands = control_plane.client.get(
        "/apis/bus.volcano.sh/v1alpha1/namespaces/default/commands"
    )["items"]
    (command,) = [c for c in commands if c["target"]["name"] == name]
    assert command["action"] == "CloseQueue"
    assert command["target"]["kind"] == "Queue"

    cli(kubeconfig, "queue", "operate", "-n", name, "-a", "update", "-w", "9")
    assert cli(kubeconfig, "queue", "get", "-n", name).output.splitlines()[1].split()[:2] == [
        name,
        "9",
    ]
    cli(kubeconfig, "queue", "delete", "-n", name)
    missing = CliRunner().invoke(main, ["queue", "get", "-n", name, "-k", kubeconfig])
    assert missing.exit_code == 255
    assert "not found" in missing.output


def test_jobflow_commands(kubeconfig: str, tmp_path: Path) -> None:
    name = unique("vcctl-flow")
    path = tmp_path / "flow.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "flow.volcano.sh/v1alpha1",
                "kind": "JobFlow",
                "metadata": {"name": name},
                "spec": {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]},
            }
        )
    )
    assert cli(kubeconfig, "jobflow", "create", "-f", str(path)).output == (
        f"Created JobFlow: default/{name}\n"
    )
    assert name in cli(kubeconfig, "jobflow", "list").output
    assert cli(kubeconfig, "jobflow", "get", "-N", name).output.splitlines()[1].startswith(name)
    described = yaml.safe_load(cli(kubeconfig, "jobflow", "describe", "-N", name).output)
    assert described["spec"]["flows"][1]["dependsOn"]["targets"] == ["a"]
    assert "managedFields" not in described["metadata"]
    assert cli(kubeconfig, "jobflow", "delete", "-f", str(path)).output == (
        f"Deleted JobFlow: default/{name}\n"
    )


def test_jobtemplate_commands(kubeconfig: str, tmp_path: Path) -> None:
    name = unique("vcctl-tmpl")
    path = tmp_path / "template.yaml"
    template = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                    },
                }
            ],
        },
    }
    path.write_text(yaml.safe_dump(template))
    assert cli(kubeconfig, "jobtemplate", "create", "-f", str(path)).output == (
        f"Created JobTemplate: default/{name}\n"
    )
    assert name in cli(kubeconfig, "jobtemplate", "list").output
    assert cli(kubeconfig, "jobtemplate", "get", "-N", name).output.splitlines()[1].split() == [
        name,
        "default",
    ]
    described = yaml.safe_load(
        cli(kubeconfig, "jobtemplate", "describe", "-N", name, "-o", "json").output
    )
    assert described["spec"]["tasks"][0]["name"] == "t"
    assert cli(kubeconfig, "jobtemplate", "delete", "-N", name).output == (
        f"Deleted JobTemplate: default/{name}\n"
    )

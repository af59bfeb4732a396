"""``stromboli jobflow`` / ``jobtemplate``: vcctl's flow commands against a memory store."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import yaml

from .conftest import Cluster

JOBFLOW = ("flow.volcano.sh/v1alpha1", "JobFlow")
JOBTEMPLATE = ("flow.volcano.sh/v1alpha1", "JobTemplate")

FLOWS = """\
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata:
  name: test-a
spec:
  jobRetainPolicy: delete
  flows:
  - name: a
  - name: b
    dependsOn: {targets: [a]}
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata:
  name: test-b
  namespace: other
spec:
  flows:
  - name: a
"""

TEMPLATES = """\
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata:
  name: a
spec:
  tasks: [{name: t, replicas: 1}]
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata:
  name: b
spec:
  tasks: [{name: t, replicas: 2}]
"""

Writer = Callable[[str, str], str]


@pytest.mark.parametrize("group", ["jobflow", "jobtemplate"])
@pytest.mark.parametrize("command", [None, "create", "list", "get", "delete", "describe"])
def test_help(cluster: Cluster, group: str, command: str | None) -> None:
    args = [group, command, "--help"] if command else [group, "--help"]
    result = cluster.cli(*args)
    assert result.exit_code == 0 and "Usage:" in result.output


def test_describe_help_flags(cluster: Cluster) -> None:
    output = cluster.cli("jobflow", "describe", "--help").output
    assert "-N, --name" in output and "-n, --namespace" in output
    assert "-o, --format" in output and "[default: yaml]" in output


# --- jobflow -------------------------------------------------------------------------------------


def test_jobflow_create(cluster: Cluster, write: Writer) -> None:
    result = cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    assert result.output == "Created JobFlow: default/test-a\nCreated JobFlow: other/test-b\n"
    assert [f["metadata"]["name"] for f in cluster.items(*JOBFLOW)] == ["test-a", "test-b"]


def test_jobflow_create_reports_each_failure(cluster: Cluster, write: Writer) -> None:
    path = write("flows.yaml", FLOWS)
    cluster.cli("jobflow", "create", "-f", path)
    output = cluster.cli("jobflow", "create", "-f", path).output
    assert output.count("Failed to create JobFlow: ") == 2


def test_jobflow_create_needs_file(cluster: Cluster) -> None:
    result = cluster.cli("jobflow", "create")
    assert result.exit_code == 255
    assert result.output.startswith("Failed to jobflow create: ")


def test_jobflow_create_missing_file(cluster: Cluster) -> None:
    result = cluster.cli("jobflow", "create", "-f", "/nonexistent.yaml")
    assert result.exit_code == 255
    assert "failed to read file" in result.output


def test_jobflow_list(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    flow = cluster.call("get", *JOBFLOW, "test-a", "default")
    flow["status"] = {"state": {"phase": "Running"}}
    cluster.call("update_status", flow)
    cluster.clock.advance(185)
    lines = cluster.cli("jobflow", "list").output.splitlines()
    assert lines[0].split() == ["Name", "Namespace", "Phase", "Age"]
    assert lines[1].split() == ["test-a", "default", "Running", "3m5s"]
    assert len(lines) == 2
    assert lines[0].index("Namespace") == len("test-a") + 4


def test_jobflow_list_all_namespaces(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    lines = cluster.cli("jobflow", "list", "--all-namespaces").output.splitlines()
    assert [line.split()[:2] for line in lines[1:]] == [["test-a", "default"], ["test-b", "other"]]


def test_jobflow_list_empty(cluster: Cluster) -> None:
    assert cluster.cli("jobflow", "list").output == "No resources found\n"


def test_jobflow_get(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    lines = cluster.cli("jobflow", "get", "-N", "test-b", "-n", "other").output.splitlines()
    assert lines[1].split() == ["test-b", "other", "0s"]


def test_jobflow_get_requires_name(cluster: Cluster) -> None:
    assert cluster.cli("jobflow", "get").output == (
        "Failed to jobflow get: name is mandatory to get the particular jobflow details\n"
    )


def test_jobflow_describe_yaml(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    output = cluster.cli("jobflow", "describe", "-N", "test-a").output
    described = yaml.safe_load(output)
    assert described["kind"] == "JobFlow"
    assert described["spec"]["jobRetainPolicy"] == "delete"
    assert "managedFields" not in described["metadata"]


def test_jobflow_describe_json(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    output = cluster.cli("jobflow", "describe", "-N", "test-a", "-o", "json").output
    assert json.loads(output)["metadata"]["name"] == "test-a"


def test_jobflow_describe_all_in_namespace(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    cluster.create(
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobFlow",
            "metadata": {"name": "test-c", "namespace": "default"},
            "spec": {"flows": [{"name": "x"}]},
        }
    )
    documents = cluster.cli("jobflow", "describe").output.split("\n\n")
    assert [yaml.safe_load(d)["metadata"]["name"] for d in documents] == ["test-a", "test-c"]


def test_jobflow_describe_bad_format(cluster: Cluster) -> None:
    result = cluster.cli("jobflow", "describe", "-N", "x", "-o", "table")
    assert result.output == "Failed to jobflow describe: Unsupported format: table\n"


def test_jobflow_delete_by_name(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobflow", "create", "-f", write("flows.yaml", FLOWS))
    output = cluster.cli("jobflow", "delete", "-N", "test-b", "-n", "other").output
    assert output == "Deleted JobFlow: other/test-b\n"
    assert [f["metadata"]["name"] for f in cluster.items(*JOBFLOW)] == ["test-a"]


def test_jobflow_delete_by_file(cluster: Cluster, write: Writer) -> None:
    path = write("flows.yaml", FLOWS)
    cluster.cli("jobflow", "create", "-f", path)
    output = cluster.cli("jobflow", "delete", "-f", path).output
    assert output == "Deleted JobFlow: default/test-a\nDeleted JobFlow: other/test-b\n"
    assert cluster.items(*JOBFLOW) == []


def test_jobflow_delete_requires_name(cluster: Cluster) -> None:
    assert cluster.cli("jobflow", "delete").output == (
        "Failed to jobflow delete: jobflow name must be specified\n"
    )


def test_jobflow_delete_missing(cluster: Cluster) -> None:
    result = cluster.cli("jobflow", "delete", "-N", "ghost")
    assert result.exit_code == 255
    assert "not found" in result.output


# --- jobtemplate ---------------------------------------------------------------------------------


def test_jobtemplate_create_list_get(cluster: Cluster, write: Writer) -> None:
    output = cluster.cli("jobtemplate", "create", "-f", write("t.yaml", TEMPLATES)).output
    assert output == "Created JobTemplate: default/a\nCreated JobTemplate: default/b\n"
    lines = cluster.cli("jobtemplate", "list").output.splitlines()
    assert [line.split() for line in lines] == [
        ["Name", "Namespace"],
        ["a", "default"],
        ["b", "default"],
    ]
    assert cluster.cli("jobtemplate", "get", "-N", "b").output.splitlines()[1].split() == [
        "b",
        "default",
    ]


def test_jobtemplate_get_requires_name(cluster: Cluster) -> None:
    assert cluster.cli("jobtemplate", "get").output == (
        "Failed to jobtemplate get: name is mandatory to get the particular job template details\n"
    )


def test_jobtemplate_describe(cluster: Cluster, write: Writer) -> None:
    cluster.cli("jobtemplate", "create", "-f", write("t.yaml", TEMPLATES))
    described = yaml.safe_load(cluster.cli("jobtemplate", "describe", "-N", "b").output)
    assert described["spec"]["tasks"][0]["replicas"] == 2


def test_jobtemplate_delete(cluster: Cluster, write: Writer) -> None:
    path = write("t.yaml", TEMPLATES)
    cluster.cli("jobtemplate", "create", "-f", path)
    assert (
        cluster.cli("jobtemplate", "delete", "-N", "a").output == "Deleted JobTemplate: default/a\n"
    )
    assert cluster.cli("jobtemplate", "delete", "-f", path).output == (
        "Failed to delete JobTemplate: "
        'jobtemplates.flow.volcano.sh "a" not found\nDeleted JobTemplate: default/b\n'
    )
    assert cluster.items(*JOBTEMPLATE) == []


def test_jobtemplate_delete_requires_name(cluster: Cluster) -> None:
    assert cluster.cli("jobtemplate", "delete").output == (
        "Failed to jobtemplate delete: job template name must be specified\n"
    )


def test_jobtemplate_list_empty(cluster: Cluster) -> None:
    assert cluster.cli("jobtemplate", "list", "-n", "nowhere").output == "No resources found\n"

"""Kinds Kubernetes stores but nothing in the simulator acts on: stored, listed, and named once
per kind on stderr; only a kind no API server would serve stops the run."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.cli import main
from stromboli.core.simulate.inert import (
    ACTED_ON,
    BUILTIN_KINDS,
    inert_warnings,
    is_inert,
    simulator_kind,
)

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
MANIFEST = """---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: runner}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: more}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: gpu}
spec: {devices: {requests: [{name: g, deviceClassName: gpu.example.com}]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: everything}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: work}
spec:
  tasks:
  - name: t
    replicas: 1
    template:
      spec:
        containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def run(tmp_path: Path, text: str, *args: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "input.yaml"
    path.write_text(text)
    return CliRunner().invoke(main, ["simulate", str(path), *args])


def test_inert_kinds_are_stored_with_one_warning_per_kind(tmp_path: Path) -> None:
    result = run(tmp_path, NODE + MANIFEST, "--output", "json")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: Role (rbac.authorization.k8s.io/v1): 1 object stored; nothing in the "
        "simulator acts on this kind",
        "warning: RoleBinding (rbac.authorization.k8s.io/v1): 1 object stored; nothing in the "
        "simulator acts on this kind",
        "warning: ServiceAccount (v1): 1 object stored; nothing in the simulator acts on this kind",
        "warning: ConfigMap (v1): 2 objects stored; nothing in the simulator acts on this kind",
        "warning: Service (v1): 1 object stored; nothing in the simulator acts on this kind",
        "warning: ResourceClaim (resource.k8s.io/v1beta1): 1 object stored; nothing in the "
        "simulator acts on this kind",
        "warning: ClusterRole (rbac.authorization.k8s.io/v1): 1 object stored; nothing in the "
        "simulator acts on this kind",
    ]
    state = orjson.loads(result.stdout)
    stored = {(o["kind"], o["metadata"]["name"]) for o in state["items"]}
    assert {
        ("Role", "reader"),
        ("ConfigMap", "settings"),
        ("ConfigMap", "more"),
        ("ResourceClaim", "gpu"),
        ("ClusterRole", "everything"),
        ("Service", "web"),
    } <= stored
    role = next(o for o in state["items"] if o["kind"] == "Role")
    assert role["metadata"]["namespace"] == "default"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    cluster_role = next(o for o in state["items"] if o["kind"] == "ClusterRole")
    assert "namespace" not in cluster_role["metadata"]
    # The job beside them ran.
    pod = next(o for o in state["items"] if o["kind"] == "Pod")
    assert pod["spec"]["nodeName"] == "n1"


def test_the_report_still_prints_with_inert_kinds(tmp_path: Path) -> None:
    result = run(tmp_path, NODE + MANIFEST)
    assert result.exit_code == 0
    assert "default/work" in result.stdout


def test_a_kind_no_api_server_serves_stops_the_run(tmp_path: Path) -> None:
    text = (
        NODE + "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Rolle\nmetadata: {name: r}\n"
    )
    result = run(tmp_path, text)
    assert result.exit_code == 1
    assert 'document 2: Rolle "r": kind Rolle of apiVersion rbac.authorization.k8s.io/v1' in (
        result.output
    )
    assert "is not supported" in result.output


def test_an_inert_object_without_a_name_names_the_field(tmp_path: Path) -> None:
    text = NODE + "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {}\n"
    result = run(tmp_path, text)
    assert result.exit_code == 1
    assert "document 2: Role" in result.output and "name" in result.output


def test_a_wrong_version_of_a_builtin_group_is_not_served() -> None:
    assert simulator_kind("rbac.authorization.k8s.io/v2", "Role") is None
    assert simulator_kind("rbac.authorization.k8s.io/v1", "Role") is not None


@pytest.mark.parametrize(
    ("api_version", "kind", "inert"),
    [
        ("v1", "ConfigMap", True),
        ("v1", "Service", True),
        ("v1", "Secret", True),
        ("rbac.authorization.k8s.io/v1", "Role", True),
        ("resource.k8s.io/v1", "ResourceClaim", True),
        ("v1", "Pod", False),
        ("apps/v1", "Deployment", False),
        ("batch/v1", "Job", False),
        ("scheduling.k8s.io/v1", "PriorityClass", False),
        ("scheduling.volcano.sh/v1beta1", "Queue", False),
        ("example.com/v1", "Widget", False),
    ],
)
def test_is_inert(api_version: str, kind: str, inert: bool) -> None:
    assert is_inert(api_version, kind) is inert


def test_every_kind_acted_on_is_served() -> None:
    assert all(simulator_kind(*ak) is not None for ak in ACTED_ON)


@given(st.lists(st.sampled_from(sorted(BUILTIN_KINDS) + sorted(ACTED_ON)), max_size=40))
def test_one_warning_per_inert_kind_counting_its_objects(kinds: list[tuple[str, str]]) -> None:
    lines = inert_warnings(kinds)
    inert = [ak for ak in kinds if ak not in ACTED_ON]
    assert len(lines) == len(set(inert))
    for line, ak in zip(lines, dict.fromkeys(inert), strict=True):
        count = inert.count(ak)
        assert line.startswith(f"{ak[1]} ({ak[0]}): {count} object")


def test_a_version_kubernetes_no_longer_serves_names_the_one_it_does(tmp_path: Path) -> None:
    text = (
        NODE + "---\napiVersion: rbac.authorization.k8s.io/v1beta1\nkind: ClusterRoleBinding\n"
        "metadata: {name: admin}\n"
    )
    result = run(tmp_path, text)
    assert result.exit_code == 1
    assert result.output.rstrip().endswith(
        "kind ClusterRoleBinding of apiVersion rbac.authorization.k8s.io/v1beta1 is not "
        "supported (Kubernetes serves it as rbac.authorization.k8s.io/v1)"
    )

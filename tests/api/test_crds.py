"""Generated CRDs: structural, complete, and in agreement with the models."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from stromboli.core.api.crds import (
    CRD_SOURCES,
    build_crds,
    crd_filename,
    openapi_schema,
    render_crds,
)
from stromboli.core.api.models import PodGroup, Queue
from stromboli.core.api.registry import validate_object
from stromboli.core.cli import main
from stromboli.core.cli.crds import crds as crds_command

from . import samples
from .schema_check import defaults_problems, schema_problems, structural_problems

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in build_crds()}


def version(kind: str) -> dict[str, Any]:
    (only,) = CRDS[kind]["spec"]["versions"]
    return only


def schema(kind: str) -> dict[str, Any]:
    return version(kind)["schema"]["openAPIV3Schema"]


def node(kind: str, path: str) -> dict[str, Any]:
    """The schema node at a dotted path; ``[]`` steps into array items."""
    current = schema(kind)
    for part in path.split("."):
        if part == "[]":
            current = current["items"]
        elif part == "*":
            current = current["additionalProperties"]
        else:
            current = current["properties"][part]
    return current


# --- The checker itself --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "a: $ref"),
        ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}}, "a: anyOf"),
        ({"type": "object", "properties": {"a": {"description": "untyped"}}}, "a: no type"),
        ({"type": "object", "additionalProperties": True}, "additionalProperties must be a schema"),
        ({"type": "array"}, "array without items"),
        ({"type": "object", "required": ["x"], "properties": {}}, "required field 'x'"),
        (
            {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "number"}]},
            "int-or-string anyOf",
        ),
        ({"type": "object", "properties": {"a": {"type": "str"}}}, "unknown type"),
    ],
)
def test_structural_checker_catches(bad: dict[str, Any], problem: str) -> None:
    problems = structural_problems(bad)
    assert any(problem in p for p in problems), problems


def test_schema_checker_catches_pruned_and_wrong_types() -> None:
    shape = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "s": {"type": "string"}},
    }
    assert schema_problems({"n": 1, "s": "a"}, shape) == []
    assert schema_problems({"n": -1}, shape) == ["n: below minimum"]
    assert schema_problems({"n": True}, shape) == ["n: expected integer, got bool"]
    assert schema_problems({"x": 1}, shape) == ["x: would be pruned"]


# --- Every CRD -----------------------------------------------------------------------------------


def test_one_crd_per_volcano_kind() -> None:
    assert set(CRDS) == {
        "Queue",
        "PodGroup",
        "Job",
        "CronJob",
        "Command",
        "JobFlow",
        "JobTemplate",
        "HyperNode",
        "Numatopology",
    }


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_is_structural(kind: str) -> None:
    assert structural_problems(schema(kind)) == []


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_defaults_satisfy_their_schema(kind: str) -> None:
    assert defaults_problems(schema(kind)) == []


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_envelope(kind: str) -> None:
    crd = CRDS[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    names = crd["spec"]["names"]
    assert crd["metadata"]["name"] == f"{names['plural']}.{crd['spec']['group']}"
    assert names["listKind"] == f"{kind}List"
    assert names["singular"] == kind.lower()
    assert version(kind)["served"] is True and version(kind)["storage"] is True


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_root_properties(kind: str) -> None:
    properties = schema(kind)["properties"]
    assert properties["apiVersion"]["type"] == "string"
    assert properties["kind"]["type"] == "string"
    assert properties["metadata"] == {"type": "object"}
    assert schema(kind)["type"] == "object"


@pytest.mark.parametrize(
    ("kind", "group", "scope", "short_names"),
    [
        ("Queue", "scheduling.volcano.sh", "Cluster", ["q", "queue-v1beta1"]),
        ("PodGroup", "scheduling.volcano.sh", "Namespaced", ["pg", "podgroup-v1beta1"]),
        ("Job", "batch.volcano.sh", "Namespaced", ["vcjob", "vj"]),
        ("CronJob", "batch.volcano.sh", "Namespaced", ["cronvcjob", "cronvj"]),
        ("Command", "bus.volcano.sh", "Namespaced", None),
        ("JobFlow", "flow.volcano.sh", "Namespaced", ["jf"]),
        ("JobTemplate", "flow.volcano.sh", "Namespaced", ["jt"]),
        ("HyperNode", "topology.volcano.sh", "Cluster", ["hn"]),
        ("Numatopology", "nodeinfo.volcano.sh", "Cluster", ["numatopo"]),
    ],
)
def test_names_and_scope(kind: str, group: str, scope: str, short_names: list[str] | None) -> None:
    spec = CRDS[kind]["spec"]
    assert spec["group"] == group
    assert spec["scope"] == scope
    assert spec["names"].get("shortNames") == short_names


@pytest.mark.parametrize(
    ("kind", "has_status"),
    [
        ("Queue", True),
        ("PodGroup", False),
        ("Job", True),
        ("CronJob", True),
        ("Command", False),
        ("JobFlow", True),
        ("JobTemplate", True),
        ("HyperNode", True),
        ("Numatopology", False),
    ],
)
def test_status_subresource(kind: str, has_status: bool) -> None:
    assert ("subresources" in version(kind)) is has_status
    if has_status:
        assert version(kind)["subresources"] == {"status": {}}


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        ("Queue", [("PARENT", "string", ".spec.parent", 0)]),
        (
            "PodGroup",
            [
                ("STATUS", "string", ".status.phase", 0),
                ("minMember", "integer", ".spec.minMember", 0),
                ("RUNNINGS", "integer", ".status.running", 0),
                ("AGE", "date", ".metadata.creationTimestamp", 0),
                ("QUEUE", "string", ".spec.queue", 1),
            ],
        ),
        (
            "Job",
            [
                ("STATUS", "string", ".status.state.phase", 0),
                ("minAvailable", "integer", ".status.minAvailable", 0),
                ("RUNNINGS", "integer", ".status.running", 0),
                ("AGE", "date", ".metadata.creationTimestamp", 0),
                ("QUEUE", "string", ".spec.queue", 1),
            ],
        ),
        (
            "JobFlow",
            [
                ("Status", "string", ".status.state.phase", 0),
                ("Age", "date", ".metadata.creationTimestamp", 0),
            ],
        ),
        (
            "HyperNode",
            [
                ("Tier", "integer", ".spec.tier", 0),
                ("TierName", "string", ".spec.tierName", 0),
                ("NodeCount", "integer", ".status.nodeCount", 0),
                ("Age", "date", ".metadata.creationTimestamp", 0),
            ],
        ),
        ("CronJob", []),
        ("Command", []),
        ("JobTemplate", []),
        ("Numatopology", []),
    ],
)
def test_printer_columns(kind: str, columns: list[tuple[str, str, str, int]]) -> None:
    found = [
        (c["name"], c["type"], c["jsonPath"], c.get("priority", 0))
        for c in version(kind).get("additionalPrinterColumns", [])
    ]
    assert found == columns


@pytest.mark.parametrize("kind", ["PodGroup", "Job", "JobFlow", "HyperNode"])
def test_printer_column_paths_exist_in_schema(kind: str) -> None:
    for column in version(kind)["additionalPrinterColumns"]:
        path = column["jsonPath"].lstrip(".")
        if path.startswith("metadata."):
            continue
        assert node(kind, path)["type"] == column["type"]


# --- Specific fields -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "path", "default"),
    [
        ("Queue", "spec.weight", 1),
        ("Queue", "spec.dequeueStrategy", "traverse"),
        ("PodGroup", "spec.queue", "default"),
        ("PodGroup", "spec.networkTopology.mode", "hard"),
        ("PodGroup", "spec.subGroupPolicy.[].subGroupSize", 1),
        ("PodGroup", "spec.subGroupPolicy.[].minSubGroups", 0),
        ("Job", "spec.queue", "default"),
        ("Job", "spec.maxRetry", 3),
        ("Job", "spec.tasks.[].partitionPolicy.minPartitions", 0),
        ("CronJob", "spec.concurrencyPolicy", "Allow"),
        ("CronJob", "spec.suspend", False),
        ("CronJob", "spec.successfulJobsHistoryLimit", 3),
        ("CronJob", "spec.failedJobsHistoryLimit", 1),
        ("CronJob", "spec.jobTemplate.spec.maxRetry", 3),
        ("JobTemplate", "spec.queue", "default"),
        ("Queue", "spec", {}),
    ],
)
def test_defaults(kind: str, path: str, default: Any) -> None:
    assert node(kind, path)["default"] == default


def test_optional_fields_have_no_null_default() -> None:
    assert "default" not in node("PodGroup", "spec.minMember")
    assert "default" not in node("Job", "spec.minAvailable")


@pytest.mark.parametrize(
    ("kind", "path", "bounds"),
    [
        ("Queue", "spec.weight", {"minimum": 1, "maximum": 65535}),
        ("Queue", "spec.priority", {"minimum": 0}),
        ("PodGroup", "spec.minMember", {"minimum": 0}),
        ("PodGroup", "spec.networkTopology.highestTierAllowed", {"minimum": 0}),
        ("Job", "spec.minAvailable", {"minimum": 0}),
        ("Job", "spec.minSuccess", {"minimum": 1}),
        ("Job", "spec.tasks.[].replicas", {"minimum": 0}),
        ("Job", "spec.tasks.[].partitionPolicy.totalPartitions", {"minimum": 1}),
        ("HyperNode", "spec.tier", {"minimum": 0}),
    ],
)
def test_numeric_bounds(kind: str, path: str, bounds: dict[str, int]) -> None:
    field = node(kind, path)
    assert field["type"] == "integer"
    assert {key: field[key] for key in bounds} == bounds


@pytest.mark.parametrize(
    ("kind", "path", "values"),
    [
        ("Queue", "status.state", ["Open", "Closed", "Closing", "Unknown"]),
        ("PodGroup", "status.phase", ["Pending", "Running", "Unknown", "Inqueue", "Completed"]),
        ("PodGroup", "spec.networkTopology.mode", ["hard", "soft"]),
        (
            "Job",
            "spec.tasks.[].topologyPolicy",
            ["none", "best-effort", "restricted", "single-numa-node"],
        ),
        ("CronJob", "spec.concurrencyPolicy", ["Allow", "Forbid", "Replace"]),
        ("JobFlow", "spec.jobRetainPolicy", ["retain", "delete"]),
        ("HyperNode", "spec.members.[].type", ["Node", "HyperNode"]),
    ],
)
def test_enums(kind: str, path: str, values: list[str]) -> None:
    assert node(kind, path)["enum"] == values
    assert node(kind, path)["type"] == "string"


def test_policy_events_enum_includes_any() -> None:
    events = node("Job", "spec.policies.[].event")["enum"]
    assert "*" in events and "PodEvicted" in events


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Queue", "spec.capability.*"),
        ("Queue", "spec.guarantee.resource.*"),
        ("Queue", "status.allocated.*"),
        ("PodGroup", "spec.minResources.*"),
        ("Queue", "spec.extendClusters.[].capacity.*"),
    ],
)
def test_quantities_are_int_or_string(kind: str, path: str) -> None:
    field = node(kind, path)
    assert field["x-kubernetes-int-or-string"] is True
    assert field["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "type" not in field


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Job", "spec.tasks.[].template"),
        ("Job", "spec.volumes.[].volumeClaim"),
        ("CronJob", "spec.jobTemplate.spec.tasks.[].template"),
        ("JobTemplate", "spec.tasks.[].template"),
    ],
)
def test_pod_templates_preserve_unknown_fields(kind: str, path: str) -> None:
    field = node(kind, path)
    assert field["type"] == "object"
    assert field["x-kubernetes-preserve-unknown-fields"] is True
    assert "properties" not in field


def test_embedded_metadata_preserves_unknown_fields() -> None:
    meta = node("CronJob", "spec.jobTemplate.metadata")
    assert meta["type"] == "object"
    assert meta["x-kubernetes-preserve-unknown-fields"] is True


def test_required_fields() -> None:
    assert set(node("HyperNode", "spec")["required"]) == {"tier", "members"}
    assert schema("HyperNode")["required"] == ["spec"]
    assert set(node("CronJob", "spec")["required"]) == {"schedule", "jobTemplate"}
    assert node("Job", "spec.volumes.[]")["required"] == ["mountPath"]
    assert "required" not in schema("Queue")


def test_names_have_dns_patterns() -> None:
    queue = node("PodGroup", "spec.queue")
    assert queue["maxLength"] == 253
    assert queue["pattern"].startswith("^(")  # empty allowed: the webhook defaults it
    assert node("Job", "spec.tasks.[].name")["maxLength"] == 63


def test_hypernode_selector_rules() -> None:
    selector = node("HyperNode", "spec.members.[].selector")
    rules = selector["x-kubernetes-validations"]
    assert len(rules) == 2
    assert all(rule["rule"] and rule["message"] for rule in rules)


def test_command_fields_are_top_level() -> None:
    properties = schema("Command")["properties"]
    assert {"action", "target", "reason", "message"} <= set(properties)
    assert "spec" not in properties and "status" not in properties


def test_special_aliases_in_schema() -> None:
    assert "transitionID" in node("PodGroup", "status.conditions.[]")["properties"]
    assert "unKnowJobs" in node("JobFlow", "status")["properties"]
    assert "jobSpec" in node("JobFlow", "spec.flows.[].patch")["properties"]


def test_no_titles_leak() -> None:
    assert "title" not in render_crds().replace("Tier", "")


# --- Models and CRDs agree -----------------------------------------------------------------------


@pytest.mark.parametrize("sample", samples.VOLCANO, ids=lambda s: s["kind"])
def test_model_output_is_accepted_by_the_crd(sample: dict[str, Any]) -> None:
    stored = validate_object(sample)
    assert schema_problems(stored, schema(sample["kind"])) == []


def test_crd_rejects_what_the_model_rejects() -> None:
    bad = copy.deepcopy(samples.QUEUE)
    bad["spec"]["weight"] = 0
    assert schema_problems(bad, schema("Queue")) == ["spec.weight: below minimum"]
    bad = copy.deepcopy(samples.PODGROUP)
    bad["spec"]["minMembr"] = 1
    assert schema_problems(bad, schema("PodGroup")) == ["spec.minMembr: would be pruned"]


def test_openapi_schema_is_deterministic() -> None:
    assert openapi_schema(Queue) == openapi_schema(Queue)
    assert openapi_schema(PodGroup) != openapi_schema(Queue)


# --- Rendering and the CLI -----------------------------------------------------------------------


def test_render_crds_is_multi_document_yaml() -> None:
    documents = list(yaml.safe_load_all(render_crds()))
    assert documents == build_crds()
    assert len(documents) == len(CRD_SOURCES)


def test_render_is_stable() -> None:
    assert render_crds() == render_crds()


def test_cli_prints_crds() -> None:
    result = CliRunner().invoke(main, ["crds"])
    assert result.exit_code == 0, result.output
    assert list(yaml.safe_load_all(result.output)) == build_crds()


def test_cli_writes_one_file_per_crd(tmp_path: Path) -> None:
    out = tmp_path / "crds"
    result = CliRunner().invoke(crds_command, ["--output-dir", str(out)])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(crd_filename(crd) for crd in build_crds())
    assert "scheduling.volcano.sh_podgroups.yaml" in files
    loaded = yaml.safe_load((out / "scheduling.volcano.sh_queues.yaml").read_text())
    assert loaded["metadata"]["name"] == "queues.scheduling.volcano.sh"


def test_yaml_has_no_anchors() -> None:
    text = render_crds()
    assert "&id" not in text and "*id" not in text


def test_schemas_share_no_mutable_parts() -> None:
    spec = node("PodGroup", "spec")
    outer = spec["properties"]["networkTopology"]["properties"]["mode"]["enum"]
    inner = spec["properties"]["subGroupPolicy"]["items"]["properties"]["networkTopology"]
    assert outer is not inner["properties"]["mode"]["enum"]

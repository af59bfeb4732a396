"""Volcano's --admission-conf resource groups: the file, the match, the mutation."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.admission.resourcegroups import (
    MAX_FILE_BYTES,
    AdmissionConfError,
    ResourceGroup,
    apply_resource_group,
    load_admission_conf,
    matching_group,
    parse_admission_conf,
)

VOLCANO_EXAMPLE = """
resourceGroups:
- resourceGroup: management
  object:
    key: namespace
    value:
    - mng-ns-1
  schedulerName: default-scheduler
  tolerations:
  - effect: NoSchedule
    key: taint
    operator: Exists
  labels:
    volcano.sh/nodetype: management
- resourceGroup: cpu
  object:
    key: annotation
    value:
    - "volcano.sh/resource-group: cpu"
  labels:
    volcano.sh/nodetype: cpu
  affinity: '{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[]}}'
- resourceGroup: gpu
  schedulerName: volcano
  labels:
    volcano.sh/nodetype: gpu
"""


def groups() -> tuple[ResourceGroup, ...]:
    return parse_admission_conf(VOLCANO_EXAMPLE)


def test_volcanos_example_file_is_read() -> None:
    management, cpu, gpu = groups()
    assert management.object_key == "namespace" and management.values == ("mng-ns-1",)
    assert management.scheduler_name == "default-scheduler"
    assert management.tolerations == (
        {"effect": "NoSchedule", "key": "taint", "operator": "Exists"},
    )
    assert cpu.node_selector == {"volcano.sh/nodetype": "cpu"}
    assert cpu.affinity is not None and "nodeAffinity" in cpu.affinity
    assert gpu.object_key == "" and gpu.scheduler_name == "volcano"


def test_match_by_namespace_by_annotation_pair_and_by_default_annotation() -> None:
    all_groups = groups()
    assert matching_group(all_groups, "mng-ns-1", {}).name == "management"
    assert matching_group(all_groups, "x", {"volcano.sh/resource-group": "cpu"}).name == "cpu"
    assert matching_group(all_groups, "x", {"volcano.sh/resource-group": "gpu"}).name == "gpu"
    assert matching_group(all_groups, "x", {"volcano.sh/resource-group": "none"}) is None
    assert matching_group(all_groups, "mng-ns-2", {}) is None


def test_the_first_matching_group_wins() -> None:
    first = ResourceGroup("a", "namespace", ("ns",), "s1")
    second = ResourceGroup("b", "namespace", ("ns",), "s2")
    assert matching_group((first, second), "ns", {}) is first


def test_annotation_pairs_are_trimmed_around_the_colon() -> None:
    group = ResourceGroup("g", "annotation", ("team :  ml",))
    assert group.takes("ns", {"team": "ml"})
    assert not group.takes("ns", {"team": "ml2"})


def test_apply_merges_selector_appends_tolerations_sets_affinity_only_when_absent() -> None:
    management, cpu, _ = groups()
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "nodeSelector": {"disk": "ssd", "volcano.sh/nodetype": "old"},
            "tolerations": [{"key": "mine", "operator": "Exists"}],
            "affinity": {"podAffinity": {}},
        },
    }
    before = copy.deepcopy(pod)
    out = apply_resource_group(pod, management)
    assert pod == before
    assert out["spec"]["nodeSelector"] == {"disk": "ssd", "volcano.sh/nodetype": "management"}
    assert [t["key"] for t in out["spec"]["tolerations"]] == ["mine", "taint"]
    assert out["spec"]["schedulerName"] == "default-scheduler"
    kept = apply_resource_group(pod, cpu)
    assert kept["spec"]["affinity"] == {"podAffinity": {}}
    assert "schedulerName" not in kept["spec"]
    bare = apply_resource_group({"spec": {}}, cpu)
    assert bare["spec"]["affinity"] == cpu.affinity
    assert bare["spec"]["affinity"] is not cpu.affinity


def test_an_empty_file_has_no_groups() -> None:
    assert parse_admission_conf("") == ()
    assert parse_admission_conf("resourceGroups: []") == ()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1, 2]", "must be a mapping with resourceGroups"),
        ("resourceGroups: 3", "resourceGroups: must be a list"),
        ("resourceGroups: [3]", "resourceGroups[0]: must be a mapping"),
        ("resourceGroups: [{schedulerName: v}]", "resourceGroups[0].resourceGroup"),
        ("resourceGroups: [{resourceGroup: g, object: {key: label, value: [a]}}]", "object.key"),
        ("resourceGroups: [{resourceGroup: g, object: {key: namespace}}]", "object.value"),
        ("resourceGroups: [{resourceGroup: g, object: {key: namespace, value: [1]}}]", "value"),
        ("resourceGroups: [{resourceGroup: g, object: {key: annotation, value: [x]}}]", "'x'"),
        ("resourceGroups: [{resourceGroup: g, labels: {a: 1}}]", "resourceGroups[g].labels"),
        ("resourceGroups: [{resourceGroup: g, tolerations: [a]}]", "resourceGroups[g].tolerations"),
        ("resourceGroups: [{resourceGroup: g, affinity: '{'}]", "resourceGroups[g].affinity"),
        ("resourceGroups: [{resourceGroup: g, affinity: '[1]'}]", "resourceGroups[g].affinity"),
        ("resourceGroups: [{resourceGroup: g, schedulerName: [v]}]", "schedulerName"),
        ("resourceGroups: [a: b: c]", "not YAML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_group_and_field(text: str, named: str) -> None:
    with pytest.raises(AdmissionConfError) as refused:
        parse_admission_conf(text)
    assert named in str(refused.value)


def test_a_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "conf.yaml"
    path.write_text("#" * (MAX_FILE_BYTES + 10))
    with pytest.raises(AdmissionConfError, match="over"):
        load_admission_conf(path)


def test_a_yaml_bomb_is_refused_or_bounded() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(AdmissionConfError):
        parse_admission_conf(bomb + "resourceGroups: *i\n")


def test_load_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(AdmissionConfError, match=r"missing\.yaml"):
        load_admission_conf(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("resourceGroups: 3")
    with pytest.raises(AdmissionConfError, match=r"bad\.yaml: resourceGroups"):
        load_admission_conf(bad)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(AdmissionConfError, match="UTF-8"):
        load_admission_conf(binary)
    good = tmp_path / "good.yaml"
    good.write_text(VOLCANO_EXAMPLE)
    assert [g.name for g in load_admission_conf(good)] == ["management", "cpu", "gpu"]


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
group_keys = st.sampled_from(
    ["resourceGroup", "object", "schedulerName", "labels", "tolerations", "affinity", "x"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(group_keys, values, max_size=6), max_size=3))
def test_any_document_is_read_or_refused_by_name(entries: list) -> None:
    try:
        parsed = parse_admission_conf(yaml.safe_dump({"resourceGroups": entries}))
    except AdmissionConfError as err:
        assert "resourceGroups" in str(err)
    else:
        for group in parsed:
            out = apply_resource_group({"spec": {"nodeSelector": {"a": "b"}}}, group)
            assert isinstance(out["spec"]["nodeSelector"], dict)


@pytest.mark.parametrize(
    "text",
    [
        "resourceGroups: " + "[" * 20_000 + "]" * 20_000,  # composing would overflow the C stack
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),  # billion laughs
    ],
)
def test_hostile_yaml_is_refused_before_it_is_built(text: str) -> None:
    with pytest.raises(AdmissionConfError, match="line"):
        parse_admission_conf(text)

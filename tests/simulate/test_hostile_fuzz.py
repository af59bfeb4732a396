"""Fuzzing the simulator's loader and admission: whatever the YAML (any text, wrong types at
any level of any kind, huge numbers, deep nesting, aliases), loading either succeeds or raises
the loader's own error with a message; admitting what loaded either succeeds or refuses."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.simulate.admission import Admission
from stromboli.core.simulate.loader import SimulationInputError, load

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TEMPLATE = {
    "metadata": {"annotations": {"sim.stromboli.dev/runtime": "30s"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        ],
    },
}
SEEDS: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "annotations": {
                "sim.stromboli.dev/submit-at": "10s",
                "scheduling.k8s.io/group-name": "g",
            },
        },
        "spec": {"schedulerName": "volcano", "priorityClassName": "high", **TEMPLATE["spec"]},
    },
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 2, "capability": {"cpu": "8"}, "deserved": {"cpu": "4"}},
    },
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": 1, "queue": "default", "minResources": {"cpu": "1"}},
    },
    {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano",
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [{"name": "t", "replicas": 2, "template": TEMPLATE}],
        },
    },
    {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {
            "schedule": "1-4 0 1 1 *",
            "jobTemplate": {
                "spec": {"tasks": [{"name": "t", "replicas": 1, "template": TEMPLATE}]}
            },
        },
    },
    {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": "f"},
        "spec": {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]},
    },
    {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "h"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n"}}}],
        },
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 10,
    },
    {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "rq"},
        "spec": {"hard": {"cpu": "10"}},
    },
    {
        "apiVersion": "v1",
        "kind": "List",
        "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}],
    },
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.sampled_from(["-1", "１", "1e309", "nan", "inf", "-5s", "0", "* * * * * *", "List", "v1"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@st.composite
def documents(draw: st.DrawFn) -> Any:
    """A seed object with one to three places replaced by arbitrary values or removed."""
    obj: Any = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(obj)))
        if not path:
            obj = draw(values)
            continue
        parent = obj
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(values)
    return obj


def load_text(text: str) -> None:
    """Load ``text`` as a file and admit what loads; only the loader's and admission's own
    refusals may come out."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.yaml"
        path.write_text(text)
        try:
            objects = load([path])
        except SimulationInputError as err:
            assert str(err).startswith(str(path)), err
            return
    admission = Admission()
    for item in objects:
        try:
            admission.admit(item.obj)
        except ValueError as err:  # AdmissionError, or a priority class that is missing
            assert str(err)


@FUZZ
@given(st.lists(documents(), min_size=1, max_size=3))
def test_mutated_objects_load_or_are_refused(docs: list[Any]) -> None:
    load_text(yaml.safe_dump_all(docs))


@FUZZ
@given(st.text(max_size=200))
def test_any_text_loads_or_is_refused(text: str) -> None:
    load_text(text)


@FUZZ
@given(
    st.integers(min_value=0, max_value=400),
    st.sampled_from(["[", "{a: ", "- "]),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=1, max_value=12),
)
def test_nesting_and_aliases_are_bounded(depth: int, opener: str, fan: int, levels: int) -> None:
    closer = {"[": "]", "{a: ": "}", "- ": ""}[opener]
    if opener == "- ":
        nested = "".join("  " * i + "- \n" for i in range(depth)) + "  " * depth + "x\n"
    else:
        nested = "n: " + opener * depth + "1" + closer * depth + "\n"
    aliases = ["a0: &a0 [x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)
    ]
    load_text(nested)
    load_text("\n".join(aliases) + "\n")
    load_text(
        "\n".join(aliases)
        + "\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        + f"spec: {{containers: *a{levels - 1}}}\n"
    )

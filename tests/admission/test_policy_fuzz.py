"""Property tests of the queue policy: any object, however malformed, gets a verdict (never an
exception); any document is a policy or a PolicyError; every queue a refusal names instead
takes the object."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.admission.policy import (
    PolicyError,
    QueuePolicy,
    parse_policy,
    policy_from_document,
)
from stromboli.core.admission.policyrules import (
    PolicyRefusal,
    enforce,
    violations,
    with_default_queue,
)

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
QUEUES = ["a", "b", "c", "default", "root"]
NAMESPACES = ["n1", "n2", "*"]

POLICY = parse_policy(
    """
namespaces:
  n1: {queues: [a, b], defaultQueue: a}
  "*": {queues: [c], defaultQueue: c}
queues:
  a: {maxPodsPerJob: 2, maxResourcesPerJob: {cpu: "2", memory: 1Gi}, priorityClassNames: [p]}
  b: {preemptableOnly: true, schedulerNames: [volcano]}
  "*": {maxPodsPerJob: 100}
"""
)

CONTAINER = {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
TEMPLATE = {"spec": {"containers": [CONTAINER], "initContainers": [CONTAINER]}}
OBJECTS = [
    {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "n1", "annotations": {}},
        "spec": {
            "queue": "a",
            "priorityClassName": "p",
            "schedulerName": "volcano",
            "tasks": [{"name": "t", "replicas": 2, "template": TEMPLATE}],
        },
    },
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "n1"},
        "spec": {"queue": "a", "minMember": 1, "minResources": {"cpu": "1"}},
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "n2", "annotations": {}},
        "spec": {"schedulerName": "volcano", **TEMPLATE["spec"]},
    },
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["1", "-1", "1e40", "500m", "2Gi", "true", "default", "a", "b", "podgroup-x"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found.extend(_paths(child, (*prefix, index)))
    return found


@st.composite
def damaged(draw: st.DrawFn) -> dict:
    """A well-formed object with a few of its values (at any depth) replaced by anything."""
    obj = copy.deepcopy(draw(st.sampled_from(OBJECTS)))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        paths = [p for p in _paths(obj) if p and p[0] not in ("kind", "apiVersion")]
        path = draw(st.sampled_from(paths))
        parent: Any = obj
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(values)
    return obj


@FUZZ
@given(damaged(), st.sampled_from([None, set(QUEUES), set()]))
def test_any_object_gets_a_verdict(obj: dict, known: set[str] | None) -> None:
    before = copy.deepcopy(obj)
    reasons = violations(POLICY, obj, ["volcano"], known_queues=known, namespace="n1")
    assert isinstance(reasons, list)
    assert all(isinstance(r, str) and r for r in reasons)
    mutated = with_default_queue(POLICY, obj, {"scheduling.volcano.sh/queue-name": "b"})
    assert isinstance(mutated, dict)
    try:
        enforce(POLICY, obj, {"n1": {}}, ["volcano"], known)
    except PolicyRefusal as refusal:
        assert "denied the request: queue policy: " in str(refusal)
    assert obj == before  # nothing decided changes the object given


policy_values = st.one_of(
    values,
    st.lists(st.sampled_from([*QUEUES, ""]), max_size=4),
    st.integers(min_value=-2, max_value=2**40),
    st.sampled_from(["8", "1e40", "-1", "64Gi"]),
)
limit_entries = st.dictionaries(
    st.sampled_from(
        [
            "priorityClassNames",
            "maxPodsPerJob",
            "maxResourcesPerJob",
            "schedulerNames",
            "preemptableOnly",
            "bogus",
        ]
    ),
    policy_values
    | st.dictionaries(st.sampled_from(["cpu", "memory", ""]), policy_values, max_size=3),
    max_size=4,
)
namespace_entries = st.dictionaries(
    st.sampled_from(["queues", "defaultQueue", "other"]), policy_values, max_size=3
)
documents = st.dictionaries(
    st.sampled_from(["namespaces", "queues", "apiVersion", "kind", "extra"]),
    st.one_of(
        values,
        st.dictionaries(st.sampled_from([*NAMESPACES, "", "5"]), namespace_entries, max_size=3),
        st.dictionaries(st.sampled_from([*QUEUES, "*"]), limit_entries, max_size=3),
    ),
    max_size=4,
)


@FUZZ
@given(documents)
def test_any_document_is_a_policy_or_a_policy_error(document: dict) -> None:
    try:
        policy = policy_from_document(document, "p.yaml")
    except PolicyError as err:
        assert str(err).startswith("p.yaml: ")
        return
    assert isinstance(policy, QueuePolicy)
    for obj in OBJECTS:  # a policy that loads decides without raising
        violations(policy, obj)


@FUZZ
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200), documents.map(yaml.safe_dump)))
def test_any_file_is_a_policy_or_a_policy_error(raw: str | bytes) -> None:
    try:
        parse_policy(raw, "p.yaml")
    except PolicyError as err:
        assert str(err).startswith("p.yaml: ")


@st.composite
def sized_jobs(draw: st.DrawFn) -> dict:
    obj = copy.deepcopy(OBJECTS[0])
    meta, spec = obj["metadata"], obj["spec"]
    meta["namespace"] = draw(st.sampled_from(["n1", "n2"]))
    spec["queue"] = draw(st.sampled_from(QUEUES))
    if draw(st.booleans()):
        meta["annotations"] = {"volcano.sh/preemptable": "true"}
    spec["priorityClassName"] = draw(st.sampled_from(["p", "q"]))
    task = spec["tasks"][0]
    task["replicas"] = draw(st.integers(min_value=0, max_value=5))
    cpu = draw(st.sampled_from(["100m", "1", "3"]))
    task["template"] = {
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    }
    return obj


@FUZZ
@given(sized_jobs())
def test_every_queue_named_instead_takes_the_job(obj: dict) -> None:
    reasons = violations(POLICY, obj, known_queues=set(QUEUES))
    if not reasons:
        return
    last = reasons[-1]
    if ": " not in last or last.startswith("no queue"):
        return
    for queue in last.split(": ", 1)[1].split(", "):
        moved = copy.deepcopy(obj)
        moved["spec"]["queue"] = queue
        assert violations(POLICY, moved, known_queues=set(QUEUES)) == [], queue

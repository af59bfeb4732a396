"""Property tests: any object, however mutilated, converts or raises ``ConversionError``.

Each adapter starts from a valid object of its framework; hypothesis replaces or deletes one or
more of its parts with arbitrary JSON (wrong types, negative and huge numbers, hostile quantity
strings, deep lists). Whatever comes out must be a ``Conversion`` whose PodGroups our API
accepts, computed the same way twice, or a ``ConversionError`` naming a field — never another
exception.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.api.registry import validate_object
from stromboli.integrations.argo.convert import WorkflowAdapter
from stromboli.integrations.common import Context, Conversion, ConversionError, apply_mutation
from stromboli.integrations.jobset.convert import JobSetAdapter
from stromboli.integrations.jobset.lws import LeaderWorkerSetAdapter
from stromboli.integrations.kubeflow.mpi import MPIJobAdapter
from stromboli.integrations.kubeflow.trainer import TrainJobAdapter
from stromboli.integrations.kubeflow.training import TrainingOperatorAdapter
from stromboli.integrations.kuberay.convert import RayClusterAdapter, RayJobAdapter
from stromboli.integrations.spark.convert import SparkApplicationAdapter
from stromboli.integrations.spark.submit import SparkSubmitAdapter

from . import test_argo, test_jobset, test_kubeflow, test_kuberay, test_spark

QUANTITY_TEXT = st.sampled_from(
    [
        "1",
        "0",
        "-1",
        "500m",
        "2Gi",
        "1e309",
        "1e18",
        "9" * 30,
        "1.5",
        "512m",
        "1g",
        "",
        "Mi",
        "１",
        "0x10",
        "nan",
        "inf",
        "1e-40",
        "2.5e3",
        "   1",
        "1Ki",
        "hard",
        "soft",
        "LeaderReady",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    QUANTITY_TEXT,
    st.text(max_size=12),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=8) | QUANTITY_TEXT, inner, max_size=4),
    ),
    max_leaves=12,
)


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += paths(item, (*prefix, i))
    return found


def mutilate(data: st.DataObject, base: dict[str, Any]) -> Any:
    obj: Any = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        targets = paths(obj)
        path = data.draw(st.sampled_from(targets), label="path")
        if not path:
            obj = data.draw(JSON, label="whole")
            continue
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans(), label="delete") and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(JSON, label="value")
    return obj


def check(adapter: Any, source: Any, context: Context) -> None:
    before = copy.deepcopy(source)
    try:
        result = adapter.convert(source, context)
    except ConversionError as exc:
        assert isinstance(exc.field, str) and exc.message
        return
    assert isinstance(result, Conversion)
    assert source == before
    assert repr(adapter.convert(copy.deepcopy(source), context)) == repr(result)
    for group in result.podgroups:
        validate_object(group)
    for change in result.mutations:
        apply_mutation({"metadata": {}, "spec": {}}, change)


def _runtime() -> dict[str, Any]:
    return test_kubeflow.runtime(("node", 1, test_kubeflow.template("1", "2Gi")))


CASES: dict[str, tuple[Any, Callable[[], dict[str, Any]], Callable[[], Context]]] = {
    "pytorchjob": (TrainingOperatorAdapter(), test_kubeflow.pytorchjob, Context),
    "mpijob": (MPIJobAdapter(), test_kubeflow.mpijob, Context),
    "trainjob": (TrainJobAdapter(), test_kubeflow.trainjob, lambda: Context(related=[_runtime()])),
    "raycluster": (
        RayClusterAdapter(),
        lambda: test_kuberay.raycluster(test_kuberay.group(minReplicas=1, maxReplicas=4)),
        Context,
    ),
    "rayjob": (
        RayJobAdapter(),
        lambda: test_kuberay.obj(
            "ray.io/v1",
            "RayJob",
            "rj",
            {"rayClusterSpec": test_kuberay.cluster_spec(test_kuberay.group())},
        ),
        Context,
    ),
    "sparkapplication": (SparkApplicationAdapter(), test_spark.app, Context),
    "sparkapplication-upstream": (
        SparkApplicationAdapter(),
        test_spark.app,
        lambda: Context(options={"spark.resources": "upstream"}),
    ),
    "spark-submit": (SparkSubmitAdapter(), test_spark.driver_pod, Context),
    "workflow": (
        WorkflowAdapter(),
        lambda: {
            **test_argo.workflow(annotations=test_argo.STEP_GROUP),
            "status": {"nodes": {"a": {"name": "wf[1].train(0:a)", "type": "Pod"}}},
        },
        Context,
    ),
    "jobset": (
        JobSetAdapter(),
        lambda: test_jobset.jobset(test_jobset.replicated("w", 2, 2, test_jobset.template())),
        Context,
    ),
    "lws": (
        LeaderWorkerSetAdapter(),
        test_jobset.lws,
        lambda: Context(related=[test_jobset.leader(0)]),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutilated_objects_convert_or_name_a_field(case: str, data: st.DataObject) -> None:
    adapter, build, context = CASES[case]
    base = build()
    check(adapter, base, context())  # the unmutilated object converts
    check(adapter, mutilate(data, base), context())


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=40, deadline=None)
@given(value=JSON)
def test_arbitrary_documents_convert_or_name_a_field(case: str, value: Any) -> None:
    adapter, _, context = CASES[case]
    check(adapter, value, context())


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.dictionaries(st.sampled_from(["Master", "Worker"]), st.integers(0, 50), min_size=1),
    min_available=st.none() | st.integers(0, 120),
)
def test_pytorchjob_min_member_rule(replicas: dict[str, int], min_available: int | None) -> None:
    """minMember is minAvailable or Σ replicas; minResources counts min(minMember, Σ) pods."""
    spec: dict[str, Any] = {
        "pytorchReplicaSpecs": {
            t: {"replicas": n, "template": test_kubeflow.template("1", "1Gi")}
            for t, n in replicas.items()
        }
    }
    if min_available is not None:
        spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": min_available}}
    job = test_kubeflow.obj("kubeflow.org/v1", "PyTorchJob", "p", spec)
    group = TrainingOperatorAdapter().convert(job).podgroups[0]
    total = sum(replicas.values())
    expected = total if min_available is None else min_available
    assert group["spec"]["minMember"] == expected
    pods = min(expected, total)
    assert group["spec"].get("minResources", {}) == (
        {"cpu": str(pods), "memory": f"{pods}Gi"} if pods else {}
    )


@settings(max_examples=60, deadline=None)
@given(
    groups=st.lists(
        st.tuples(
            st.integers(0, 20),
            st.integers(0, 20),
            st.integers(0, 20),
            st.integers(1, 4),
            st.booleans(),
        ),
        max_size=4,
    ),
    autoscaling=st.booleans(),
)
def test_raycluster_min_member_rule(
    groups: list[tuple[int, int, int, int, bool]], autoscaling: bool
) -> None:
    specs = [
        test_kuberay.group(f"g{i}", r, minReplicas=lo, maxReplicas=hi, numOfHosts=h, suspend=s)
        for i, (r, lo, hi, h, s) in enumerate(groups)
    ]
    rc = test_kuberay.raycluster(*specs, autoscaling=autoscaling)
    spec = RayClusterAdapter().convert(rc).podgroups[0]["spec"]
    workers = 0
    for r, lo, hi, h, s in groups:
        if s:
            continue
        workers += lo * h if autoscaling else (hi if lo > hi else min(max(r, lo), hi)) * h
    assert spec["minMember"] == workers + 1

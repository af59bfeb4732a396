"""The adapter registry and the shared conversion kit."""

from __future__ import annotations

from fractions import Fraction

import pytest

from stromboli.integrations import registry
from stromboli.integrations.common import (
    Context,
    ConversionError,
    Resources,
    apply_mutation,
    bounded_name,
    format_quantity,
    mutation,
)
from stromboli.integrations.jobset.lws import LeaderWorkerSetAdapter
from stromboli.integrations.kubeflow.mpi import MPIJobAdapter
from stromboli.integrations.kubeflow.training import TrainingOperatorAdapter
from stromboli.integrations.kuberay.convert import RayClusterAdapter

from .kit import obj


@pytest.mark.parametrize(
    ("api_version", "kind", "framework"),
    [
        ("kubeflow.org/v1", "PyTorchJob", "kubeflow-training-operator"),
        ("kubeflow.org/v1", "MPIJob", "kubeflow-training-operator"),
        ("kubeflow.org/v2beta1", "MPIJob", "kubeflow-mpi-operator"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob", "kubeflow-trainer"),
        ("ray.io/v1", "RayJob", "kuberay"),
        ("sparkoperator.k8s.io/v1beta2", "SparkApplication", "spark-operator"),
        ("argoproj.io/v1alpha1", "Workflow", "argo-workflows"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "jobset"),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkerset"),
    ],
)
def test_adapter_for(api_version: str, kind: str, framework: str) -> None:
    assert registry.adapter_for(api_version, kind).framework == framework


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("kubeflow.org/v2", "PyTorchJob"),
        ("apps/v1", "Deployment"),
        ("v1", "Pod"),
        (None, "X"),
        ("ray.io", 3),
    ],
)
def test_no_adapter(api_version: object, kind: object) -> None:
    assert registry.adapter_for(api_version, kind) is None


def test_group_name_for_pod_follows_the_owner() -> None:
    job = obj("kubeflow.org/v1", "PyTorchJob", "train", {})
    assert registry.group_name_for_pod({}, job) == "train"
    rc = obj("ray.io/v1", "RayCluster", "rc", {})
    assert registry.group_name_for_pod({}, rc) == "ray-rc-pg"
    app = obj("sparkoperator.k8s.io/v1beta2", "SparkApplication", "pi", {})
    assert registry.group_name_for_pod({}, app) == "spark-pi-pg"
    native = {"metadata": {"labels": {"spark-role": "executor", "spark-app-selector": "spark-1"}}}
    assert registry.group_name_for_pod(native, None) == "spark-1-podgroup"
    operator_pod = {
        "metadata": {
            "labels": {**native["metadata"]["labels"], "sparkoperator.k8s.io/app-name": "pi"}
        }
    }
    assert registry.group_name_for_pod(operator_pod, None) is None
    assert registry.group_name_for_pod({}, obj("apps/v1", "ReplicaSet", "rs", {})) is None


def test_every_adapter_names_the_object_in_its_errors() -> None:
    for adapter in (
        TrainingOperatorAdapter(),
        MPIJobAdapter(),
        RayClusterAdapter(),
        LeaderWorkerSetAdapter(),
    ):
        with pytest.raises(ConversionError) as info:
            adapter.convert(obj("x/v1", "Thing", "broken", {"bad": 1}))
        assert "Thing ns/broken" in str(info.value)
        with pytest.raises(ConversionError):
            adapter.convert(["not", "an", "object"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [
        ("cpu", Fraction(3), "3"),
        ("cpu", Fraction(7, 2), "3500m"),
        ("cpu", Fraction(1, 10**6), "1u"),
        ("memory", Fraction(4296 * 2**20), "4296Mi"),
        ("memory", Fraction(1536, 1000), "1536m"),
        ("memory", Fraction(10**9), "1000000000"),
        ("nvidia.com/gpu", Fraction(8), "8"),
        ("nvidia.com/gpu", Fraction(1, 2), "500m"),
    ],
)
def test_format_quantity(name: str, amount: Fraction, text: str) -> None:
    assert format_quantity(name, amount) == text


def test_resources_refuse_negative_and_unbounded_amounts() -> None:
    with pytest.raises(ConversionError, match="greater than or equal to 0"):
        Resources.parse({"cpu": "-1"}, "spec.x")
    with pytest.raises(ConversionError) as info:
        Resources.parse({"memory": "1e309"}, "spec.x")
    assert info.value.field == "spec.x.memory"
    total = Resources.parse({"cpu": "9e12"}, "a")
    total.add(Resources.parse({"cpu": "9e12"}, "a"), 1000, "spec.total")  # 9.009e15 still fits
    with pytest.raises(ConversionError, match="largest quantity") as info:
        total.add(Resources.parse({"cpu": "9e12"}, "a"), 1000, "spec.total")
    assert info.value.field == "spec.total"


def test_bounded_name() -> None:
    assert bounded_name("argo-", "wf", "-pg") == "argo-wf-pg"
    long = bounded_name("argo-", "w" * 300, "-pg")
    assert len(long) == 253 and long.startswith("argo-w") and long.endswith("-pg")
    assert long != bounded_name("argo-", "w" * 299 + "x", "-pg")


def test_apply_mutation_copies_and_merges() -> None:
    pod = {
        "metadata": {"annotations": {"keep": "1"}, "labels": {"a": "b"}},
        "spec": {"containers": []},
    }
    change = mutation("worker", "g", {}, "spec", labels={"volcano.sh/queue-name": "q"})
    result = apply_mutation(pod, change)
    assert result["metadata"]["annotations"] == {
        "keep": "1",
        "scheduling.k8s.io/group-name": "g",
        "volcano.sh/task-spec": "worker",
    }
    assert result["metadata"]["labels"] == {"a": "b", "volcano.sh/queue-name": "q"}
    assert result["spec"]["schedulerName"] == "volcano"
    assert pod == {
        "metadata": {"annotations": {"keep": "1"}, "labels": {"a": "b"}},
        "spec": {"containers": []},
    }


def test_context_defaults_are_empty() -> None:
    context = Context()
    assert dict(context.existing) == {} and list(context.related_of(["Pod"])) == []

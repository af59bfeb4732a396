"""The kind table and ``validate_object``, the entry point of the loader and the webhook."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from stromboli.core.api.registry import (
    KINDS,
    InvalidObjectError,
    KindInfo,
    field_path,
    kind_by_plural,
    kind_info,
    known_kinds,
    model_for,
    register_kind,
    validate_object,
)

from . import samples

# --- Kind table ----------------------------------------------------------------------------------


def test_kind_info_fields() -> None:
    info = kind_info("scheduling.volcano.sh/v1beta1", "PodGroup")
    assert info == KindInfo(
        api_version="scheduling.volcano.sh/v1beta1",
        kind="PodGroup",
        plural="podgroups",
        namespaced=True,
        status_subresource=False,
        short_names=("pg", "podgroup-v1beta1"),
    )
    assert info.group == "scheduling.volcano.sh"
    assert info.version == "v1beta1"


@pytest.mark.parametrize(
    ("api_version", "kind", "plural", "namespaced", "status", "short_names"),
    [
        ("scheduling.volcano.sh/v1beta1", "Queue", "queues", False, True, ("q", "queue-v1beta1")),
        ("batch.volcano.sh/v1alpha1", "Job", "jobs", True, True, ("vcjob", "vj")),
        ("batch.volcano.sh/v1alpha1", "CronJob", "cronjobs", True, True, ("cronvcjob", "cronvj")),
        ("bus.volcano.sh/v1alpha1", "Command", "commands", True, False, ()),
        ("flow.volcano.sh/v1alpha1", "JobFlow", "jobflows", True, True, ("jf",)),
        ("flow.volcano.sh/v1alpha1", "JobTemplate", "jobtemplates", True, True, ("jt",)),
        ("topology.volcano.sh/v1alpha1", "HyperNode", "hypernodes", False, True, ("hn",)),
        (
            "nodeinfo.volcano.sh/v1alpha1",
            "Numatopology",
            "numatopologies",
            False,
            False,
            ("numatopo",),
        ),
        ("v1", "Pod", "pods", True, True, ("po",)),
        ("v1", "Node", "nodes", False, True, ("no",)),
        ("v1", "Namespace", "namespaces", False, True, ("ns",)),
        ("v1", "Event", "events", True, False, ("ev",)),
        ("events.k8s.io/v1", "Event", "events", True, False, ("ev",)),
        ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False, False, ("pc",)),
        ("v1", "ResourceQuota", "resourcequotas", True, True, ("quota",)),
        ("v1", "ConfigMap", "configmaps", True, False, ("cm",)),
        ("v1", "Service", "services", True, True, ("svc",)),
        ("v1", "Secret", "secrets", True, False, ()),
        ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, True, ("pvc",)),
        ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True, True, ("pdb",)),
        ("coordination.k8s.io/v1", "Lease", "leases", True, False, ()),
        ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True, False, ("netpol",)),
        ("apps/v1", "Deployment", "deployments", True, True, ("deploy",)),
        ("apps/v1", "ReplicaSet", "replicasets", True, True, ("rs",)),
        ("apps/v1", "StatefulSet", "statefulsets", True, True, ("sts",)),
        ("batch/v1", "Job", "jobs", True, True, ()),
    ],
)
def test_table_entries(
    api_version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    status: bool,
    short_names: tuple[str, ...],
) -> None:
    info = kind_info(api_version, kind)
    assert info is not None
    assert (info.plural, info.namespaced, info.status_subresource) == (plural, namespaced, status)
    assert info.short_names == short_names
    assert kind_by_plural(info.group, plural) is info


def test_kinds_are_unique() -> None:
    keys = [(info.api_version, info.kind) for info in KINDS]
    assert len(keys) == len(set(keys))
    plurals = [(info.group, info.plural) for info in KINDS]
    assert len(plurals) == len(set(plurals))


def test_same_kind_in_two_groups_is_two_entries() -> None:
    volcano = kind_info("batch.volcano.sh/v1alpha1", "Job")
    kubernetes = kind_info("batch/v1", "Job")
    assert volcano is not None and kubernetes is not None and volcano is not kubernetes
    assert kind_by_plural("batch", "jobs") is kubernetes
    assert kind_by_plural("batch.volcano.sh", "jobs") is volcano
    assert kind_by_plural("", "events") is kind_info("v1", "Event")
    assert kind_by_plural("events.k8s.io", "events") is kind_info("events.k8s.io/v1", "Event")


def test_unknown_lookups_return_none() -> None:
    assert kind_info("v1", "Nope") is None
    assert kind_info("v2", "Pod") is None
    assert kind_by_plural("", "nopes") is None
    assert model_for("v1", "ConfigMap") is None
    assert model_for("v1", "Pod") is not None


def test_kind_info_is_immutable() -> None:
    info = KINDS[0]
    with pytest.raises(AttributeError):
        info.plural = "x"  # type: ignore[misc]


def test_register_kind() -> None:
    info = KindInfo("ray.io/v1", "RayCluster", "rayclusters", True, True, ())
    try:
        register_kind(info)
        assert kind_info("ray.io/v1", "RayCluster") is info
        assert kind_by_plural("ray.io", "rayclusters") is info
        assert info in known_kinds()
        out = validate_object(
            {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"}}
        )
        assert out["kind"] == "RayCluster"
    finally:
        from stromboli.core.api import registry

        registry._BY_KIND.pop(("ray.io/v1", "RayCluster"), None)
        registry._BY_PLURAL.pop(("ray.io", "rayclusters"), None)


# --- validate_object -----------------------------------------------------------------------------


@pytest.mark.parametrize("sample", samples.ALL, ids=lambda s: s["kind"])
def test_every_sample_validates_to_json(sample: dict[str, Any]) -> None:
    out = validate_object(copy.deepcopy(sample))
    assert out["apiVersion"] == sample["apiVersion"]
    assert out["kind"] == sample["kind"]
    assert json.loads(json.dumps(out)) == out
    assert validate_object(out) == out  # idempotent


def test_input_is_not_modified() -> None:
    sample = copy.deepcopy(samples.QUEUE)
    sample["spec"].pop("weight")
    before = copy.deepcopy(sample)
    out = validate_object(sample)
    assert sample == before
    assert out["spec"]["weight"] == 1


def test_defaults_applied() -> None:
    out = validate_object(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
        }
    )
    assert out == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"queue": "default"},
    }


def test_job_defaults_applied() -> None:
    out = validate_object(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"tasks": [{"replicas": 1, "template": {}}]},
        }
    )
    assert out["spec"] == {
        "tasks": [{"replicas": 1, "template": {}}],
        "queue": "default",
        "maxRetry": 3,
    }


def test_unknown_metadata_and_free_form_parts_kept() -> None:
    out = validate_object(samples.JOB)
    template = out["spec"]["tasks"][0]["template"]
    assert template == samples.POD_TEMPLATE
    assert template["metadata"]["creationTimestamp"] is None
    pod = validate_object(samples.POD)
    assert pod["metadata"]["managedFields"] == [{"manager": "kubectl"}]


def test_known_kind_without_model_keeps_everything() -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "a"},
        "data": {"volcano-scheduler.conf": "actions: enqueue"},
    }
    assert validate_object(cm) == cm


def test_known_kind_without_model_still_checks_metadata() -> None:
    with pytest.raises(InvalidObjectError, match=r'ConfigMap "Bad": metadata\.name: '):
        validate_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad"}})


def test_error_message_names_where_kind_name_and_path() -> None:
    obj = copy.deepcopy(samples.PODGROUP)
    obj["spec"]["minMember"] = -1
    with pytest.raises(InvalidObjectError) as info:
        validate_object(obj, "examples/x.yaml document 3")
    assert str(info.value) == (
        'examples/x.yaml document 3: PodGroup "pg1": '
        "spec.minMember: Input should be greater than or equal to 0"
    )
    assert info.value.where == "examples/x.yaml document 3"
    assert info.value.kind == "PodGroup"
    assert info.value.name == "pg1"
    assert info.value.problems == (
        ("spec.minMember", "Input should be greater than or equal to 0"),
    )


def test_error_without_where_starts_with_the_kind() -> None:
    obj = copy.deepcopy(samples.QUEUE)
    obj["spec"]["capability"]["cpu"] = "abc"
    with pytest.raises(InvalidObjectError) as info:
        validate_object(obj)
    assert str(info.value).startswith(
        "Queue \"research\": spec.capability.cpu: 'abc' is not a valid quantity"
    )


def test_typo_reported_as_unknown_field() -> None:
    obj = copy.deepcopy(samples.PODGROUP)
    obj["spec"]["minMembr"] = obj["spec"].pop("minMember")
    with pytest.raises(InvalidObjectError, match=r'PodGroup "pg1": spec\.minMembr: unknown field$'):
        validate_object(obj, "f.yaml")


def test_list_indices_in_paths() -> None:
    obj = copy.deepcopy(samples.JOB)
    obj["spec"]["tasks"][1]["replicas"] = -4
    with pytest.raises(InvalidObjectError, match=r"spec\.tasks\[1\]\.replicas: "):
        validate_object(obj)


def test_several_problems_reported_together() -> None:
    obj = copy.deepcopy(samples.QUEUE)
    obj["spec"]["weight"] = 0
    obj["spec"]["capability"]["memory"] = "lots"
    with pytest.raises(InvalidObjectError) as info:
        validate_object(obj)
    paths = [path for path, _ in info.value.problems]
    assert paths == ["spec.weight", "spec.capability.memory"]
    assert "; " in str(info.value)


def test_invalid_object_error_is_a_value_error() -> None:
    assert issubclass(InvalidObjectError, ValueError)


def test_generate_name_shown_when_no_name() -> None:
    obj = copy.deepcopy(samples.COMMAND)
    obj["action"] = 3
    with pytest.raises(InvalidObjectError, match=r'Command "mpi-job-abortjob-\*": action: '):
        validate_object(obj)


def test_missing_name_reported() -> None:
    with pytest.raises(
        InvalidObjectError, match=r'^w: Queue "<unnamed>": metadata\.name is required'
    ):
        validate_object({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}, "w")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
            "kind Widget of apiVersion example.com/v1 is not supported",
        ),
        (
            {"apiVersion": "scheduling.volcano.sh/v1", "kind": "Queue"},
            "(known as scheduling.volcano.sh/v1beta1)",
        ),
        ({"kind": "Queue"}, "apiVersion missing"),
        ({"apiVersion": "v1"}, "kind missing"),
        ({"apiVersion": ["v1"], "kind": {"a": 1}}, "apiVersion and kind missing"),
    ],
)
def test_unsupported_kinds(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObjectError) as info:
        validate_object(obj, "file.yaml document 1")
    assert str(info.value).startswith("file.yaml document 1: ")
    assert message in str(info.value)


@pytest.mark.parametrize("obj", [None, [], "kind: Pod", 3])
def test_non_mapping_rejected(obj: Any) -> None:
    with pytest.raises(InvalidObjectError, match="expected a Kubernetes object"):
        validate_object(obj, "doc")


def test_core_v1_pod_quantity_error() -> None:
    obj = copy.deepcopy(samples.POD)
    obj["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1GB"
    with pytest.raises(InvalidObjectError) as info:
        validate_object(obj)
    assert info.value.problems[0][0] == "spec.containers[0].resources.requests.memory"


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        ((), ""),
        (("spec",), "spec"),
        (("spec", "tasks", 0, "replicas"), "spec.tasks[0].replicas"),
        (("items", 2, 0), "items[2][0]"),
        (("metadata", "annotations", "volcano.sh/x"), "metadata.annotations.volcano.sh/x"),
    ],
)
def test_field_path(loc: tuple[int | str, ...], path: str) -> None:
    assert field_path(loc) == path

"""Reading a CustomResourceDefinition: which framework kind it serves (integrations/crds.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.integrations.crds import read_crd
from stromboli.integrations.kinds import FRAMEWORK_KINDS, framework_kind


def crd(
    group: str = "kubeflow.org",
    kind: str = "PyTorchJob",
    plural: str = "pytorchjobs",
    versions: tuple[tuple[str, bool, bool], ...] = (("v1", True, True),),
    established: bool = True,
) -> dict[str, Any]:
    """A CRD as the API server stores it; ``versions``: (name, served, storage)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "uid": "u",
            "resourceVersion": "7",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 10_000},
        },
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural},
            "scope": "Namespaced",
            "versions": [
                {"name": n, "served": s, "storage": t, "schema": {"openAPIV3Schema": {}}}
                for n, s, t in versions
            ],
        },
        "status": {
            "conditions": [
                {"type": "NamesAccepted", "status": "True"},
                {"type": "Established", "status": "True" if established else "False"},
            ]
        },
    }


def test_an_established_framework_crd_is_followed_through_its_storage_version() -> None:
    reading = read_crd(crd())
    assert reading is not None
    assert reading.follow == framework_kind("kubeflow.org/v1", "PyTorchJob")
    assert reading.name == "pytorchjobs.kubeflow.org" and reading.problem == ""


def test_not_yet_established_is_not_followed_and_not_a_problem() -> None:
    reading = read_crd(crd(established=False))
    assert reading is not None and reading.follow is None and reading.problem == ""


def test_other_crds_are_none() -> None:
    assert read_crd(crd("example.com", "Widget", "widgets")) is None
    assert read_crd(crd("kubeflow.org", "Notebook", "notebooks")) is None
    assert read_crd({}) is None


def test_a_storage_version_we_do_not_read_is_a_problem_named() -> None:
    reading = read_crd(crd(versions=(("v1", True, False), ("v2", True, True))))
    assert reading is not None and reading.follow is None
    assert reading.problem == (
        "CRD pytorchjobs.kubeflow.org stores PyTorchJob as kubeflow.org/v2, a version the "
        "adapters do not read (they read kubeflow.org/v1): PyTorchJob is not followed"
    )
    unserved = read_crd(crd(versions=(("v1", False, True),)))
    assert unserved is not None and unserved.follow is None
    assert "does not serve its storage version kubeflow.org/v1" in unserved.problem


def test_mpijob_is_followed_in_the_version_its_operator_stores() -> None:
    mpi = crd("kubeflow.org", "MPIJob", "mpijobs", (("v1", True, False), ("v2beta1", True, True)))
    reading = read_crd(mpi)
    assert reading is not None
    assert reading.follow == framework_kind("kubeflow.org/v2beta1", "MPIJob")
    assert {v.api_version for v in reading.versions} == {"kubeflow.org/v1", "kubeflow.org/v2beta1"}
    training = read_crd(crd("kubeflow.org", "MPIJob", "mpijobs", (("v1", True, True),)))
    assert training is not None
    assert training.follow == framework_kind("kubeflow.org/v1", "MPIJob")


def test_every_framework_kind_is_read_from_its_crd() -> None:
    for info in FRAMEWORK_KINDS:
        reading = read_crd(crd(info.group, info.kind, info.plural, ((info.version, True, True),)))
        assert reading is not None and reading.follow == info, info


_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=12),
    st.sampled_from(["kubeflow.org", "PyTorchJob", "v1", "Established", "True"]),
)
_json = st.recursive(
    _value,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    *("group", "names", "kind", "versions", "name", "served", "storage"),
                    *("conditions", "type", "status", "spec", "metadata"),
                ]
            ),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_json, _json, _json)
def test_a_framework_crd_of_any_shape_is_read_without_error(
    versions: Any, conditions: Any, name: Any
) -> None:
    shape = crd()
    shape["spec"]["versions"] = versions
    shape["status"]["conditions"] = conditions
    shape["metadata"]["name"] = name
    reading = read_crd(shape)
    assert reading is not None
    assert reading.follow in (None, framework_kind("kubeflow.org/v1", "PyTorchJob"))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["spec", "status", "metadata"]), _json, max_size=3))
def test_any_crd_shape_is_read_without_error(shape: dict[str, Any]) -> None:
    reading = read_crd(shape)
    if reading is not None:
        assert reading.follow is None or reading.follow in FRAMEWORK_KINDS

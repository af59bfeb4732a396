"""Enrolment at pod CREATE: who is enrolled, and exactly what is written."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.admission.enrol import (
    ENROLL_LABEL,
    EnrolOptions,
    Gang,
    Lineage,
    Owner,
    enrol_pod,
)
from stromboli.core.admission.resourcegroups import ResourceGroup

GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
TASK = "volcano.sh/task-spec"
MIN = "scheduling.volcano.sh/group-min-member"
ENROLLED = {ENROLL_LABEL: "true"}
OPTIONS = EnrolOptions(exempt_namespaces=frozenset({"kube-system", "volcano-system"}))


def pod(
    scheduler: str | None = None,
    owner: dict | None = None,
    annotations: dict | None = None,
    **spec: Any,
) -> dict:
    meta: dict[str, Any] = {"generateName": "p-", "namespace": "team"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if annotations is not None:
        meta["annotations"] = annotations
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], **spec}
    if scheduler is not None:
        body["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


RS = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "web-5d8",
    "uid": "rs-uid",
    "controller": True,
}


def rs_owner(**annotations: str) -> Owner:
    return Owner("apps/v1", "ReplicaSet", "web-5d8", "rs-uid", annotations)


def enrol(
    body: dict,
    namespace: str = "team",
    labels: dict | None = None,
    ns_annotations: dict | None = None,
    lineage: Lineage | None = None,
    options: EnrolOptions = OPTIONS,
):
    calls: list[int] = []

    def resolve() -> Lineage:
        calls.append(1)
        return lineage or Lineage()

    before = copy.deepcopy(body)
    result = enrol_pod(
        body,
        namespace,
        ENROLLED if labels is None else labels,
        ns_annotations or {},
        options,
        resolve,
    )
    assert body == before  # the input is never changed
    return result, len(calls)


def annotations(result) -> dict:
    return result.pod["metadata"].get("annotations") or {}


def test_a_deployment_pod_gets_scheduler_queue_and_its_replicasets_group() -> None:
    result, looked_up = enrol(pod(owner=RS), lineage=Lineage((rs_owner(),)))
    assert result.enrolled and looked_up == 1
    assert result.pod["spec"]["schedulerName"] == "volcano"
    assert annotations(result) == {GROUP: "podgroup-rs-uid", QUEUE: "default"}


def test_default_scheduler_is_replaced_other_schedulers_are_kept_untouched() -> None:
    result, _ = enrol(pod("default-scheduler", owner=RS))
    assert result.pod["spec"]["schedulerName"] == "volcano"
    body = pod("my-scheduler", owner=RS)
    result, looked_up = enrol(body)
    assert result.pod == body and not result.enrolled and looked_up == 0


def test_a_second_scheduler_name_of_ours_is_kept() -> None:
    options = EnrolOptions(scheduler_names=("volcano", "gpu-sched"))
    result, _ = enrol(pod("gpu-sched", owner=RS), options=options)
    assert result.pod["spec"]["schedulerName"] == "gpu-sched"
    assert annotations(result)[GROUP] == "podgroup-rs-uid"


@pytest.mark.parametrize("namespace", ["kube-system", "volcano-system"])
def test_exempt_namespaces_are_never_touched(namespace: str) -> None:
    group = ResourceGroup("all", "namespace", (namespace,), "volcano", {"pool": "a"})
    options = EnrolOptions(exempt_namespaces=OPTIONS.exempt_namespaces, resource_groups=(group,))
    body = pod(owner=RS)
    result, looked_up = enrol(body, namespace=namespace, options=options)
    assert result.pod == body and looked_up == 0


def test_a_namespace_not_enrolled_is_not_touched() -> None:
    for labels in ({}, {ENROLL_LABEL: "false"}, {ENROLL_LABEL: "True"}):
        body = pod(owner=RS)
        result, looked_up = enrol(body, labels=labels)
        assert result.pod == body and not result.enrolled and looked_up == 0


def test_a_pod_of_our_scheduler_outside_enrolled_namespaces_is_left_to_the_controller() -> None:
    body = pod("volcano", owner=RS)
    result, _ = enrol(body, labels={})
    assert result.pod == body


def test_a_framework_gang_wins_over_the_fallback_and_gives_role_and_queue() -> None:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "train", "uid": "j"}
    lineage = Lineage(
        (Owner("kubeflow.org/v1", "PyTorchJob", "train", "j"),),
        Gang("train", task_spec="worker", queue="research"),
    )
    result, _ = enrol(pod(owner={**job, "controller": True}), lineage=lineage)
    assert annotations(result) == {GROUP: "train", TASK: "worker", QUEUE: "research"}


def test_queue_comes_from_pod_then_gang_then_owner_then_namespace_then_default() -> None:
    ns = {QUEUE: "ns-q"}
    owner = Lineage((rs_owner(**{QUEUE: "owner-q"}),))
    gang = Lineage((rs_owner(**{QUEUE: "owner-q"}),), Gang("g", queue="gang-q"))
    cases = [
        (pod(owner=RS, annotations={QUEUE: "pod-q"}), gang, "pod-q"),
        (pod(owner=RS), gang, "gang-q"),
        (pod(owner=RS), owner, "owner-q"),
        (pod(owner=RS), Lineage((rs_owner(),)), "ns-q"),
    ]
    for body, lineage, queue in cases:
        result, _ = enrol(body, ns_annotations=ns, lineage=lineage)
        assert annotations(result)[QUEUE] == queue
    result, _ = enrol(pod(owner=RS))
    assert annotations(result)[QUEUE] == "default"


def test_keys_the_pod_has_are_kept_so_a_volcano_mode_operator_keeps_its_group() -> None:
    mine = {GROUP: "made-by-operator", TASK: "master", QUEUE: "q"}
    lineage = Lineage((), Gang("train", task_spec="worker", queue="other"))
    result, _ = enrol(pod(owner=RS, annotations=dict(mine)), lineage=lineage)
    assert annotations(result) == mine


def test_group_min_member_of_the_nearest_owner_is_copied_for_fallback_groups() -> None:
    lineage = Lineage(
        (rs_owner(**{MIN: "3"}), Owner("apps/v1", "Deployment", "web", "d", {MIN: "9"}))
    )
    result, _ = enrol(pod(owner=RS), lineage=lineage)
    assert annotations(result)[MIN] == "3"
    deeper = Lineage((rs_owner(), Owner("apps/v1", "Deployment", "web", "d", {MIN: " 4 "})))
    result, _ = enrol(pod(owner=RS), lineage=deeper)
    assert annotations(result)[MIN] == "4"


def test_group_min_member_is_not_copied_into_a_framework_gang() -> None:
    lineage = Lineage((rs_owner(**{MIN: "3"}),), Gang("g"))
    result, _ = enrol(pod(owner=RS), lineage=lineage)
    assert MIN not in annotations(result)


@pytest.mark.parametrize("bad", ["0", "-1", "x", "1e3", "99999999999", "٣", "2147483648", ""])
def test_a_bad_group_min_member_is_a_warning_naming_owner_and_key(bad: str) -> None:
    result, _ = enrol(pod(owner=RS), lineage=Lineage((rs_owner(**{MIN: bad}),)))
    assert MIN not in annotations(result)
    (warning,) = result.warnings
    assert "ReplicaSet web-5d8" in warning and MIN in warning


def test_a_bare_pod_gets_scheduler_and_queue_and_leaves_the_group_to_the_controller() -> None:
    result, _ = enrol(pod())
    assert result.enrolled and result.pod["spec"]["schedulerName"] == "volcano"
    assert annotations(result) == {QUEUE: "default"}


def test_an_owner_reference_that_is_not_a_controller_names_no_group() -> None:
    result, _ = enrol(pod(owner={**RS, "controller": False}))
    assert GROUP not in annotations(result)


@pytest.mark.parametrize(
    "body",
    [
        pod(owner={**RS, "kind": "DaemonSet"}),
        pod(annotations={"kubernetes.io/config.mirror": "x"}),
        pod(owner=RS, nodeName="node-1"),
    ],
    ids=["daemonset", "mirror", "bound"],
)
def test_pods_that_must_not_wait_for_a_gang_are_not_enrolled(body: dict) -> None:
    result, looked_up = enrol(body)
    assert result.pod == body and not result.enrolled and looked_up == 0


def test_a_resource_group_enrols_a_pod_of_a_namespace_not_enrolled() -> None:
    group = ResourceGroup("gpu", "namespace", ("team",), "volcano", {"pool": "gpu"})
    options = EnrolOptions(resource_groups=(group,))
    result, _ = enrol(pod(owner=RS), labels={}, options=options)
    assert result.enrolled and result.resource_group == "gpu"
    assert result.pod["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert annotations(result)[GROUP] == "podgroup-rs-uid"


def test_a_resource_group_choosing_another_scheduler_is_applied_but_not_enrolled() -> None:
    group = ResourceGroup("mgmt", "namespace", ("team",), "default-scheduler", {"pool": "m"})
    options = EnrolOptions(resource_groups=(group,))
    result, looked_up = enrol(pod(owner=RS), options=options)  # even in an enrolled namespace
    assert not result.enrolled and looked_up == 0
    assert result.pod["spec"]["schedulerName"] == "default-scheduler"
    assert result.pod["spec"]["nodeSelector"] == {"pool": "m"}
    assert "annotations" not in result.pod["metadata"]


def test_a_resource_group_without_a_scheduler_enrols_only_pods_of_ours() -> None:
    group = ResourceGroup("cpu", "namespace", ("team",), "", {"pool": "cpu"})
    options = EnrolOptions(resource_groups=(group,))
    result, _ = enrol(pod(owner=RS), labels={}, options=options)
    assert not result.enrolled and result.pod["spec"]["nodeSelector"] == {"pool": "cpu"}
    result, _ = enrol(pod("volcano", owner=RS), labels={}, options=options)
    assert result.enrolled


# --- properties ---------------------------------------------------------------------------------

names = st.text(st.characters(codec="ascii"), max_size=12)
string_maps = st.dictionaries(names, names, max_size=4)


@st.composite
def pods(draw: st.DrawFn) -> dict:
    owner = draw(
        st.none()
        | st.fixed_dictionaries(
            {
                "apiVersion": st.sampled_from(["apps/v1", "batch/v1", "kubeflow.org/v1"]),
                "kind": st.sampled_from(["ReplicaSet", "Job", "DaemonSet", "PyTorchJob"]),
                "name": names,
                "uid": names,
                "controller": st.booleans(),
            }
        )
    )
    scheduler = draw(st.none() | st.sampled_from(["", "default-scheduler", "volcano", "other"]))
    keys = st.sampled_from([GROUP, QUEUE, TASK, MIN, "a", "kubernetes.io/config.mirror"])
    return pod(scheduler, owner, draw(st.none() | st.dictionaries(keys, names, max_size=3)))


@settings(max_examples=300, deadline=None)
@given(pods(), string_maps, st.booleans(), st.none() | st.builds(Gang, names, names, names))
def test_enrolment_only_adds_and_never_overwrites(
    body: dict, ns_annotations: dict, enrolled: bool, gang: Gang | None
) -> None:
    labels = ENROLLED if enrolled else {}
    result, _ = enrol(body, labels=labels, ns_annotations=ns_annotations, lineage=Lineage((), gang))
    before = body["metadata"].get("annotations") or {}
    after = annotations(result)
    assert {key: after[key] for key in before} == before
    assert set(after) - set(before) <= {GROUP, QUEUE, TASK, MIN}
    assert {k: v for k, v in result.pod["spec"].items() if k != "schedulerName"} == {
        k: v for k, v in body["spec"].items() if k != "schedulerName"
    }
    if not enrolled:
        assert result.pod == body
    if result.pod["spec"].get("schedulerName") != body["spec"].get("schedulerName"):
        assert body["spec"].get("schedulerName") in (None, "", "default-scheduler")
        assert result.pod["spec"]["schedulerName"] == "volcano"

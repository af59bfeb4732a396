from __future__ import annotations

import pytest

from stromboli.core.doctor import operators
from stromboli.core.doctor.findings import Severity

from .builders import deployment, healthy_view, namespace

KUBERAY = "quay.io/kuberay/operator:v1.5.0"
TRAINING = "kubeflow/training-operator:v1-855e096"
SPARK = "docker.io/kubeflow/spark-operator/controller:2.5.2"
MPI = "mpioperator/mpi-operator:0.6.0"
ARGO = "quay.io/argoproj/workflow-controller:v4.0.5"
TRAINER = "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.0.0"


def verdict(image: str, args: list[str], enrolled: tuple[str, ...] = (), used=None):  # type: ignore[no-untyped-def]
    view = healthy_view()
    view.deployments.append(deployment("op", namespace="ops", image=image, args=args))
    view.namespaces += [namespace(n, **{"stromboli.dev/enroll": "true"}) for n in enrolled]
    view.framework_namespaces = used or {}
    [finding] = operators.check(view)
    return finding


@pytest.mark.parametrize(
    ("image", "args", "volcano"),
    [
        (KUBERAY, ["--batch-scheduler=volcano"], True),
        (KUBERAY, ["--batch-scheduler", "volcano"], True),
        (KUBERAY, ["--enable-batch-scheduler"], True),
        (KUBERAY, ["--enable-batch-scheduler=true"], True),
        (KUBERAY, ["--enable-batch-scheduler=false"], False),
        (KUBERAY, ["--batch-scheduler=yunikorn"], False),
        (KUBERAY, [], False),
        (TRAINING, ["--gang-scheduler-name=volcano"], True),
        (TRAINING, ["--gang-scheduler-name=Volcano"], True),
        (TRAINING, ["--gang-scheduler-name=scheduler-plugins"], False),
        (TRAINING, [], False),
        (MPI, ["--gang-scheduling=volcano"], True),
        (MPI, ["--gang-scheduling=none"], False),
        (SPARK, ["controller", "start", "--enable-batch-scheduler=true"], True),
        (SPARK, ["--enable-batch-scheduler=true", "--default-batch-scheduler=volcano"], True),
        (SPARK, ["controller", "start"], False),
        (ARGO, [], False),
        (TRAINER, [], False),
    ],
)
def test_volcano_mode_from_the_command_line(image: str, args: list[str], volcano: bool) -> None:
    finding = verdict(image, args)
    assert (finding.severity is Severity.OK) is volcano
    assert "Deployment ops/op" in finding.message


def test_the_last_flag_wins_as_in_go() -> None:
    assert (
        verdict(KUBERAY, ["--batch-scheduler=volcano", "--batch-scheduler=kai-scheduler"]).severity
        is Severity.FAIL
    )


def test_without_the_flag_and_no_enrolment_the_fix_names_the_flag() -> None:
    finding = verdict(TRAINING, [])
    assert finding.message == (
        "training-operator Deployment ops/op: no --gang-scheduler-name=volcano, and no namespace "
        "is enrolled: its workloads get no PodGroups"
    )
    assert finding.fix.startswith(
        "add --gang-scheduler-name=volcano to its args, or run: kubectl label"
    )


def test_without_the_flag_its_enrolled_workloads_are_fine_and_said_so() -> None:
    finding = verdict(KUBERAY, [], enrolled=("ml",), used={"RayCluster": {"ml"}})
    assert finding.severity is Severity.OK
    assert "its workloads' namespaces (ml) are enrolled" in finding.message


def test_without_the_flag_workloads_outside_enrolled_namespaces_fail_naming_them() -> None:
    finding = verdict(KUBERAY, [], enrolled=("ml",), used={"RayJob": {"ml", "research"}})
    assert finding.severity is Severity.FAIL
    assert "its workloads in research are not enrolled" in finding.message
    assert "kubectl label namespace research stromboli.dev/enroll=true" in finding.fix


def test_without_workloads_enrolled_namespaces_are_named() -> None:
    finding = verdict(ARGO, [], enrolled=("pipelines",))
    assert finding.severity is Severity.OK
    assert "enrolled namespaces (pipelines) only" in finding.message


def test_argo_has_no_flag_to_suggest() -> None:
    finding = verdict(ARGO, [])
    assert finding.severity is Severity.FAIL
    assert finding.fix.startswith("run: kubectl label namespace")


def test_the_spark_operators_webhook_is_not_its_controller() -> None:
    view = healthy_view()
    view.deployments.append(deployment("w", image=SPARK, args=["webhook", "start"]))
    assert [f.message for f in operators.check(view)] == ["no framework operator Deployment found"]


def test_other_deployments_are_not_operators() -> None:
    view = healthy_view()
    findings = operators.check(view)
    assert [f.message for f in findings] == ["no framework operator Deployment found"]


def test_malformed_deployments_do_not_crash() -> None:
    view = healthy_view()
    view.deployments += [
        {"metadata": None},
        {"spec": {"template": {"spec": {"containers": "x"}}}},
        {"spec": {"template": {"spec": {"containers": [{"image": 5, "args": [1, None]}]}}}},
        {"spec": {"template": {"spec": {"containers": [{"image": KUBERAY, "args": "x"}]}}}},
    ]
    [finding] = operators.check(view)
    assert finding.severity is Severity.FAIL
    assert "(no name)" in finding.message

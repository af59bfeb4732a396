"""Framework operators: each one installed runs in its Volcano mode, or the namespaces of its
workloads are enrolled, so its pods join PodGroups either way (reference integrations.md §11
for each flag)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stromboli.core.doctor.enrolment import enrolled_namespaces
from stromboli.core.doctor.findings import Finding, fail, ok
from stromboli.core.doctor.view import (
    ClusterView,
    container_args,
    containers,
    flag_value,
    named,
    text,
)

CHECK = "operators"
VOLCANO = "volcano"

#: A verdict on an operator's command line: (in Volcano mode, what it says).
Mode = tuple[bool, str]


def _truthy(value: str) -> bool:
    return value.lower() in ("true", "1", "t", "yes")


def kuberay_mode(args: list[str]) -> Mode:
    chosen = flag_value(args, "--batch-scheduler")
    if chosen:
        if chosen.lower() == VOLCANO:
            return True, "--batch-scheduler=volcano"
        return False, f"--batch-scheduler={chosen} (another batch scheduler)"
    if _truthy(flag_value(args, "--enable-batch-scheduler", "false")):
        return True, "--enable-batch-scheduler (deprecated; --batch-scheduler=volcano replaces it)"
    return False, "neither --batch-scheduler=volcano nor --enable-batch-scheduler"


def training_operator_mode(args: list[str]) -> Mode:
    chosen = flag_value(args, "--gang-scheduler-name")
    if chosen.lower() == VOLCANO:
        return True, "--gang-scheduler-name=volcano"
    if chosen:
        return False, f"--gang-scheduler-name={chosen} (scheduler-plugins PodGroups, not Volcano's)"
    return False, "no --gang-scheduler-name=volcano"


def mpi_operator_mode(args: list[str]) -> Mode:
    chosen = flag_value(args, "--gang-scheduling")
    if chosen.lower() == VOLCANO:
        return True, "--gang-scheduling=volcano"
    return False, f"--gang-scheduling={chosen}" if chosen else "no --gang-scheduling=volcano"


def spark_operator_mode(args: list[str]) -> Mode:
    if not _truthy(flag_value(args, "--enable-batch-scheduler", "false")):
        return False, "no --enable-batch-scheduler"
    default = flag_value(args, "--default-batch-scheduler")
    if default.lower() == VOLCANO:
        return True, "--enable-batch-scheduler --default-batch-scheduler=volcano"
    return True, (
        "--enable-batch-scheduler (applications need spec.batchScheduler: volcano, or add "
        "--default-batch-scheduler=volcano)"
    )


def no_volcano_mode(what: str) -> Callable[[list[str]], Mode]:
    def mode(args: list[str]) -> Mode:
        return False, what

    return mode


@dataclass(frozen=True, slots=True)
class Operator:
    title: str
    images: tuple[str, ...]
    """Substrings of a container image that identify it."""
    kinds: tuple[str, ...]
    mode: Callable[[list[str]], Mode]
    flag: str
    """What to add for Volcano mode ("" when it has none)."""
    other_roles: tuple[str, ...] = ()
    """Sub-commands of the same image that are not the operator (the Spark operator's
    webhook runs from its image too)."""


OPERATORS: tuple[Operator, ...] = (
    Operator(
        "KubeRay operator",
        ("kuberay/operator", "kuberay-operator"),
        ("RayCluster", "RayJob", "RayService"),
        kuberay_mode,
        "--batch-scheduler=volcano",
    ),
    Operator(
        "training-operator",
        ("kubeflow/training-operator", "training-operator"),
        ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"),
        training_operator_mode,
        "--gang-scheduler-name=volcano",
    ),
    Operator(
        "MPI operator",
        ("mpioperator/mpi-operator", "mpi-operator"),
        ("MPIJob",),
        mpi_operator_mode,
        "--gang-scheduling=volcano",
    ),
    Operator(
        "Spark operator",
        ("spark-operator",),
        ("SparkApplication",),
        spark_operator_mode,
        "--enable-batch-scheduler=true --default-batch-scheduler=volcano",
        other_roles=("webhook",),
    ),
    Operator(
        "Kubeflow Trainer",
        ("kubeflow/trainer-controller-manager", "trainer-controller-manager"),
        ("TrainJob",),
        no_volcano_mode("no operator flag (Volcano is chosen per runtime: podGroupPolicy.volcano)"),
        "",
    ),
    Operator(
        "Argo workflow-controller",
        ("argoproj/workflow-controller", "workflow-controller"),
        ("Workflow",),
        no_volcano_mode("no Volcano mode (Argo makes no PodGroups)"),
        "",
    ),
)


def identify(container: Mapping[str, Any]) -> Operator | None:
    image = text(container.get("image")).lower()
    args = container_args(container)
    for operator in OPERATORS:
        if any(part in image for part in operator.images):
            return None if any(role in args for role in operator.other_roles) else operator
    return None


def check_operator(
    view: ClusterView, deployment: Any, operator: Operator, args: list[str], enrolled: set[str]
) -> Finding:
    what = f"{operator.title} Deployment {named(deployment)}"
    volcano, said = operator.mode(args)
    if volcano:
        return ok(CHECK, f"{what} runs in Volcano mode ({said})")
    used = set().union(*(view.framework_namespaces.get(kind, set()) for kind in operator.kinds))
    label = "kubectl label namespace {} stromboli.dev/enroll=true"
    add = f"add {operator.flag} to its args, or " if operator.flag else ""
    if used:
        outside = sorted(used - enrolled)
        if not outside:
            return ok(
                CHECK,
                f"{what}: {said}; its workloads' namespaces ({', '.join(sorted(used))}) are "
                "enrolled, so their pods join PodGroups at admission",
            )
        return fail(
            CHECK,
            f"{what}: {said}, and its workloads in {', '.join(outside)} are not enrolled: "
            "they are not gang-scheduled",
            f"{add}run: {label.format(' '.join(outside))}",
        )
    if enrolled:
        return ok(
            CHECK,
            f"{what}: {said}; its workloads are gang-scheduled in the enrolled namespaces "
            f"({', '.join(sorted(enrolled))}) only",
        )
    return fail(
        CHECK,
        f"{what}: {said}, and no namespace is enrolled: its workloads get no PodGroups",
        f"{add}run: {label.format('<namespace>')}",
    )


def check(view: ClusterView) -> list[Finding]:
    enrolled = enrolled_namespaces(view)
    findings: list[Finding] = []
    for deployment in view.deployments:
        for container in containers(deployment):
            operator = identify(container)
            if operator is not None:
                args = container_args(container)
                findings.append(check_operator(view, deployment, operator, args, enrolled))
                break
    if not findings:
        findings.append(ok(CHECK, "no framework operator Deployment found"))
    return findings

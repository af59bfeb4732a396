"""The API server's own checks of the workload kinds the simulator runs, in its words.

The simulator's admission pass calls :func:`workload_problems` for Deployments, ReplicaSets,
StatefulSets, batch Jobs and CronJobs, so that a manifest a cluster would refuse (a selector
that does not match its template, a Job whose pods restart ``Always``, a negative count) is a
rejection here too, rather than a workload that silently makes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from stromboli.core.admission.cronjob import schedule_problem
from stromboli.core.api import constants as k
from stromboli.core.cluster.selectors import SelectorError, matches_label_selector

#: (apiVersion, kind) -> the qualified kind the API server names in its refusals.
QUALIFIED: Final[dict[tuple[str, str], str]] = {
    (k.APPS_V1, "Deployment"): "Deployment.apps",
    (k.APPS_V1, "ReplicaSet"): "ReplicaSet.apps",
    (k.APPS_V1, "StatefulSet"): "StatefulSet.apps",
    (k.K8S_BATCH_V1, "Job"): "Job.batch",
    (k.K8S_BATCH_V1, "CronJob"): "CronJob.batch",
}
JOB_RESTART_POLICIES: Final = ("OnFailure", "Never")


def _go_map(labels: Mapping[str, Any]) -> str:
    """Labels as the API server prints a map in an ``Invalid value``."""
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in labels.items()) + "}"


def _counts(spec: Mapping[str, Any], path: str, names: tuple[str, ...]) -> list[str]:
    problems = []
    for name in names:
        value = spec.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(f"{path}.{name}: Invalid value: {value!r}: must be an integer")
        elif value < 0:
            problems.append(
                f"{path}.{name}: Invalid value: {value}: must be greater than or equal to 0"
            )
    return problems


def _selector_problems(spec: Mapping[str, Any], path: str) -> list[str]:
    selector = spec.get("selector")
    if not isinstance(selector, Mapping):
        return [f"{path}.selector: Required value"]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [f"{path}.selector: Invalid value: {{}}: empty selector is invalid for deployment"]
    template = spec.get("template")
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    labels = (meta.get("labels") if isinstance(meta, Mapping) else None) or {}
    if not isinstance(labels, Mapping):
        return [f"{path}.template.metadata.labels: Invalid value: must be a map"]
    try:
        matches = matches_label_selector(selector, {str(a): str(b) for a, b in labels.items()})
    except SelectorError as err:
        return [f"{path}.selector: Invalid value: {err}"]
    if not matches:
        return [
            f"{path}.template.metadata.labels: Invalid value: {_go_map(labels)}: "
            "`selector` does not match template `labels`"
        ]
    return []


def _job_problems(spec: Mapping[str, Any], path: str) -> list[str]:
    problems = _counts(
        spec,
        path,
        ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"),
    )
    template = spec.get("template")
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    policy = pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None
    if policy not in JOB_RESTART_POLICIES:
        problems.append(
            f"{path}.template.spec.restartPolicy: Required value: valid values: "
            + ", ".join(f'"{p}"' for p in JOB_RESTART_POLICIES)
        )
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        problems.append(f"{path}.completions: Required value: when completion mode is Indexed")
    return problems


def workload_problems(obj: Mapping[str, Any]) -> list[str]:
    """Why the API server would refuse to create ``obj``; empty when it would not, or when
    ``obj`` is not one of the workload kinds."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    spec = obj.get("spec")
    if key not in QUALIFIED:
        return []
    if not isinstance(spec, Mapping):
        return ["spec: Required value"]
    if key == (k.K8S_BATCH_V1, "Job"):
        return _job_problems(spec, "spec")
    if key == (k.K8S_BATCH_V1, "CronJob"):
        problem = schedule_problem(spec.get("schedule"))
        job_template = spec.get("jobTemplate")
        job_spec = job_template.get("spec") if isinstance(job_template, Mapping) else None
        problems = [problem] if problem else []
        if not isinstance(job_spec, Mapping):
            return [*problems, "spec.jobTemplate.spec: Required value"]
        return problems + _job_problems(job_spec, "spec.jobTemplate.spec")
    return _counts(spec, "spec", ("replicas", "minReadySeconds")) + _selector_problems(spec, "spec")


def qualified_kind(obj: Mapping[str, Any]) -> str:
    """``Deployment.apps``, ``Job.batch``: how the API server names the kind it refuses."""
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    return QUALIFIED.get(key, key[1])

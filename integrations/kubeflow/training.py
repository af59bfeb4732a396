"""Kubeflow training-operator v1 jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob)
as the operator's ``--gang-scheduler-name=volcano`` mode makes their gangs.

One PodGroup per job, named as the job, owned by it, carrying a copy of its annotations:

- ``minMember`` = ``runPolicy.schedulingPolicy.minAvailable``, else Σ replicas of all types;
- ``queue`` = ``schedulingPolicy.queue``, else the stored PodGroup's, else ``default``
  (the job's ``scheduling.volcano.sh/queue-name`` annotation is copied but not read, as upstream);
- ``priorityClassName`` = ``schedulingPolicy.priorityClass`` (never a pod template's);
- ``minResources`` = ``schedulingPolicy.minResources``, else the first ``minMember`` pods after
  ordering replica types by their PriorityClass value, highest first (ties by type name: Go's
  map order is random there, ours is not); per container its requests, or its limits when it
  has no requests at all.

Pods: ``schedulerName: volcano`` only where none is set, ``scheduling.k8s.io/group-name`` and
``volcano.sh/task-spec`` = the lower-cased replica type. A suspended or finished job has no
PodGroup (the operator deletes it then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stromboli.integrations.common import (
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    Resources,
    add_count,
    boolean,
    container_resources,
    exact_name,
    integer,
    mapping,
    mutation,
    object_name,
    owner_reference,
    pod_template,
    podgroup,
    read_meta,
    sequence,
    settle,
    stored_spec,
    string,
    template_priority_class,
    volcano_network_topology,
)

GROUP = "kubeflow.org"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
FRAMEWORK = "kubeflow-training-operator"

#: The replica-spec field and the replica types each kind accepts (the operator's validation).
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfReplicaSpecs", ("PS", "Worker", "Chief", "Master", "Evaluator")),
    "XGBoostJob": ("xgbReplicaSpecs", ("Master", "Worker")),
    "PaddleJob": ("paddleReplicaSpecs", ("Master", "Worker")),
    "JAXJob": ("jaxReplicaSpecs", ("Worker",)),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica type of a job: its count and pod template, already checked."""

    type: str
    replicas: int
    template: Mapping[str, Any]
    field: str

    @property
    def priority_class(self) -> str | None:
        return template_priority_class(self.template, f"{self.field}.template")


def read_replicas(
    spec: Mapping[str, Any], field: str, allowed: Sequence[str], default_replicas: Mapping[str, int]
) -> list[Replica]:
    """The replica specs at ``spec[field]``; unknown types and missing templates are refused."""
    specs = mapping(spec.get(field), f"spec.{field}")
    if not specs:
        raise ConversionError(f"spec.{field}", "at least one replica type is required")
    replicas = []
    for rtype, value in specs.items():
        where = f"spec.{field}.{rtype}"
        if rtype not in allowed:
            raise ConversionError(
                where, f"unknown replica type; expected one of {', '.join(allowed)}"
            )
        value = mapping(value, where)
        count = integer(value.get("replicas"), f"{where}.replicas", default_replicas.get(rtype, 1))
        template = pod_template(value.get("template"), f"{where}.template")
        replicas.append(Replica(rtype, count, template, where))
    return replicas


def first_pods_resources(
    replicas: Sequence[Replica], min_member: int, priority_classes: Mapping[str, int]
) -> Resources:
    """Σ resources of the first ``min_member`` pods, highest-priority replica types first.

    ``replicas`` must already be in tie-break order; the sort is stable.
    """
    ordered = sorted(replicas, key=lambda r: -priority_classes.get(r.priority_class or "", 0))
    total = Resources()
    counted = 0
    for replica in ordered:
        pods = min(replica.replicas, max(min_member - counted, 0))
        if not pods:
            continue
        counted += pods
        spec = mapping(replica.template.get("spec"), f"{replica.field}.template.spec")
        containers = f"{replica.field}.template.spec.containers"
        for i, container in enumerate(sequence(spec.get("containers"), containers)):
            where = f"{containers}[{i}]"
            total.add(
                container_resources(mapping(container, where), where, "container"),
                pods,
                "spec.runPolicy.schedulingPolicy.minResources",
            )
    return total


def scheduling_policy(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    run_policy = mapping(spec.get("runPolicy"), "spec.runPolicy")
    return mapping(run_policy.get("schedulingPolicy"), "spec.runPolicy.schedulingPolicy")


def is_suspended(spec: Mapping[str, Any]) -> bool:
    run_policy = mapping(spec.get("runPolicy"), "spec.runPolicy")
    return boolean(run_policy.get("suspend"), "spec.runPolicy.suspend", False)


def is_finished(obj: Mapping[str, Any]) -> bool:
    """A job whose ``Succeeded`` or ``Failed`` condition is true."""
    status = mapping(obj.get("status"), "status")
    for i, cond in enumerate(sequence(status.get("conditions"), "status.conditions")):
        cond = mapping(cond, f"status.conditions[{i}]")
        if cond.get("type") in ("Succeeded", "Failed") and cond.get("status") == "True":
            return True
    return False


class TrainingOperatorAdapter(BaseAdapter):
    """training-operator v1: ``kubeflow.org/v1`` jobs."""

    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        if meta.kind not in KINDS:
            raise ConversionError("kind", f"{meta.kind!r} is not a training-operator v1 job")
        field, allowed = KINDS[meta.kind]
        spec = mapping(obj.get("spec"), "spec")
        replicas = sorted(read_replicas(spec, field, allowed, {}), key=lambda r: r.type)
        name = exact_name(meta.name)
        mutations = [
            mutation(
                r.type.lower(),
                name,
                {JOB_NAME_LABEL: meta.name, REPLICA_TYPE_LABEL: r.type.lower()},
                f"{r.field}.template",
            )
            for r in replicas
        ]
        if is_suspended(spec) or is_finished(obj):
            return Conversion(mutations=tuple(mutations), notes=("job is suspended or finished",))
        policy = scheduling_policy(spec)
        where = "spec.runPolicy.schedulingPolicy"
        total = 0
        for r in replicas:
            total = add_count(total, r.replicas, f"{r.field}.replicas")
        min_member = integer(policy.get("minAvailable"), f"{where}.minAvailable", total)
        if policy.get("minResources") is not None:
            min_resources = Resources.parse(policy.get("minResources"), f"{where}.minResources")
        else:
            min_resources = first_pods_resources(replicas, min_member, context.priority_classes)
        queue = (
            string(policy.get("queue"), f"{where}.queue")
            or string(stored_spec(context, name).get("queue"), "queue")
            or None
        )
        group = podgroup(
            name=name,
            namespace=meta.namespace,
            owner=owner_reference(meta),
            adapter=FRAMEWORK,
            min_member=min_member,
            queue=queue,
            priority_class=string(policy.get("priorityClass"), f"{where}.priorityClass"),
            min_resources=min_resources,
            topology=volcano_network_topology(meta),
            annotations=meta.annotations,
        )
        return settle([group], mutations, context)

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        """The job's name: the PodGroup of every pod the job owns."""
        return object_name(owner)

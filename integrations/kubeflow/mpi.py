"""MPI operator v2 ``MPIJob`` (``kubeflow.org/v2beta1``) as ``--gang-scheduling=volcano`` makes it.

One PodGroup named as the MPIJob, owned by it (no annotations copied):

- ``minMember`` = ``runPolicy.schedulingPolicy.minAvailable``, else workers + 1 (the launcher);
- ``queue`` = ``schedulingPolicy.queue``, else the MPIJob's ``scheduling.volcano.sh/queue-name``
  annotation, else ``default``;
- ``priorityClassName`` = ``schedulingPolicy.priorityClass``, else the launcher's pod template
  class, else the worker's;
- ``minResources`` = ``schedulingPolicy.minResources``, else the first ``minMember`` pods with
  the replica types ordered by PriorityClass value (the launcher first on a tie), per container
  requests or, lacking any, limits.

Pods: ``schedulerName`` always set to ``volcano`` (the operator overwrites it),
``scheduling.k8s.io/group-name``, and ``volcano.sh/task-spec`` = ``launcher`` / ``worker``
(our addition: upstream sets none, and Volcano then treats both roles as one task).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.integrations.common import (
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    Resources,
    add_count,
    exact_name,
    integer,
    mapping,
    mutation,
    object_name,
    owner_reference,
    podgroup,
    read_meta,
    settle,
    string,
    volcano_network_topology,
)
from stromboli.integrations.kubeflow.training import (
    first_pods_resources,
    is_finished,
    is_suspended,
    read_replicas,
    scheduling_policy,
)

API_VERSION = "kubeflow.org/v2beta1"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
FRAMEWORK = "kubeflow-mpi-operator"
REPLICA_TYPES = ("Launcher", "Worker")


class MPIJobAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        if meta.kind != "MPIJob":
            raise ConversionError("kind", f"{meta.kind!r} is not an MPIJob")
        spec = mapping(obj.get("spec"), "spec")
        # The operator defaults the launcher to one pod and the workers to none.
        replicas = read_replicas(spec, "mpiReplicaSpecs", REPLICA_TYPES, {"Worker": 0})
        by_type = {r.type: r for r in replicas}
        if "Launcher" not in by_type:
            raise ConversionError("spec.mpiReplicaSpecs.Launcher", "an MPIJob needs a launcher")
        replicas.sort(key=lambda r: REPLICA_TYPES.index(r.type))
        name = exact_name(meta.name)
        mutations = [
            mutation(
                r.type.lower(),
                name,
                {JOB_NAME_LABEL: meta.name, JOB_ROLE_LABEL: r.type.lower()},
                f"{r.field}.template",
                force_scheduler=True,
            )
            for r in replicas
        ]
        if is_suspended(spec) or is_finished(obj):
            return Conversion(mutations=tuple(mutations), notes=("job is suspended or finished",))
        policy = scheduling_policy(spec)
        where = "spec.runPolicy.schedulingPolicy"
        workers = by_type["Worker"].replicas if "Worker" in by_type else 0
        default_min = add_count(workers, 1, "spec.mpiReplicaSpecs.Worker.replicas")
        min_member = integer(policy.get("minAvailable"), f"{where}.minAvailable", default_min)
        if policy.get("minResources") is not None:
            min_resources = Resources.parse(policy.get("minResources"), f"{where}.minResources")
        else:
            min_resources = first_pods_resources(replicas, min_member, context.priority_classes)
        queue = string(policy.get("queue"), f"{where}.queue") or meta.annotations.get(
            k.QUEUE_NAME_ANNOTATION_KEY
        )
        priority = string(policy.get("priorityClass"), f"{where}.priorityClass")
        for r in replicas:  # launcher first, then worker
            priority = priority or r.priority_class
        group = podgroup(
            name=name,
            namespace=meta.namespace,
            owner=owner_reference(meta),
            adapter=FRAMEWORK,
            min_member=min_member,
            queue=queue,
            priority_class=priority,
            min_resources=min_resources,
            topology=volcano_network_topology(meta),
        )
        return settle([group], mutations, context)

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        return object_name(owner)

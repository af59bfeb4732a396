"""Kubeflow Trainer v2 ``TrainJob`` as its runtime's ``podGroupPolicy.volcano`` makes the gang.

The TrainJob runs as a JobSet built from its (Cluster)TrainingRuntime; the PodGroup is named as
the TrainJob, owned by it (controller, blockOwnerDeletion), and covers every pod of the JobSet:

- ``minMember`` = Σ pods of all replicatedJobs (initializers, launcher and nodes alike), each at
  least 1; the trainer node job (named ``node`` or labelled as the trainer ancestor) runs
  ``spec.trainer.numNodes`` pods, else the runtime's ``mlPolicy.numNodes``;
- ``minResources`` = Σ count × the Kubernetes ``PodRequests`` of the template (requests only,
  the largest init container, overhead); ``spec.trainer.resourcesPerNode`` is *not* applied,
  as upstream (kubeflow/trainer #2980);
- ``queue`` = the ``scheduling.volcano.sh/queue-name`` annotation of the TrainJob's
  ``spec.annotations``, else of the runtime template's metadata (an empty value is refused);
- ``priorityClassName`` = the last replicatedJob pod template that names one;
- ``networkTopology`` = ``podGroupPolicy.volcano.networkTopology``.

Built once: while the TrainJob runs a stored PodGroup of ours keeps its spec; it is recomputed
only while the TrainJob is suspended. When the runtime has ``podGroupPolicy.volcano`` the
Trainer controller makes the PodGroup itself, so the adapter makes none (and adopts the stored
one); pods still get ``schedulerName``, which Trainer does not set, and ``volcano.sh/task-spec``
= the replicatedJob name.

The runtime is read from ``Context.related`` (a ``ClusterTrainingRuntime`` or
``TrainingRuntime`` named by ``spec.runtimeRef``).
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
    NetworkTopology,
    Resources,
    add_count,
    boolean,
    exact_name,
    integer,
    is_ours,
    mapping,
    mutation,
    object_name,
    owner_reference,
    pod_resources,
    podgroup,
    read_meta,
    settle,
    string,
    string_map,
    template_priority_class,
)
from stromboli.integrations.jobset.convert import (
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
    read_replicated_jobs,
)

API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
FRAMEWORK = "kubeflow-trainer"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_NODE = "node"


def find_runtime(trainjob: Mapping[str, Any], namespace: str, context: Context) -> Mapping:
    ref = mapping(mapping(trainjob.get("spec"), "spec").get("runtimeRef"), "spec.runtimeRef")
    name = string(ref.get("name"), "spec.runtimeRef.name")
    if not name:
        raise ConversionError("spec.runtimeRef.name", "is required")
    kind = string(ref.get("kind"), "spec.runtimeRef.kind", "ClusterTrainingRuntime")
    if kind not in RUNTIME_KINDS:
        raise ConversionError("spec.runtimeRef.kind", f"must be one of {', '.join(RUNTIME_KINDS)}")
    for runtime in context.related_of([kind]):
        meta = mapping(runtime.get("metadata"), f"{kind}.metadata")
        if meta.get("name") != name:
            continue
        if kind == "TrainingRuntime" and (meta.get("namespace") or "default") != namespace:
            continue
        return runtime
    raise ConversionError("spec.runtimeRef", f"{kind} {name} was not found")


def volcano_policy(runtime: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``spec.podGroupPolicy.volcano`` of a runtime, None when the runtime does not ask for it."""
    spec = mapping(runtime.get("spec"), "runtime.spec")
    policy = mapping(spec.get("podGroupPolicy"), "runtime.spec.podGroupPolicy")
    if "volcano" not in policy:
        return None
    return mapping(policy.get("volcano"), "runtime.spec.podGroupPolicy.volcano")


def policy_topology(policy: Mapping[str, Any] | None) -> NetworkTopology | None:
    where = "runtime.spec.podGroupPolicy.volcano.networkTopology"
    topology = mapping((policy or {}).get("networkTopology"), where)
    if not topology:
        return None
    mode = string(topology.get("mode"), f"{where}.mode", k.NetworkTopologyMode.HARD)
    if mode not in tuple(k.NetworkTopologyMode):
        raise ConversionError(f"{where}.mode", f"{mode!r} must be 'hard' or 'soft'")
    if topology.get("highestTierAllowed") is None:
        raise ConversionError(f"{where}.highestTierAllowed", "is required with networkTopology")
    tier = integer(topology.get("highestTierAllowed"), f"{where}.highestTierAllowed", 0)
    return NetworkTopology(str(mode), tier)


class TrainJobAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        spec = mapping(obj.get("spec"), "spec")
        runtime = find_runtime(obj, meta.namespace, context)
        runtime_spec = mapping(runtime.get("spec"), "runtime.spec")
        template = mapping(runtime_spec.get("template"), "runtime.spec.template")
        jobs = read_replicated_jobs(
            mapping(template.get("spec"), "runtime.spec.template.spec"),
            "runtime.spec.template.spec",
        )
        trainer = mapping(spec.get("trainer"), "spec.trainer")
        ml_policy = mapping(runtime_spec.get("mlPolicy"), "runtime.spec.mlPolicy")
        num_nodes = trainer.get("numNodes")
        num_field = "spec.trainer.numNodes"
        if num_nodes is None:
            num_nodes, num_field = ml_policy.get("numNodes"), "runtime.spec.mlPolicy.numNodes"
        name = exact_name(meta.name)
        mutations = [
            mutation(
                job.name,
                name,
                {JOBSET_NAME_LABEL: meta.name, REPLICATED_JOB_LABEL: job.name},
                f"{job.field}.template.spec.template",
            )
            for job in jobs
        ]
        total, resources, priority = 0, Resources(), None
        for job in jobs:
            pods = job.pods
            if num_nodes is not None and (
                job.name == TRAINER_NODE or job.labels.get(ANCESTOR_LABEL) == "trainer"
            ):
                pods = integer(num_nodes, num_field, 1)
            pods = max(pods, 1)
            total = add_count(total, pods, f"{job.field}.replicas")
            resources.add(
                pod_resources(
                    mapping(job.template.get("spec"), job.pod_spec_field),
                    job.pod_spec_field,
                    fallback="none",
                    init_containers=True,
                ),
                pods,
                "runtime.spec.template.spec.replicatedJobs",
            )
            where = f"{job.field}.template.spec.template"
            priority = template_priority_class(job.template, where) or priority
        policy = volcano_policy(runtime)
        template_meta = mapping(template.get("metadata"), "runtime.spec.template.metadata")
        queue_keys = {
            **string_map(
                template_meta.get("annotations"), "runtime.spec.template.metadata.annotations"
            ),
            **string_map(spec.get("annotations"), "spec.annotations"),
        }
        queue = queue_keys.get(k.QUEUE_NAME_ANNOTATION_KEY)
        if queue == "":
            raise ConversionError(
                f"spec.annotations[{k.QUEUE_NAME_ANNOTATION_KEY}]", "must not be empty"
            )
        group = podgroup(
            name=name,
            namespace=meta.namespace,
            owner=owner_reference(meta),
            adapter=FRAMEWORK,
            min_member=total,
            queue=queue,
            priority_class=priority,
            min_resources=resources,
            topology=policy_topology(policy),
        )
        stored = context.existing.get(name)
        if policy is not None and (stored is None or not is_ours(stored)):
            # Trainer's volcano plugin makes (or made) this PodGroup: never race it.
            conversion = settle([group], mutations, context) if stored is not None else None
            return Conversion(
                mutations=tuple(mutations),
                adopted=conversion.adopted if conversion else (),
                notes=("the runtime's podGroupPolicy.volcano makes the PodGroup",),
            )
        suspended = boolean(spec.get("suspend"), "spec.suspend", False)
        if stored is not None and is_ours(stored) and not suspended:
            group["spec"] = dict(mapping(stored.get("spec"), "spec"))
        return settle([group], mutations, context)

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        return object_name(owner)

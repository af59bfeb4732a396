"""JobSet (``jobset.x-k8s.io/v1alpha2``) as one gang.

JobSet has no PodGroup support of its own, so the rule is ours, in the training operators'
style: one PodGroup named as the JobSet and owned by it; ``minMember`` = every pod the JobSet
runs at once (Σ replicatedJobs ``replicas`` × pods per Job, pods per Job = ``parallelism``,
capped by ``completions``); ``minResources`` = Σ count × the Kubernetes scheduling request of
the pod template (requests, limits where a request is missing, init containers and overhead);
``queue`` from the JobSet's ``scheduling.volcano.sh/queue-name`` annotation, else label;
``priorityClassName`` the highest-valued class of the pod templates; network topology from
Volcano's ``volcano.sh/network-topology-*`` annotations on the JobSet. Pods get
``volcano.sh/task-spec`` = their replicatedJob name.

A JobSet made by a Kubeflow TrainJob belongs to the TrainJob's gang (Trainer v2's volcano
plugin, ``trainer.py``), so it gets no PodGroup of its own. A suspended or finished JobSet
has none either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stromboli.core.api import constants as k
from stromboli.integrations.common import (
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    Resources,
    add_count,
    boolean,
    exact_name,
    integer,
    labels_of,
    mapping,
    mutation,
    object_name,
    owner_reference,
    pod_resources,
    pod_template,
    podgroup,
    read_meta,
    sequence,
    settle,
    string,
    template_priority_class,
    times,
    volcano_network_topology,
)

API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
FRAMEWORK = "jobset"
TRAINJOB_KIND = "TrainJob"


@dataclass(frozen=True, slots=True)
class ReplicatedJob:
    """One replicatedJob: how many pods it runs at once and their template."""

    name: str
    pods: int
    template: Mapping[str, Any]
    field: str
    labels: Mapping[str, Any]

    @property
    def pod_spec_field(self) -> str:
        return f"{self.field}.template.spec.template.spec"


def read_replicated_jobs(spec: Mapping[str, Any], field: str) -> list[ReplicatedJob]:
    """The replicatedJobs of a JobSet spec at ``field`` (``spec`` or a runtime's template)."""
    items = sequence(spec.get("replicatedJobs"), f"{field}.replicatedJobs")
    if not items:
        raise ConversionError(f"{field}.replicatedJobs", "at least one replicatedJob is required")
    jobs, seen = [], set()
    for i, item in enumerate(items):
        where = f"{field}.replicatedJobs[{i}]"
        item = mapping(item, where)
        name = string(item.get("name"), f"{where}.name")
        if not name:
            raise ConversionError(f"{where}.name", "is required")
        if name in seen:
            raise ConversionError(f"{where}.name", f"{name!r} is used twice")
        seen.add(name)
        replicas = integer(item.get("replicas"), f"{where}.replicas", 1)
        job = mapping(item.get("template"), f"{where}.template")
        job_meta = mapping(job.get("metadata"), f"{where}.template.metadata")
        job_spec = mapping(job.get("spec"), f"{where}.template.spec")
        parallelism = integer(job_spec.get("parallelism"), f"{where}.template.spec.parallelism", 1)
        completions = job_spec.get("completions")
        if completions is not None:
            completions = integer(completions, f"{where}.template.spec.completions", 1)
            parallelism = min(parallelism, completions)
        template = pod_template(job_spec.get("template"), f"{where}.template.spec.template")
        pods = times(replicas, parallelism, f"{where}.replicas")
        labels = mapping(job_meta.get("labels"), f"{where}.template.metadata.labels")
        jobs.append(ReplicatedJob(name, pods, template, where, labels))
    return jobs


def highest_priority_class(
    jobs: Sequence[ReplicatedJob], priority_classes: Mapping[str, int]
) -> str | None:
    """The pod templates' class of the highest value (the first of equals)."""
    best: str | None = None
    for job in jobs:
        name = template_priority_class(job.template, f"{job.field}.template.spec.template")
        if name and (best is None or priority_classes.get(name, 0) > priority_classes.get(best, 0)):
            best = name
    return best


def is_finished(obj: Mapping[str, Any]) -> bool:
    status = mapping(obj.get("status"), "status")
    return bool(string(status.get("terminalState"), "status.terminalState"))


class JobSetAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        spec = mapping(obj.get("spec"), "spec")
        jobs = read_replicated_jobs(spec, "spec")
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
        if _trainjob_owner(obj) is not None:
            return Conversion(notes=("JobSet of a TrainJob: the TrainJob's PodGroup applies",))
        if boolean(spec.get("suspend"), "spec.suspend", False) or is_finished(obj):
            return Conversion(
                mutations=tuple(mutations), notes=("JobSet is suspended or finished",)
            )
        total, resources = 0, Resources()
        for job in jobs:
            total = add_count(total, job.pods, f"{job.field}.replicas")
            pod = pod_resources(
                mapping(job.template.get("spec"), job.pod_spec_field),
                job.pod_spec_field,
                fallback="per-resource",
                init_containers=True,
            )
            resources.add(pod, job.pods, "spec.replicatedJobs")
        queue = meta.annotations.get(k.QUEUE_NAME_ANNOTATION_KEY) or meta.labels.get(
            k.QUEUE_NAME_ANNOTATION_KEY
        )
        group = podgroup(
            name=name,
            namespace=meta.namespace,
            owner=owner_reference(meta),
            adapter=FRAMEWORK,
            min_member=total,
            queue=queue,
            priority_class=highest_priority_class(jobs, context.priority_classes),
            min_resources=resources,
            topology=volcano_network_topology(meta),
        )
        return settle([group], mutations, context)

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        """The JobSet's name, which is also the TrainJob's when a TrainJob made it."""
        return object_name(owner) or labels_of(pod).get(JOBSET_NAME_LABEL)


def _trainjob_owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = mapping(obj.get("metadata"), "metadata")
    for i, ref in enumerate(sequence(meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = mapping(ref, f"metadata.ownerReferences[{i}]")
        if ref.get("kind") == TRAINJOB_KIND and ref.get("controller") is True:
            return ref
    return None

"""LeaderWorkerSet's controller and Kubeflow Trainer's, emulated.

LeaderWorkerSet (``pkg/controllers/leaderworkerset_controller.go``, ``pod_controller.go``):
the leader StatefulSet runs one leader ``<lws>-<group>`` per replica; each leader's worker
StatefulSet runs ``<lws>-<group>-<w>`` for w in 1..size−1, at once (``LeaderCreated``) or
once the leader runs (``LeaderReady``). Every pod is labelled with the LWS name, group index,
worker index (0 for the leader) and template revision hash. Under LWS's Volcano provider the
leader is annotated with its group ``<lws>-<group>-<revision>`` at creation, and the PodGroup,
owned by the leader, follows (the adapters make it); workers join it. The StatefulSets in
between are not made: pods are owned by the LWS (the leader's workers by the leader).

Trainer v2 (``pkg/runtime/framework/plugins/jobset``) builds a JobSet named as the TrainJob,
owned by it, from its runtime's template with the trainer node job's ``parallelism`` and
``completions`` set to ``numNodes``; the JobSet emulation then makes its pods, which join the
TrainJob's PodGroup.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from stromboli.core.simulate.operators.pods import owned_pod, phase_of
from stromboli.integrations.common import (
    Context,
    Conversion,
    apply_mutation,
    integer,
    mapping,
    mutation,
    owner_reference,
    pod_template,
    read_meta,
    sequence,
    short_hash,
    string,
)
from stromboli.integrations.jobset import lws
from stromboli.integrations.jobset.convert import API_VERSION as JOBSET_API_VERSION
from stromboli.integrations.kubeflow.trainer import (
    ANCESTOR_LABEL,
    TRAINER_NODE,
    find_runtime,
)

Obj = Mapping[str, Any]


def leader_worker_set(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    meta = read_meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    lwt = mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    size = integer(lwt.get("size"), "spec.leaderWorkerTemplate.size", 1, minimum=1)
    replicas = integer(spec.get("replicas"), "spec.replicas", 1)
    worker = pod_template(lwt.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
    leader_template = lwt.get("leaderTemplate")
    leader = pod_template(leader_template, "leaderTemplate") if leader_template else worker
    policy = string(spec.get("startupPolicy"), "spec.startupPolicy", "LeaderCreated")
    revision = short_hash(repr(sorted(lwt.items())))
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    for index in range(replicas):
        labels = {
            lws.NAME_LABEL: meta.name,
            lws.GROUP_INDEX_LABEL: str(index),
            lws.REVISION_LABEL: revision,
        }
        name = f"{meta.name}-{index}"
        gang = lws.group_name(meta.name, str(index), revision)
        head = owned_pod(obj, name, leader, {**labels, lws.WORKER_INDEX_LABEL: "0"}, None)
        yield apply_mutation(head, mutation("leader", gang, {}, "", force_scheduler=True))
        stored = by_name.get(name)
        if stored is None or (policy == lws.LEADER_READY and phase_of(stored) != "Running"):
            continue
        if conversion.podgroup(gang) is None and gang not in conversion.adopted:
            continue  # the group follows its leader; the workers follow the group
        for w in range(1, size):
            yield (
                owned_pod(
                    obj,
                    f"{name}-{w}",
                    worker,
                    {**labels, lws.WORKER_INDEX_LABEL: str(w)},
                    conversion,
                    controller=stored,
                )
            )


def train_job(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """The TrainJob's JobSet (an object to create, once): its pods are the JobSet's."""
    meta = read_meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    runtime = find_runtime(obj, meta.namespace, Context(related=related))
    template = copy.deepcopy(
        dict(mapping(mapping(runtime.get("spec"), "spec").get("template"), "template"))
    )
    jobs_spec = dict(mapping(template.get("spec"), "template.spec"))
    trainer = mapping(spec.get("trainer"), "spec.trainer")
    nodes = trainer.get("numNodes")
    jobs = []
    for i, job in enumerate(sequence(jobs_spec.get("replicatedJobs"), "replicatedJobs")):
        job = copy.deepcopy(dict(mapping(job, f"replicatedJobs[{i}]")))
        job_template = dict(mapping(job.get("template"), "template"))
        labels = mapping(mapping(job_template.get("metadata"), "metadata").get("labels"), "labels")
        if nodes is not None and (
            job.get("name") == TRAINER_NODE or labels.get(ANCESTOR_LABEL) == "trainer"
        ):
            count = integer(nodes, "spec.trainer.numNodes", 1)
            job_spec = dict(mapping(job_template.get("spec"), "template.spec"))
            job_spec["parallelism"] = job_spec["completions"] = count
            job_template["spec"] = job_spec
            job["template"] = job_template
        jobs.append(job)
    jobs_spec["replicatedJobs"] = jobs
    jobset: dict[str, Any] = {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "labels": {"trainer.kubeflow.org/trainjob-name": meta.name},
            "ownerReferences": [owner_reference(meta)],
        },
        "spec": jobs_spec,
    }
    yield jobset

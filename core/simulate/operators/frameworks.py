"""What each framework's operator creates, pod by pod, given its object and the gang.

Each function yields the pods the operator would have by now, by name (already existing ones
are not made twice; the caller stops reading at its bound): ``pods`` are the object's pods
stored so far, ``group`` its PodGroup (or None), ``conversion`` the adapter's result for the
object, ``related`` what the conversion read besides. Names, labels and ownership follow
the operators' code, cited per function; the index-based names stand in for the random
suffixes some operators draw, so that a simulation is reproducible.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.simulate.operators.argo import argo_workflow
from stromboli.core.simulate.operators.lws import leader_worker_set, train_job
from stromboli.core.simulate.operators.pods import owned_pod, phase_of
from stromboli.integrations.common import (
    Conversion,
    mapping,
    owner_reference,
    read_meta,
    sequence,
)
from stromboli.integrations.jobset.convert import (
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
    read_replicated_jobs,
)
from stromboli.integrations.kubeflow.training import KINDS, read_replicas
from stromboli.integrations.kuberay.convert import (
    CLUSTER_LABEL,
    GROUP_LABEL,
    NODE_TYPE_LABEL,
    desired_workers,
)
from stromboli.integrations.spark.convert import (
    APP_NAME_LABEL,
    ROLE_LABEL,
    RoleResources,
    executor_count,
    overhead_factor,
)

Obj = Mapping[str, Any]
Planner = Callable[
    [Obj, Sequence[Obj], Obj | None, Conversion, Sequence[Obj]], Iterator[dict[str, Any]]
]
#: PodGroup phases in which the gang has been admitted (the training operator waits for one).
ADMITTED = (k.PodGroupPhase.INQUEUE, k.PodGroupPhase.RUNNING)
TRAINING_LABELS = "training.kubeflow.org"

#: The labels KubeRay puts on the RayCluster of a RayService (or RayJob).
ORIGINATED_FROM_NAME_LABEL = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"


def _admitted(group: Obj | None) -> bool:
    status = group.get("status") if group is not None else None
    return isinstance(status, Mapping) and status.get("phase") in ADMITTED


def training_operator(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """Kubeflow training-operator v1 (``pkg/controller.v1/common/pod.go``): pods
    ``<job>-<type>-<index>`` labelled with the job name, replica type (lower case) and index,
    made only once the job's PodGroup is ``Inqueue`` (``pkg/controller.v1/common/job.go``:
    the gang scheduler's PodGroup must be admitted before any pod)."""
    if not _admitted(group):
        return
    meta = read_meta(obj)
    field, allowed = KINDS[meta.kind]
    for replica in read_replicas(mapping(obj.get("spec"), "spec"), field, allowed, {}):
        rtype = replica.type.lower()
        for index in range(replica.replicas):
            labels = {
                f"{TRAINING_LABELS}/operator-name": f"{meta.kind.lower()}-controller",
                f"{TRAINING_LABELS}/job-name": meta.name,
                f"{TRAINING_LABELS}/replica-type": rtype,
                f"{TRAINING_LABELS}/replica-index": str(index),
            }
            if replica.type in ("Master", "Chief"):
                labels[f"{TRAINING_LABELS}/job-role"] = "master"
            name = f"{meta.name}-{rtype}-{index}"
            yield owned_pod(obj, name, replica.template, labels, conversion)


def mpi_operator(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """MPI operator v2 (``pkg/controller/mpi_job_controller.go``): workers
    ``<job>-worker-<i>`` and the launcher ``<job>-launcher`` (its Job's pod here), labelled
    with the job name and role; the launcher at once (``launcherCreationPolicy: AtStartup``,
    the default) or once every worker runs (``WaitForWorkersReady``)."""
    meta = read_meta(obj)
    replicas = {
        r.type: r
        for r in read_replicas(
            mapping(obj.get("spec"), "spec"), "mpiReplicaSpecs", ("Launcher", "Worker"), {}
        )
    }
    worker = replicas.get("Worker")
    workers = worker.replicas if worker is not None else 0
    template = worker.template if worker is not None else {}
    for index in range(workers):
        labels = {
            f"{TRAINING_LABELS}/operator-name": "mpi-operator",
            f"{TRAINING_LABELS}/job-name": meta.name,
            f"{TRAINING_LABELS}/job-role": "worker",
            f"{TRAINING_LABELS}/replica-index": str(index),
        }
        yield owned_pod(obj, f"{meta.name}-worker-{index}", template, labels, conversion)
    running = sum(
        1
        for p in pods
        if (p.get("metadata") or {}).get("labels", {}).get(f"{TRAINING_LABELS}/job-role")
        == "worker"
        and phase_of(p) == "Running"
    )
    launcher = replicas.get("Launcher")
    policy = mapping(obj.get("spec"), "spec").get("launcherCreationPolicy") or "AtStartup"
    if launcher is not None and (policy != "WaitForWorkersReady" or running >= workers):
        labels = {
            f"{TRAINING_LABELS}/operator-name": "mpi-operator",
            f"{TRAINING_LABELS}/job-name": meta.name,
            f"{TRAINING_LABELS}/job-role": "launcher",
        }
        yield owned_pod(obj, f"{meta.name}-launcher", launcher.template, labels, conversion)


def _ray_cluster_pods(
    obj: Obj, spec: Obj, field: str, cluster: str, conversion: Conversion
) -> Iterator[dict[str, Any]]:
    """KubeRay (``ray-operator/controllers/ray/raycluster_controller.go``): the head
    ``<cluster>-head`` and each group's workers ``<cluster>-<group>-worker-<i>`` at once,
    labelled ``ray.io/cluster``, ``ray.io/node-type`` and ``ray.io/group``."""
    head = mapping(spec.get("headGroupSpec"), f"{field}.headGroupSpec")
    labels = {CLUSTER_LABEL: cluster, NODE_TYPE_LABEL: "head", GROUP_LABEL: "headgroup"}
    yield owned_pod(
        obj, f"{cluster}-head", mapping(head.get("template"), "template"), labels, conversion
    )
    for i, group in enumerate(sequence(spec.get("workerGroupSpecs"), f"{field}.workerGroupSpecs")):
        where = f"{field}.workerGroupSpecs[{i}]"
        group = mapping(group, where)
        name = str(group.get("groupName"))
        count, _, _, hosts = desired_workers(group, where)
        template = mapping(group.get("template"), f"{where}.template")
        for index in range(count * hosts):
            labels = {CLUSTER_LABEL: cluster, NODE_TYPE_LABEL: "worker", GROUP_LABEL: name}
            pod_name = f"{cluster}-{name}-worker-{index}"
            yield owned_pod(obj, pod_name, template, labels, conversion)


def kuberay_cluster(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    meta = read_meta(obj)
    yield from _ray_cluster_pods(
        obj, mapping(obj.get("spec"), "spec"), "spec", meta.name, conversion
    )


def kuberay_job(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """A RayJob's cluster (``<job>-raycluster`` here; KubeRay adds a random suffix) and, once
    every cluster pod runs, the K8sJobMode submitter ``<job>-submitter``
    (``ray-operator/controllers/ray/rayjob_controller.go``)."""
    meta = read_meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    cluster_spec = mapping(spec.get("rayClusterSpec"), "spec.rayClusterSpec")
    wanted = 0
    for pod in _ray_cluster_pods(
        obj, cluster_spec, "spec.rayClusterSpec", f"{meta.name}-raycluster", conversion
    ):
        wanted += 1
        yield pod
    mode = spec.get("submissionMode") or "K8sJobMode"
    cluster_pods = [
        p for p in pods if CLUSTER_LABEL in ((p.get("metadata") or {}).get("labels") or {})
    ]
    if (
        mode == "K8sJobMode"
        and len(cluster_pods) >= wanted
        and all(phase_of(p) == "Running" for p in cluster_pods)
    ):
        template = mapping(spec.get("submitterPodTemplate"), "spec.submitterPodTemplate") or {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "ray-job-submitter",
                        "image": "rayproject/ray",
                        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}},
                    }
                ],
            }
        }
        labels = {"batch.kubernetes.io/job-name": meta.name}
        yield owned_pod(obj, f"{meta.name}-submitter", template, labels, conversion)


def kuberay_service(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """A RayService's RayCluster (an object to create, once; ``<service>-raycluster`` here,
    KubeRay adds a random suffix), with the service's labels and annotations and the
    ``ray.io/originated-from-*`` labels (``ray-operator/controllers/ray/rayservice_controller.go``,
    ``constructRayClusterForRayService``); the RayCluster's own emulation makes its pods, in
    its own gang ``ray-<cluster>-pg``, as KubeRay's Volcano mode does."""
    meta = read_meta(obj)
    spec = mapping(obj.get("spec"), "spec")
    config = mapping(spec.get("rayClusterConfig"), "spec.rayClusterConfig")
    if not config:
        raise ValueError("spec.rayClusterConfig: KubeRay makes no RayCluster without it")
    source = mapping(obj.get("metadata"), "metadata")
    labels = dict(mapping(source.get("labels"), "metadata.labels"))
    labels |= {ORIGINATED_FROM_NAME_LABEL: meta.name, ORIGINATED_FROM_CRD_LABEL: "RayService"}
    cluster: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": f"{meta.name}-raycluster",
            "namespace": meta.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(meta)],
        },
        "spec": copy.deepcopy(dict(config)),
    }
    annotations = dict(mapping(source.get("annotations"), "metadata.annotations"))
    if annotations:
        cluster["metadata"]["annotations"] = annotations
    yield cluster


def _spark_template(obj: Obj, role: str) -> dict[str, Any]:
    spec = mapping(obj.get("spec"), "spec")
    requests = RoleResources(spec, role, "accurate", overhead_factor(spec)).resources().to_list()
    role_spec = mapping(spec.get(role), f"spec.{role}")
    metadata = {
        "labels": dict(mapping(role_spec.get("labels"), f"spec.{role}.labels")),
        "annotations": dict(mapping(role_spec.get("annotations"), f"spec.{role}.annotations")),
    }
    container: dict[str, Any] = {
        "name": f"spark-kubernetes-{role}",
        "image": str(spec.get("image") or "spark"),
        "resources": {"requests": requests},
    }
    return {"metadata": metadata, "spec": {"restartPolicy": "Never", "containers": [container]}}


def spark_operator(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """Spark operator (``internal/controller/sparkapplication/submission.go``) runs
    spark-submit, which makes the driver ``<app>-driver``; the driver asks for the executors
    ``<app>-exec-<n>`` (from 1) once it runs (Spark's ``ExecutorPodsAllocator``), owned by
    the driver pod. Labels ``spark-role`` and ``sparkoperator.k8s.io/app-name``; pod sizes
    are what Spark requests (memory plus overhead)."""
    meta = read_meta(obj)
    labels = {APP_NAME_LABEL: meta.name, "spark-app-selector": f"spark-{meta.uid or meta.name}"}
    driver = owned_pod(
        obj,
        f"{meta.name}-driver",
        _spark_template(obj, "driver"),
        {**labels, ROLE_LABEL: "driver"},
        conversion,
    )
    yield driver
    stored = next(
        (p for p in pods if (p.get("metadata") or {}).get("name") == f"{meta.name}-driver"), None
    )
    if stored is not None and phase_of(stored) == "Running":
        template = _spark_template(obj, "executor")
        for n in range(1, executor_count(mapping(obj.get("spec"), "spec")) + 1):
            executor = owned_pod(
                obj,
                f"{meta.name}-exec-{n}",
                template,
                {**labels, ROLE_LABEL: "executor", "spark-exec-id": str(n)},
                conversion,
                controller=stored,
            )
            yield executor


def jobset_controller(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """JobSet (``pkg/controllers/jobset_controller.go``) makes a Job
    ``<jobset>-<replicatedJob>-<index>`` per replica, whose controller runs ``parallelism``
    pods; here the pods directly, ``<job>-<pod index>``, labelled with the JobSet and
    replicatedJob names."""
    meta = read_meta(obj)
    for job in read_replicated_jobs(mapping(obj.get("spec"), "spec"), "spec"):
        for index in range(job.pods):
            labels = {JOBSET_NAME_LABEL: meta.name, REPLICATED_JOB_LABEL: job.name}
            name = f"{meta.name}-{job.name}-{index}"
            yield owned_pod(obj, name, job.template, labels, conversion)


#: (apiVersion, kind) → what its operator makes.
PLANNERS: dict[tuple[str, str], Planner] = {
    **{("kubeflow.org/v1", kind): training_operator for kind in KINDS},
    ("kubeflow.org/v2beta1", "MPIJob"): mpi_operator,
    ("ray.io/v1", "RayCluster"): kuberay_cluster,
    ("ray.io/v1", "RayJob"): kuberay_job,
    ("ray.io/v1", "RayService"): kuberay_service,
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): spark_operator,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): jobset_controller,
    ("argoproj.io/v1alpha1", "Workflow"): argo_workflow,
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): leader_worker_set,
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): train_job,
}

"""Which adapter converts which framework kind, and the gang of a pod from its owner chain.

The webhook and the controller walk a pod's ownerReferences up to the first object whose
(apiVersion, kind) is registered here and ask that adapter; the lookup is by exact apiVersion
first (MPIJob is ``kubeflow.org/v1`` for the training operator and ``kubeflow.org/v2beta1`` for
the MPI operator), then by API group for the frameworks with one adapter per kind.
Native spark-submit pods have no framework owner: they are recognised by their labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.integrations.argo.convert import WorkflowAdapter
from stromboli.integrations.common import Adapter, labels_of
from stromboli.integrations.jobset.convert import JobSetAdapter
from stromboli.integrations.jobset.lws import LeaderWorkerSetAdapter
from stromboli.integrations.kubeflow.mpi import MPIJobAdapter
from stromboli.integrations.kubeflow.trainer import TrainJobAdapter
from stromboli.integrations.kubeflow.training import KINDS as TRAINING_KINDS
from stromboli.integrations.kubeflow.training import TrainingOperatorAdapter
from stromboli.integrations.kuberay.convert import (
    RayClusterAdapter,
    RayJobAdapter,
    RayServiceAdapter,
)
from stromboli.integrations.spark.convert import APP_NAME_LABEL, SparkApplicationAdapter
from stromboli.integrations.spark.submit import (
    APP_SELECTOR_LABEL,
    ROLE_LABEL,
    SparkSubmitAdapter,
)

_training = TrainingOperatorAdapter()
_ray_cluster, _ray_job, _ray_service = RayClusterAdapter(), RayJobAdapter(), RayServiceAdapter()
SPARK_SUBMIT = SparkSubmitAdapter()

#: (apiVersion or API group, kind) → adapter. Exact apiVersion keys contain a ``/``.
ADAPTERS: dict[tuple[str, str], Adapter] = {
    **{("kubeflow.org/v1", kind): _training for kind in TRAINING_KINDS},
    ("kubeflow.org/v2beta1", "MPIJob"): MPIJobAdapter(),
    ("trainer.kubeflow.org", "TrainJob"): TrainJobAdapter(),
    ("ray.io", "RayCluster"): _ray_cluster,
    ("ray.io", "RayJob"): _ray_job,
    ("ray.io", "RayService"): _ray_service,
    ("sparkoperator.k8s.io", "SparkApplication"): SparkApplicationAdapter(),
    ("argoproj.io", "Workflow"): WorkflowAdapter(),
    ("jobset.x-k8s.io", "JobSet"): JobSetAdapter(),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): LeaderWorkerSetAdapter(),
}


def adapter_for(api_version: Any, kind: Any) -> Adapter | None:
    """The adapter of a framework kind, or None for a kind no adapter converts."""
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    found = ADAPTERS.get((api_version, kind))
    if found is None:
        group = api_version.rpartition("/")[0]
        found = ADAPTERS.get((group, kind)) if group else None
    return found


def adapter_of(obj: Mapping[str, Any]) -> Adapter | None:
    """The adapter of an object (by its own apiVersion and kind)."""
    return adapter_for(obj.get("apiVersion"), obj.get("kind")) if isinstance(obj, Mapping) else None


def is_spark_submit_pod(pod: Mapping[str, Any]) -> bool:
    """A driver or executor made by spark-submit itself (not by the Spark operator)."""
    labels = labels_of(pod)
    return (
        bool(labels.get(APP_SELECTOR_LABEL))
        and labels.get(ROLE_LABEL) in ("driver", "executor")
        and APP_NAME_LABEL not in labels
    )


def group_name_for_pod(pod: Mapping[str, Any], owner: Mapping[str, Any] | None) -> str | None:
    """The PodGroup a pod joins: its framework owner's gang (``owner`` is the first object up
    the pod's owner chain that has an adapter), or a native Spark application's; None when no
    adapter claims the pod (Volcano's own fallback then applies)."""
    adapter = adapter_of(owner) if owner is not None else None
    if adapter is not None and owner is not None:
        return adapter.group_name_for_pod(pod, owner)
    if is_spark_submit_pod(pod):
        return SPARK_SUBMIT.group_name_for_pod(pod, pod)
    return None

"""The framework kinds the adapters read, as their operators' CRDs serve them.

One table for the live handlers (which kinds to look for in the API server's discovery), the
test control plane (CRDs of exactly these names) and stores that serve them in memory. The
kinds are deliberately not in the shared kind registry (:mod:`stromboli.core.api.registry`):
a kind there is taken as served without asking, and a framework CRD may not be installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from stromboli.core.api.constants import APIEXTENSIONS_V1
from stromboli.core.api.registry import KindInfo, kind_info


def _kind(api_version: str, kind: str, plural: str, namespaced: bool = True) -> KindInfo:
    # Every operator's CRD has a status subresource.
    return KindInfo(api_version, kind, plural, namespaced, True)


#: Framework objects an adapter converts (the training operator's MPIJob v1 and the MPI
#: operator's v2beta1 are two versions of one CRD, ``mpijobs.kubeflow.org``).
CONVERTED: Final[tuple[KindInfo, ...]] = (
    _kind("kubeflow.org/v1", "PyTorchJob", "pytorchjobs"),
    _kind("kubeflow.org/v1", "TFJob", "tfjobs"),
    _kind("kubeflow.org/v1", "XGBoostJob", "xgboostjobs"),
    _kind("kubeflow.org/v1", "PaddleJob", "paddlejobs"),
    _kind("kubeflow.org/v1", "JAXJob", "jaxjobs"),
    _kind("kubeflow.org/v2beta1", "MPIJob", "mpijobs"),
    _kind("kubeflow.org/v1", "MPIJob", "mpijobs"),
    _kind("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs"),
    _kind("ray.io/v1", "RayCluster", "rayclusters"),
    _kind("ray.io/v1", "RayJob", "rayjobs"),
    _kind("ray.io/v1", "RayService", "rayservices"),
    _kind("sparkoperator.k8s.io/v1beta2", "SparkApplication", "sparkapplications"),
    _kind("argoproj.io/v1alpha1", "Workflow", "workflows"),
    _kind("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets"),
    _kind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets"),
)
#: Objects a conversion reads besides the framework object (Trainer v2's runtimes).
RELATED: Final[tuple[KindInfo, ...]] = (
    _kind("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "trainingruntimes"),
    _kind(
        "trainer.kubeflow.org/v1alpha1",
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
        namespaced=False,
    ),
)
FRAMEWORK_KINDS: Final[tuple[KindInfo, ...]] = CONVERTED + RELATED
_BY_KIND: Final = {(info.api_version, info.kind): info for info in FRAMEWORK_KINDS}


def framework_kind(api_version: str, kind: str) -> KindInfo | None:
    return _BY_KIND.get((api_version, kind))


#: The CRDs themselves, which the controller watches to follow frameworks installed later.
CRD_KIND: Final = KindInfo(
    APIEXTENSIONS_V1, "CustomResourceDefinition", "customresourcedefinitions", False, True
)


def with_framework_kinds(
    kinds: Iterable[tuple[str, str]] | None = None,
) -> Callable[[str, str], KindInfo | None]:
    """A kind resolver for the memory store: the shared registry, CustomResourceDefinitions
    and the framework kinds (``kinds``: only those, as if only their CRDs were installed;
    None: all)."""
    served = None if kinds is None else set(kinds)

    def resolve(api_version: str, kind: str) -> KindInfo | None:
        found = kind_info(api_version, kind)
        if found is not None:
            return found
        if (api_version, kind) == (CRD_KIND.api_version, CRD_KIND.kind):
            return CRD_KIND
        if served is not None and (api_version, kind) not in served:
            return None
        return framework_kind(api_version, kind)

    return resolve

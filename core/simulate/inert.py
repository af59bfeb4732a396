"""Kinds the simulator stores but nothing in it acts on.

A manifest written for a real cluster carries more than workloads: RBAC, ConfigMaps, Services,
ResourceClaims. An API server stores them all; so does the simulator, so that a file that
``kubectl apply -f`` takes is also a file ``stromboli simulate`` takes. What no emulated
controller or scheduler plugin reads is *inert*: stored, listed in ``--output json``, and named
once per kind in a warning (:func:`inert_warnings`), so that nobody believes a Service balanced
anything. Only a kind no API server would serve stays an error (the loader's).

:data:`BUILTIN_KINDS` adds the Kubernetes kinds that Stromboli's own kind table does not know
(it lists only what its components read or write); the simulator's store resolves kinds
through :func:`simulator_kind`, so nothing is added to the process-wide table (the webhook and
the live store keep refusing kinds they do not know).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final

from stromboli.core.api import constants as k
from stromboli.core.api.registry import KindInfo, kind_info
from stromboli.integrations.kinds import FRAMEWORK_KINDS, framework_kind

#: Group -> the versions the API server serves, for the kinds in :data:`_BUILTIN`.
_VERSIONS: Final[dict[str, tuple[str, ...]]] = {
    "": ("v1",),
    "apps": ("v1",),
    "autoscaling": ("v1", "v2"),
    "batch": ("v1",),
    "rbac.authorization.k8s.io": ("v1",),
    "networking.k8s.io": ("v1",),
    "discovery.k8s.io": ("v1",),
    "resource.k8s.io": ("v1", "v1beta1", "v1beta2", "v1alpha3"),
    "storage.k8s.io": ("v1",),
    "node.k8s.io": ("v1",),
    "policy": ("v1",),
    "scheduling.k8s.io": ("v1",),
    "apiextensions.k8s.io": ("v1",),
    "admissionregistration.k8s.io": ("v1",),
    "certificates.k8s.io": ("v1",),
    "flowcontrol.apiserver.k8s.io": ("v1",),
}

#: (group, kind, plural, namespaced): Kubernetes' built-in kinds beyond Stromboli's table.
_BUILTIN: Final[tuple[tuple[str, str, str, bool], ...]] = (
    ("", "Endpoints", "endpoints", True),
    ("", "LimitRange", "limitranges", True),
    ("", "PodTemplate", "podtemplates", True),
    ("", "ReplicationController", "replicationcontrollers", True),
    ("apps", "ControllerRevision", "controllerrevisions", True),
    ("autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True),
    ("rbac.authorization.k8s.io", "Role", "roles", True),
    ("rbac.authorization.k8s.io", "RoleBinding", "rolebindings", True),
    ("rbac.authorization.k8s.io", "ClusterRole", "clusterroles", False),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", False),
    ("networking.k8s.io", "Ingress", "ingresses", True),
    ("networking.k8s.io", "IngressClass", "ingressclasses", False),
    ("discovery.k8s.io", "EndpointSlice", "endpointslices", True),
    ("resource.k8s.io", "ResourceClaim", "resourceclaims", True),
    ("resource.k8s.io", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    ("resource.k8s.io", "DeviceClass", "deviceclasses", False),
    ("resource.k8s.io", "ResourceSlice", "resourceslices", False),
    ("storage.k8s.io", "CSIDriver", "csidrivers", False),
    ("storage.k8s.io", "CSINode", "csinodes", False),
    ("storage.k8s.io", "VolumeAttachment", "volumeattachments", False),
    ("node.k8s.io", "RuntimeClass", "runtimeclasses", False),
    ("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", False),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        False,
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        False,
    ),
    ("certificates.k8s.io", "CertificateSigningRequest", "certificatesigningrequests", False),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema", "flowschemas", False),
    (
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        "prioritylevelconfigurations",
        False,
    ),
)


def _builtin_kinds() -> dict[tuple[str, str], KindInfo]:
    table: dict[tuple[str, str], KindInfo] = {}
    for group, kind, plural, namespaced in _BUILTIN:
        for version in _VERSIONS[group]:
            api_version = f"{group}/{version}" if group else version
            table[api_version, kind] = KindInfo(api_version, kind, plural, namespaced, False)
    return table


BUILTIN_KINDS: Final[dict[tuple[str, str], KindInfo]] = _builtin_kinds()
"""Kubernetes kinds the simulator stores beyond Stromboli's kind table, by (apiVersion, kind)."""

ACTED_ON: Final[frozenset[tuple[str, str]]] = frozenset(
    {
        (k.CORE_V1, "Namespace"),
        (k.CORE_V1, "Node"),
        (k.CORE_V1, "Pod"),
        (k.CORE_V1, "ResourceQuota"),
        (k.CORE_V1, "Event"),
        (k.EVENTS_V1, "Event"),
        (k.K8S_SCHEDULING_V1, "PriorityClass"),
        (k.POLICY_V1, "PodDisruptionBudget"),
        (k.APPS_V1, "Deployment"),
        (k.APPS_V1, "ReplicaSet"),
        (k.APPS_V1, "StatefulSet"),
        (k.K8S_BATCH_V1, "Job"),
        (k.K8S_BATCH_V1, "CronJob"),
        (k.SCHEDULING_V1BETA1, "Queue"),
        (k.SCHEDULING_V1BETA1, "PodGroup"),
        (k.BATCH_V1ALPHA1, "Job"),
        (k.BATCH_V1ALPHA1, "CronJob"),
        (k.BUS_V1ALPHA1, "Command"),
        (k.FLOW_V1ALPHA1, "JobFlow"),
        (k.FLOW_V1ALPHA1, "JobTemplate"),
        (k.TOPOLOGY_V1ALPHA1, "HyperNode"),
        # The numa-aware plugin reads each node's NUMA layout from it.
        (k.NODEINFO_V1ALPHA1, "Numatopology"),
        # The framework adapters make every converted kind's PodGroup; Trainer's runtimes
        # are read by its TrainJobs.
        *((info.api_version, info.kind) for info in FRAMEWORK_KINDS),
    }
)
"""Kinds the simulator's scheduler, admission or emulated controllers read."""


def simulator_kind(api_version: str, kind: str) -> KindInfo | None:
    """How the simulator's store serves ``kind``: Stromboli's table, Kubernetes' other
    built-in kinds, then the framework CRDs (all installed); None for a kind no API server
    would serve."""
    return (
        kind_info(api_version, kind)
        or BUILTIN_KINDS.get((api_version, kind))
        or framework_kind(api_version, kind)
    )


def served_versions(kind: str) -> list[str]:
    """The apiVersions under which the simulator serves one of Kubernetes' other built-in
    ``kind``s (for the error on a version no API server serves any more, such as
    ``rbac.authorization.k8s.io/v1beta1``)."""
    return sorted(api_version for api_version, name in BUILTIN_KINDS if name == kind)


def is_inert(api_version: str, kind: str) -> bool:
    """Whether the simulator stores ``kind`` without anything acting on it."""
    return (api_version, kind) not in ACTED_ON and simulator_kind(api_version, kind) is not None


def inert_warnings(kinds: Iterable[tuple[object, str]]) -> list[str]:
    """One line per inert kind among ``kinds`` (the input's (apiVersion, kind), one entry per
    object), in first-seen order, saying how many objects of it were stored."""
    named = ((str(api_version or ""), kind) for api_version, kind in kinds)
    counts = Counter(ak for ak in named if is_inert(*ak))
    lines = []
    for (api_version, kind), count in counts.items():
        noun = "object" if count == 1 else "objects"
        lines.append(
            f"{kind} ({api_version}): {count} {noun} stored; nothing in the simulator acts "
            "on this kind"
        )
    return lines

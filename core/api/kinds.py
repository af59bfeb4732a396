"""The kinds Stromboli knows and how the API serves each (plural, scope, status subresource).

A table without models, so that a client that only addresses objects (the Kubernetes store of
the CLI) does not import pydantic; ``registry.py`` adds the models that validate them.
"""

from __future__ import annotations

from dataclasses import dataclass

from stromboli.core.api import constants as c


@dataclass(frozen=True, slots=True)
class KindInfo:
    """How the API serves one kind: its URL plural, scope and subresources."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool
    short_names: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        """The API group; ``""`` for the core group (``v1``)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


def _k(
    api_version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    status: bool,
    *short_names: str,
) -> KindInfo:
    return KindInfo(api_version, kind, plural, namespaced, status, tuple(short_names))


_NS, _CLUSTER = True, False
_STATUS, _NO_STATUS = True, False

KINDS: tuple[KindInfo, ...] = (
    # Volcano's kinds, as its CRDs declare them: PodGroup alone has no status subresource
    # (Volcano's scheduler rewrites the whole object).
    _k(c.SCHEDULING_V1BETA1, "Queue", "queues", _CLUSTER, _STATUS, "q", "queue-v1beta1"),
    _k(
        c.SCHEDULING_V1BETA1,
        "PodGroup",
        "podgroups",
        _NS,
        _NO_STATUS,
        "pg",
        "podgroup-v1beta1",
    ),
    _k(c.BATCH_V1ALPHA1, "Job", "jobs", _NS, _STATUS, "vcjob", "vj"),
    _k(c.BATCH_V1ALPHA1, "CronJob", "cronjobs", _NS, _STATUS, "cronvcjob", "cronvj"),
    _k(c.BUS_V1ALPHA1, "Command", "commands", _NS, _NO_STATUS),
    _k(c.FLOW_V1ALPHA1, "JobFlow", "jobflows", _NS, _STATUS, "jf"),
    _k(c.FLOW_V1ALPHA1, "JobTemplate", "jobtemplates", _NS, _STATUS, "jt"),
    _k(c.TOPOLOGY_V1ALPHA1, "HyperNode", "hypernodes", _CLUSTER, _STATUS, "hn"),
    _k(c.NODEINFO_V1ALPHA1, "Numatopology", "numatopologies", _CLUSTER, _NO_STATUS, "numatopo"),
    # Kubernetes.
    _k(c.CORE_V1, "Pod", "pods", _NS, _STATUS, "po"),
    _k(c.CORE_V1, "Node", "nodes", _CLUSTER, _STATUS, "no"),
    _k(c.CORE_V1, "Namespace", "namespaces", _CLUSTER, _STATUS, "ns"),
    _k(c.CORE_V1, "Event", "events", _NS, _NO_STATUS, "ev"),
    _k(c.CORE_V1, "ConfigMap", "configmaps", _NS, _NO_STATUS, "cm"),
    _k(c.CORE_V1, "Service", "services", _NS, _STATUS, "svc"),
    _k(c.CORE_V1, "Secret", "secrets", _NS, _NO_STATUS),
    _k(c.CORE_V1, "PersistentVolumeClaim", "persistentvolumeclaims", _NS, _STATUS, "pvc"),
    _k(c.CORE_V1, "PersistentVolume", "persistentvolumes", _CLUSTER, _STATUS, "pv"),
    _k(c.CORE_V1, "ResourceQuota", "resourcequotas", _NS, _STATUS, "quota"),
    _k(c.CORE_V1, "ServiceAccount", "serviceaccounts", _NS, _NO_STATUS, "sa"),
    _k(c.EVENTS_V1, "Event", "events", _NS, _NO_STATUS, "ev"),
    _k(c.K8S_SCHEDULING_V1, "PriorityClass", "priorityclasses", _CLUSTER, _NO_STATUS, "pc"),
    _k(c.POLICY_V1, "PodDisruptionBudget", "poddisruptionbudgets", _NS, _STATUS, "pdb"),
    _k(c.COORDINATION_V1, "Lease", "leases", _NS, _NO_STATUS),
    _k(c.NETWORKING_V1, "NetworkPolicy", "networkpolicies", _NS, _NO_STATUS, "netpol"),
    _k(c.STORAGE_V1, "StorageClass", "storageclasses", _CLUSTER, _NO_STATUS, "sc"),
    _k(c.APPS_V1, "Deployment", "deployments", _NS, _STATUS, "deploy"),
    _k(c.APPS_V1, "ReplicaSet", "replicasets", _NS, _STATUS, "rs"),
    _k(c.APPS_V1, "StatefulSet", "statefulsets", _NS, _STATUS, "sts"),
    _k(c.APPS_V1, "DaemonSet", "daemonsets", _NS, _STATUS, "ds"),
    _k(c.K8S_BATCH_V1, "Job", "jobs", _NS, _STATUS),
    _k(c.K8S_BATCH_V1, "CronJob", "cronjobs", _NS, _STATUS, "cj"),
)
"""The built-in kinds; :func:`register_kind` adds more (framework CRDs) at run time."""

_BY_KIND: dict[tuple[str, str], KindInfo] = {}
_BY_PLURAL: dict[tuple[str, str], KindInfo] = {}


def add_kind(info: KindInfo) -> None:
    """Make a kind known by its name and its plural (``registry.register_kind`` also takes a
    model)."""
    _BY_KIND[info.api_version, info.kind] = info
    _BY_PLURAL.setdefault((info.group, info.plural), info)


for _info in KINDS:
    add_kind(_info)


def kind_info(api_version: str, kind: str) -> KindInfo | None:
    """The table entry of ``kind`` in ``api_version``, or ``None`` if Stromboli does not know it."""
    return _BY_KIND.get((api_version, kind))


def kind_by_plural(group: str, plural: str) -> KindInfo | None:
    """The kind served at ``/apis/<group>/<version>/<plural>`` (``group`` ``""`` for core)."""
    return _BY_PLURAL.get((group, plural))


def known_kinds() -> tuple[KindInfo, ...]:
    """Built-in and registered kinds."""
    return tuple(_BY_KIND.values())

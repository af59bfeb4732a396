"""Every kind Stromboli knows, and the one entry point that validates an object of any of them.

The store uses the table (plural, scope, status subresource) to serve and persist objects; the
simulator loader and the webhook call :func:`validate_object`, so that a YAML file and an
admission request are checked by the same models and fail with the same messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from stromboli.core.api import constants as c
from stromboli.core.api.models import (
    Command,
    CronJob,
    HyperNode,
    Job,
    JobFlow,
    JobTemplate,
    KubeObject,
    Namespace,
    Node,
    Numatopology,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceQuota,
)


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

_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    (model.model_fields["api_version"].default, model.model_fields["kind"].default): model
    for model in (
        Queue,
        PodGroup,
        Job,
        CronJob,
        Command,
        JobFlow,
        JobTemplate,
        HyperNode,
        Numatopology,
        Pod,
        Node,
        Namespace,
        PriorityClass,
        ResourceQuota,
    )
}

_BY_KIND: dict[tuple[str, str], KindInfo] = {}
_BY_PLURAL: dict[tuple[str, str], KindInfo] = {}


def register_kind(info: KindInfo, model: type[BaseModel] | None = None) -> None:
    """Make a kind known (an integration's CRD, say); without a model only metadata is checked."""
    _BY_KIND[info.api_version, info.kind] = info
    _BY_PLURAL.setdefault((info.group, info.plural), info)
    if model is not None:
        _MODELS[info.api_version, info.kind] = model


for _info in KINDS:
    register_kind(_info)


def kind_info(api_version: str, kind: str) -> KindInfo | None:
    """The table entry of ``kind`` in ``api_version``, or ``None`` if Stromboli does not know it."""
    return _BY_KIND.get((api_version, kind))


def kind_by_plural(group: str, plural: str) -> KindInfo | None:
    """The kind served at ``/apis/<group>/<version>/<plural>`` (``group`` ``""`` for core)."""
    return _BY_PLURAL.get((group, plural))


def known_kinds() -> tuple[KindInfo, ...]:
    """Built-in and registered kinds."""
    return tuple(_BY_KIND.values())


def model_for(api_version: str, kind: str) -> type[BaseModel] | None:
    """The typed model of a kind, or ``None`` when only its metadata is checked (or unknown)."""
    return _MODELS.get((api_version, kind))


# --- Validation ----------------------------------------------------------------------------------


class InvalidObjectError(ValueError):
    """An object that does not match its kind's schema; the message says where and why.

    ``problems`` holds one ``(field path, message)`` pair per error, for callers (the
    webhook) that report them separately.
    """

    def __init__(
        self,
        message: str,
        *,
        where: str = "",
        kind: str = "",
        name: str = "",
        problems: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.where = where
        self.kind = kind
        self.name = name
        self.problems = tuple(problems)


def field_path(loc: Iterable[int | str]) -> str:
    """``('spec', 'tasks', 0, 'replicas')`` as ``spec.tasks[0].replicas``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _problems(error: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        message = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
        problems.append((field_path(item["loc"]), message))
    return problems


def _display_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        if isinstance(meta.get("name"), str) and meta["name"]:
            return meta["name"]
        if isinstance(meta.get("generateName"), str) and meta["generateName"]:
            return meta["generateName"] + "*"
    return "<unnamed>"


def validate_object(obj: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Check ``obj`` against its kind's model and return it with the CRD defaults applied.

    The result is plain JSON-able data (what the API server would store): unknown metadata
    and free-form parts (pod templates) are kept as given, unset optional fields are left
    out. ``where`` (``"file.yaml document 3"``) prefixes every error message.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(obj, Mapping):
        raise InvalidObjectError(
            f"{prefix}expected a Kubernetes object (a mapping), got {type(obj).__name__}",
            where=where,
        )
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        api_version = api_version if isinstance(api_version, str) else ""
        kind = kind if isinstance(kind, str) else ""
    name = _display_name(obj)
    model = _MODELS.get((api_version, kind))
    if model is None:
        if (api_version, kind) not in _BY_KIND:
            raise InvalidObjectError(
                f'{prefix}{kind or "<no kind>"} "{name}": {_unsupported(api_version, kind)}',
                where=where,
                kind=kind,
                name=name,
            )
        model = KubeObject
    try:
        instance = model.model_validate(obj)
    except ValidationError as error:
        problems = _problems(error)
        details = "; ".join(f"{path}: {message}" if path else message for path, message in problems)
        raise InvalidObjectError(
            f'{prefix}{kind} "{name}": {details}',
            where=where,
            kind=kind,
            name=name,
            problems=problems,
        ) from None
    return instance.model_dump(by_alias=True, exclude_none=True, mode="json")


def _unsupported(api_version: str, kind: str) -> str:
    if not api_version or not kind:
        missing = " and ".join(
            field for field, value in (("apiVersion", api_version), ("kind", kind)) if not value
        )
        return f"{missing} missing; every object needs both"
    others = sorted(info.api_version for (_, k), info in _BY_KIND.items() if k == kind)
    hint = f" (known as {', '.join(others)})" if others else ""
    return f"kind {kind} of apiVersion {api_version} is not supported{hint}"

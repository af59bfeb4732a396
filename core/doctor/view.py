"""What the checks look at: the cluster's objects as gathered, and safe ways to read them.

Every object here came from the API server and may be anything a user could store, so the
readers never assume a shape: a field of the wrong type reads as missing, and the check that
needed it says so, naming the object.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

Obj = dict[str, Any]

DEFAULT_NAMESPACE: Final = "volcano-system"
APP_LABEL: Final = "app.kubernetes.io/name"
COMPONENT_LABEL: Final = "app.kubernetes.io/component"
COMPONENTS: Final = ("scheduler", "controller", "webhook")
UNDOTTED_GROUPS: Final = frozenset({"apps", "batch", "policy", "autoscaling"})
"""API groups without a dot, so ``apps/replicasets`` is not read as a core subresource."""
"""Deployments ``stromboli-<component>`` (deploy/ and the chart name them so)."""


@dataclass(frozen=True, slots=True, order=True)
class AccessQuestion:
    """May ``service_account`` (in the install namespace) ``verb`` ``resource``?

    ``resource`` is ``plural[/sub]`` for the core group, ``group/plural[/sub]`` otherwise;
    ``namespace`` empty for a cluster-wide question; ``name`` for a rule limited by name."""

    service_account: str
    verb: str
    resource: str
    namespace: str = ""
    name: str = ""

    def attributes(self) -> dict[str, str]:
        """``resourceAttributes`` of a SubjectAccessReview."""
        head, _, tail = self.resource.partition("/")
        is_group = "." in head or head in UNDOTTED_GROUPS
        group, rest = (head, tail) if is_group else ("", self.resource)
        plural, _, subresource = rest.partition("/")
        attrs = {"group": group, "resource": plural, "verb": self.verb}
        if subresource:
            attrs["subresource"] = subresource
        if self.namespace:
            attrs["namespace"] = self.namespace
        if self.name:
            attrs["name"] = self.name
        return attrs


@dataclass(slots=True)
class ClusterView:
    """A cluster as the doctor saw it (one listing of each kind, taken once)."""

    namespace: str = DEFAULT_NAMESPACE
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    crds: list[Obj] = field(default_factory=list)
    mutating_configurations: list[Obj] = field(default_factory=list)
    validating_configurations: list[Obj] = field(default_factory=list)
    services: list[Obj] = field(default_factory=list)
    endpoint_slices: list[Obj] = field(default_factory=list)
    secrets: list[Obj] = field(default_factory=list)
    deployments: list[Obj] = field(default_factory=list)
    namespaces: list[Obj] = field(default_factory=list)
    service_accounts: list[Obj] = field(default_factory=list)
    access: dict[AccessQuestion, bool] = field(default_factory=dict)
    access_error: str = ""
    """Why the authorizer could not be asked (then RBAC is not judged)."""
    framework_namespaces: dict[str, set[str]] = field(default_factory=dict)
    """Framework kind (``RayCluster``) → namespaces that hold objects of it."""
    peer_certificates: dict[str, bytes | str] = field(default_factory=dict)
    """Webhook URL → the PEM certificate its server presented, or why none was read."""
    unread: dict[str, str] = field(default_factory=dict)
    """Kind → why it could not be listed (forbidden, unreachable)."""

    def deployment(self, name: str, namespace: str | None = None) -> Obj | None:
        wanted = namespace or self.namespace
        for obj in self.deployments:
            if meta(obj).get("name") == name and meta(obj).get("namespace") == wanted:
                return obj
        return None

    def component(self, component: str) -> Obj | None:
        """The Deployment of one of our components in the install namespace."""
        return self.deployment(f"stromboli-{component}")

    def find(self, objects: Iterable[Obj], name: str, namespace: str = "") -> Obj | None:
        for obj in objects:
            md = meta(obj)
            if md.get("name") == name and (md.get("namespace") or "") == namespace:
                return obj
        return None


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one (a malformed field reads as absent)."""
    return value if isinstance(value, Mapping) else {}


def sequence(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def meta(obj: Any) -> Mapping[str, Any]:
    return mapping(mapping(obj).get("metadata"))


def labels(obj: Any) -> Mapping[str, Any]:
    return mapping(meta(obj).get("labels"))


def named(obj: Any) -> str:
    """``namespace/name`` or ``name``, printable whatever the object holds."""
    md = meta(obj)
    name = text(md.get("name")) or "(no name)"
    namespace = text(md.get("namespace"))
    return f"{namespace}/{name}" if namespace else name


def pod_template_spec(deployment: Any) -> Mapping[str, Any]:
    return mapping(mapping(mapping(mapping(deployment).get("spec")).get("template")).get("spec"))


def containers(deployment: Any) -> list[Mapping[str, Any]]:
    return [mapping(c) for c in sequence(pod_template_spec(deployment).get("containers"))]


def container_args(container: Mapping[str, Any]) -> list[str]:
    """The command line of a container (``command`` then ``args``), strings only."""
    return [
        a
        for a in sequence(container.get("command")) + sequence(container.get("args"))
        if isinstance(a, str)
    ]


def flag_values(args: list[str], flag: str) -> list[str]:
    """Every value given to ``flag`` (``--f=v``, ``--f v``, or ``--f`` alone → ``"true"``)."""
    values = []
    for i, arg in enumerate(args):
        if arg == flag:
            nxt = args[i + 1] if i + 1 < len(args) else ""
            values.append(nxt if nxt and not nxt.startswith("-") else "true")
        elif arg.startswith(flag + "="):
            values.append(arg[len(flag) + 1 :])
    return values


def flag_value(args: list[str], flag: str, default: str = "") -> str:
    """The last value given to ``flag`` (as Go's flag package keeps the last), or ``default``."""
    values = flag_values(args, flag)
    return values[-1] if values else default


def restart(view: ClusterView) -> str:
    """The command that makes the webhook register itself and its certificate again."""
    return f"kubectl -n {view.namespace} rollout restart deployment/stromboli-webhook"

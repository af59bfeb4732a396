"""The Mutating/ValidatingWebhookConfiguration objects that make the API server call us.

One configuration per enabled service, named as Volcano's chart names them
(``volcano-admission-service-jobs-mutate``), so a cluster moving from Volcano keeps its objects
and this server only brings them up to date: created when missing, replaced when they differ
(the CA of a freshly generated certificate, a new URL), left alone otherwise. The client
configuration is either a Service in the cluster or, for a server outside it (tests, a
developer's machine), a URL.

**Scope.** ``kube-system`` and the webhook's own namespace are exempt from every webhook in
every mode, so the webhook never blocks the pods that would serve it. Volcano's own objects
(vcjobs, queues, PodGroups) keep Volcano's ``failurePolicy: Fail``: nothing else creates
them, and an unchecked one would be worse than a delayed one. Pods are different: Volcano's
pod webhooks see every pod in the cluster with ``Fail``, so a webhook outage stops every
Deployment, DaemonSet and Job. Here a pod is sent to us only when it is ours to judge, by two
webhooks in each pod configuration:

- ``<name>`` (Volcano's name, e.g. ``validatepod.volcano.sh``): pods whose
  ``spec.schedulerName`` is one of our schedulers (a ``matchConditions`` CEL expression), in
  namespaces that are not enrolled — what Volcano users rely on, with Volcano's messages;
- ``enrolled.<name>``: every pod in a namespace labelled ``stromboli.dev/enroll: "true"``,
  the namespaces whose plain pods Stromboli enrols into PodGroups.

With ``--admission-conf``, the first webhook of ``/pods/mutate`` also takes the pods Volcano's
resource groups name (by namespace or annotation), so a group can enrol pods of any namespace.

Both use ``failurePolicy: Ignore`` by default (``--pods-failure-policy``): a pod outside those
scopes never reaches us at all, and one inside is admitted rather than refused while the
webhook is down. The two selectors are disjoint, so no pod is reviewed twice.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from stromboli.core.admission.resourcegroups import RESOURCE_GROUP_ANNOTATION, ResourceGroup
from stromboli.core.api import constants as k
from stromboli.core.cluster.errors import AlreadyExistsError, ConflictError, NotFoundError
from stromboli.core.cluster.store import ClusterStore, Obj
from stromboli.webhooks.services import AdmissionService

log = logging.getLogger(__name__)

ADMISSIONREGISTRATION_V1: Final = "admissionregistration.k8s.io/v1"
SERVICE_PORT: Final = 443
TIMEOUT_SECONDS: Final = 10
ENROLL_LABEL: Final = "stromboli.dev/enroll"
ALWAYS_EXEMPT: Final = ("kube-system",)
FAILURE_POLICIES: Final = ("Ignore", "Fail")
SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


DEFAULT_NAMESPACE: Final = "volcano-system"
"""Where deploy/ installs the webhook: exempt when nothing better says where we run."""


def own_namespace() -> str:
    """The namespace this process runs in, from its service account; outside a pod (a URL
    registration from a developer's machine or a test) the namespace deploy/ uses."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


@dataclass(frozen=True, slots=True)
class ClientTarget:
    """Where the API server reaches the webhook: ``url`` (a base URL, the path appended) or a
    Service ``namespace``/``name`` on port 443; and the scope of the pod webhooks."""

    url: str = ""
    namespace: str = ""
    service_name: str = ""
    exempt_namespace: str = ""
    """The webhook's own namespace when it is not ``namespace`` (URL mode in a pod)."""
    pods_failure_policy: str = "Ignore"
    scheduler_names: tuple[str, ...] = field(default=(k.DEFAULT_SCHEDULER_NAME,))
    resource_groups: tuple[ResourceGroup, ...] = ()
    """``--admission-conf``: their pods are sent to ``/pods/mutate`` too."""

    def __post_init__(self) -> None:
        if self.pods_failure_policy not in FAILURE_POLICIES:
            raise ValueError(
                f"pods failurePolicy: {self.pods_failure_policy!r} is not one of "
                f"{', '.join(FAILURE_POLICIES)}"
            )

    def exempt(self) -> list[str]:
        """Namespaces no webhook ever sees: ours first, then ``kube-system``."""
        names = [n for n in (self.namespace, self.exempt_namespace) if n]
        names += [n for n in ALWAYS_EXEMPT if n not in names]
        return list(dict.fromkeys(names))

    def client_config(self, path: str, ca_bundle: bytes) -> dict[str, Any]:
        config: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode("ascii")}
        if self.url:
            config["url"] = self.url.rstrip("/") + path
        else:
            config["service"] = {
                "namespace": self.namespace,
                "name": self.service_name,
                "path": path,
                "port": SERVICE_PORT,
            }
        return config


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cel_string_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(_cel_string(v) for v in values) + "]"


def resource_group_condition(groups: tuple[ResourceGroup, ...]) -> str:
    """A CEL expression true for the pods the resource groups take ("" for no groups)."""
    namespaces: dict[str, None] = {}
    pairs: dict[tuple[str, str], None] = {}
    for group in groups:
        if group.object_key == "namespace":
            namespaces.update(dict.fromkeys(group.values))
        elif group.object_key == "annotation":
            for pair in group.values:
                key, _, value = pair.partition(":")
                pairs[(key.strip(), value.strip())] = None
        else:
            pairs[(RESOURCE_GROUP_ANNOTATION, group.name)] = None
    terms = []
    if namespaces:
        terms.append(f"request.namespace in {_cel_string_list(tuple(namespaces))}")
    held = "object.metadata.annotations"
    for key, value in pairs:
        quoted = _cel_string(key)
        terms.append(
            f"(has({held}) && {quoted} in {held} && {held}[{quoted}] == {_cel_string(value)})"
        )
    return " || ".join(terms)


def _webhook(
    service: AdmissionService,
    target: ClientTarget,
    ca_bundle: bytes,
    name: str,
    expressions: list[dict[str, Any]],
    failure_policy: str,
) -> dict[str, Any]:
    webhook: dict[str, Any] = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": target.client_config(service.path, ca_bundle),
        "failurePolicy": failure_policy,
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchExpressions": expressions},
        "objectSelector": {},
        "rules": [
            {
                "apiGroups": [service.group],
                "apiVersions": [service.version],
                "operations": list(service.operations),
                "resources": [service.resource],
                "scope": "*",
            }
        ],
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
    }
    if service.mutating:
        webhook["reinvocationPolicy"] = "Never"
    return webhook


def webhooks_of(service: AdmissionService, target: ClientTarget, ca_bundle: bytes) -> list[Obj]:
    """The webhook entries of ``service``'s configuration (see the module docstring)."""
    exempt = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": target.exempt()}
    if service.resource != "pods":
        return [_webhook(service, target, ca_bundle, service.webhook_name, [exempt], "Fail")]
    policy = target.pods_failure_policy
    not_enrolled = {"key": ENROLL_LABEL, "operator": "NotIn", "values": ["true"]}
    enrolled = {"key": ENROLL_LABEL, "operator": "In", "values": ["true"]}
    ours = _webhook(
        service, target, ca_bundle, service.webhook_name, [exempt, not_enrolled], policy
    )
    expression = "has(object.spec.schedulerName) && object.spec.schedulerName in " + (
        _cel_string_list(target.scheduler_names)
    )
    grouped = resource_group_condition(target.resource_groups) if service.mutating else ""
    if grouped:
        expression = f"({expression}) || {grouped}"
    ours["matchConditions"] = [{"name": "scheduler-is-ours", "expression": expression}]
    everyone = _webhook(
        service, target, ca_bundle, f"enrolled.{service.webhook_name}", [exempt, enrolled], policy
    )
    return [ours, everyone]


def webhook_configuration(service: AdmissionService, target: ClientTarget, ca_bundle: bytes) -> Obj:
    """The configuration that sends ``service``'s resource and operations to us."""
    kind = "MutatingWebhookConfiguration" if service.mutating else "ValidatingWebhookConfiguration"
    return {
        "apiVersion": ADMISSIONREGISTRATION_V1,
        "kind": kind,
        "metadata": {"name": service.configuration_name},
        "webhooks": webhooks_of(service, target, ca_bundle),
    }


async def _apply(store: ClusterStore, wanted: Obj) -> None:
    name = wanted["metadata"]["name"]
    try:
        current = await store.get(ADMISSIONREGISTRATION_V1, wanted["kind"], name)
    except NotFoundError:
        await store.create(wanted)
        log.info("created %s %s", wanted["kind"], name)
        return
    if current.get("webhooks") != wanted["webhooks"]:
        current["webhooks"] = wanted["webhooks"]
        await store.update(current)
        log.info("updated %s %s", wanted["kind"], name)


async def register(
    store: ClusterStore,
    services: list[AdmissionService],
    target: ClientTarget,
    ca_bundle: bytes,
) -> list[str]:
    """Create or update the configurations of ``services``; returns their names. Replicas
    starting together race for the same objects: the loser of a create or an update reads
    the object again and tries once more."""
    names = []
    for service in services:
        wanted = webhook_configuration(service, target, ca_bundle)
        for attempt in range(3):
            try:
                await _apply(store, wanted)
                break
            except (AlreadyExistsError, ConflictError):
                if attempt == 2:
                    raise
        names.append(wanted["metadata"]["name"])
    return names

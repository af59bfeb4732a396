"""The Mutating/ValidatingWebhookConfiguration objects that make the API server call us.

One configuration per enabled service, named as Volcano's chart names them
(``volcano-admission-service-jobs-mutate``), so a cluster moving from Volcano keeps its objects
and this server only brings them up to date: created when missing, replaced when they differ
(the CA of a freshly generated certificate, a new URL), left alone otherwise. The client
configuration is either a Service in the cluster or, for a server outside it (tests, a
developer's machine), a URL.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Any, Final

from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.cluster.store import ClusterStore, Obj
from stromboli.webhooks.services import AdmissionService

log = logging.getLogger(__name__)

ADMISSIONREGISTRATION_V1: Final = "admissionregistration.k8s.io/v1"
SERVICE_PORT: Final = 443
TIMEOUT_SECONDS: Final = 10


@dataclass(frozen=True, slots=True)
class ClientTarget:
    """Where the API server reaches the webhook: ``url`` (a base URL, the path appended) or a
    Service ``namespace``/``name`` on port 443."""

    url: str = ""
    namespace: str = ""
    service_name: str = ""

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


def webhook_configuration(service: AdmissionService, target: ClientTarget, ca_bundle: bytes) -> Obj:
    """The configuration that sends ``service``'s resource and operations to us. Namespaced
    resources skip ``kube-system`` and the webhook's own namespace, so the webhook never
    blocks the pods that would serve it."""
    excluded = ["kube-system"]
    if target.namespace and target.namespace not in excluded:
        excluded.insert(0, target.namespace)
    webhook: dict[str, Any] = {
        "name": service.webhook_name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": target.client_config(service.path, ca_bundle),
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded}
            ]
        },
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
    kind = "MutatingWebhookConfiguration" if service.mutating else "ValidatingWebhookConfiguration"
    return {
        "apiVersion": ADMISSIONREGISTRATION_V1,
        "kind": kind,
        "metadata": {"name": service.configuration_name},
        "webhooks": [webhook],
    }


async def register(
    store: ClusterStore,
    services: list[AdmissionService],
    target: ClientTarget,
    ca_bundle: bytes,
) -> list[str]:
    """Create or update the configurations of ``services``; returns their names."""
    names = []
    for service in services:
        wanted = webhook_configuration(service, target, ca_bundle)
        name = wanted["metadata"]["name"]
        try:
            current = await store.get(ADMISSIONREGISTRATION_V1, wanted["kind"], name)
        except NotFoundError:
            await store.create(wanted)
            log.info("created %s %s", wanted["kind"], name)
        else:
            if current.get("webhooks") != wanted["webhooks"]:
                current["webhooks"] = wanted["webhooks"]
                await store.update(current)
                log.info("updated %s %s", wanted["kind"], name)
        names.append(name)
    return names

"""Webhook reachability: each configuration the webhook registers exists, sends to a Service
with ready endpoints (or a URL), and carries a ``caBundle`` that trusts the certificate the
server presents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.doctor.certificates import (
    CertificateError,
    decode_base64,
    secret_certificate,
    trusted,
)
from stromboli.core.doctor.findings import Finding, fail, ok, warn
from stromboli.core.doctor.install import SERVICE_NAME, WebhookSettings, settings
from stromboli.core.doctor.view import ClusterView, labels, mapping, meta, restart, sequence, text

CHECK = "webhook"
PREFIX = "volcano-admission-service-"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def restart_fix(view: ClusterView) -> str:
    return (
        f"run: {restart(view)} (it registers its configurations at start), "
        "or: helm upgrade stromboli deploy/helm/stromboli"
    )


def ready_endpoints(view: ClusterView, namespace: str, service: str) -> int:
    """Ready addresses in the Service's EndpointSlices (a missing ``ready`` means ready)."""
    count = 0
    for eps in view.endpoint_slices:
        if (
            meta(eps).get("namespace") != namespace
            or labels(eps).get(SERVICE_NAME_LABEL) != service
        ):
            continue
        for endpoint in sequence(mapping(eps).get("endpoints")):
            ep = mapping(endpoint)
            if mapping(ep.get("conditions")).get("ready", True) is not False:
                count += len(sequence(ep.get("addresses")))
    return count


def _service_problem(view: ClusterView, ref: Mapping[str, Any]) -> tuple[str, str]:
    """(problem, "") or ("", description) of a clientConfig.service."""
    namespace, name = text(ref.get("namespace")), text(ref.get("name"))
    port = ref.get("port", 443)
    service = view.find(view.services, name, namespace)
    where = f"Service {namespace}/{name}"
    if service is None:
        return f"points at {where}, which does not exist", ""
    ports = [
        mapping(p).get("port") for p in sequence(mapping(mapping(service).get("spec")).get("ports"))
    ]
    if port not in ports:
        return f"points at port {port} of {where}, which has ports {ports or 'none'}", ""
    ready = ready_endpoints(view, namespace, name)
    if ready == 0:
        return f"points at {where}, which has no ready endpoints", ""
    return "", f"{where} ({ready} ready endpoint{'s' if ready != 1 else ''})"


def check_configuration(view: ClusterView, config: Any, kind: str, served: bytes | None) -> Finding:
    name = text(meta(config).get("name")) or "(no name)"
    what = f"{kind} {name}"
    entries = sequence(mapping(config).get("webhooks"))
    if not entries:
        return fail(CHECK, f"{what} has no webhooks", restart_fix(view))
    targets: list[str] = []
    for i, raw in enumerate(entries):
        entry = mapping(raw)
        label = f"{what} webhooks[{i}] ({text(entry.get('name')) or 'no name'})"
        client = mapping(entry.get("clientConfig"))
        if not client.get("caBundle"):
            return fail(CHECK, f"{label} has no caBundle", restart_fix(view))
        try:
            bundle = decode_base64(client.get("caBundle"), "clientConfig.caBundle")
            if served is not None:
                why = trusted(bundle, served)
                if why:
                    return fail(CHECK, f"{label}: {why}", restart_fix(view))
        except CertificateError as err:
            return fail(CHECK, f"{label} clientConfig.caBundle: {err}", restart_fix(view))
        if isinstance(client.get("service"), Mapping):
            problem, target = _service_problem(view, client["service"])
            if problem:
                return fail(
                    CHECK,
                    f"{label} {problem}",
                    f"check: kubectl -n {view.namespace} get deployment/stromboli-webhook "
                    f"service/{SERVICE_NAME} endpointslices",
                )
        elif text(client.get("url")):
            target = f"URL {client['url']}"
        else:
            return fail(
                CHECK, f"{label} clientConfig has neither service nor url", restart_fix(view)
            )
        targets.append(target)
    shown = ", ".join(dict.fromkeys(targets))
    return ok(
        CHECK,
        f"{what} → {shown}, caBundle {'trusts the serving certificate' if served else 'present'}",
    )


def _served_certificate(view: ClusterView, wanted: WebhookSettings) -> bytes | None:
    if wanted.url:
        presented = view.peer_certificates.get(wanted.url)
        return presented if isinstance(presented, bytes) else None
    return secret_certificate(view)


def check(view: ClusterView) -> list[Finding]:
    wanted = settings(view)
    registered = {(text(meta(c).get("name")), True): c for c in view.mutating_configurations} | {
        (text(meta(c).get("name")), False): c for c in view.validating_configurations
    }
    ours = {key: c for key, c in registered.items() if key[0].startswith(PREFIX)}
    if not wanted.installed:
        if not ours:
            return [
                warn(
                    CHECK,
                    f"no webhook installed (no Deployment {view.namespace}/stromboli-webhook, no "
                    f"{PREFIX}* configurations): vcjobs, queues and PodGroups are neither "
                    "defaulted nor validated, and no pod is enrolled at admission",
                    "run: kubectl apply -f deploy/webhook.yaml (or: helm upgrade stromboli "
                    "deploy/helm/stromboli --set webhook.enabled=true)",
                )
            ]
        stale = " ".join(sorted(n for n, _ in ours))
        findings = [
            fail(
                CHECK,
                f"{len(ours)} {PREFIX}* configurations are registered but no Deployment "
                f"{view.namespace}/stromboli-webhook serves them",
                "run: kubectl apply -f deploy/webhook.yaml, or delete them: kubectl delete "
                f"mutatingwebhookconfiguration,validatingwebhookconfiguration {stale}",
            )
        ]
    else:
        findings = []
        deployment = view.component("webhook")
        ready = mapping(mapping(deployment).get("status")).get("readyReplicas") or 0
        if not isinstance(ready, int) or ready < 1:
            findings.append(
                fail(
                    CHECK,
                    f"Deployment {view.namespace}/stromboli-webhook has no ready replica",
                    f"run: kubectl -n {view.namespace} describe deployment/stromboli-webhook "
                    "and read its pods' logs",
                )
            )
        for path in wanted.unknown_paths:
            findings.append(
                fail(
                    CHECK,
                    f"Deployment {view.namespace}/stromboli-webhook: --enabled-admission names "
                    f"{path}, which the webhook does not serve",
                    "remove it from --enabled-admission",
                )
            )
    served = _served_certificate(view, wanted)
    expected = wanted.configuration_names() if wanted.installed else list(ours)
    for name, mutating in expected:
        kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
        config = registered.get((name, mutating))
        if config is None:
            findings.append(fail(CHECK, f"{kind} {name} is missing", restart_fix(view)))
            continue
        findings.append(check_configuration(view, config, kind, served))
    return findings

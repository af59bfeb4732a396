"""What our own Deployments say about the install: the webhook's flags decide which
configurations, Service and Secret the other checks expect (defaults as deploy/ sets them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.api import constants as k
from stromboli.core.doctor.view import (
    ClusterView,
    container_args,
    containers,
    flag_value,
    flag_values,
    mapping,
    pod_template_spec,
    sequence,
    text,
)
from stromboli.webhooks.services import DEFAULT_ENABLED_ADMISSION, SERVICES
from stromboli.webhooks.tls import SECRET_NAME

SERVICE_NAME = "volcano-admission-service"
TLS_VOLUME = "tls"


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    installed: bool
    """A Deployment stromboli-webhook exists."""
    namespace: str
    service_name: str
    url: str
    paths: tuple[str, ...]
    unknown_paths: tuple[str, ...] = ()
    secret_name: str = SECRET_NAME
    scheduler_names: tuple[str, ...] = field(default=(k.DEFAULT_SCHEDULER_NAME,))

    def configuration_names(self) -> list[tuple[str, bool]]:
        """(name, mutating) of each configuration the webhook registers."""
        return [(SERVICES[p].configuration_name, SERVICES[p].mutating) for p in self.paths]


def _args(view: ClusterView) -> list[str] | None:
    deployment = view.component("webhook")
    if deployment is None:
        return None
    for container in containers(deployment):
        args = container_args(container)
        if "webhook-manager" in args:
            return args
    first = containers(deployment)
    return container_args(first[0]) if first else []


def _mounted_secret(view: ClusterView) -> str:
    for volume in sequence(pod_template_spec(view.component("webhook")).get("volumes")):
        vol = mapping(volume)
        if vol.get("name") == TLS_VOLUME:
            return text(mapping(vol.get("secret")).get("secretName"))
    return ""


def settings(view: ClusterView) -> WebhookSettings:
    args = _args(view)
    if args is None:
        paths = tuple(p for p in DEFAULT_ENABLED_ADMISSION.split(",") if p)
        return WebhookSettings(False, view.namespace, SERVICE_NAME, "", paths)
    enabled = flag_value(args, "--enabled-admission", DEFAULT_ENABLED_ADMISSION)
    raw = [p.strip() for p in enabled.split(",") if p.strip()]
    known = tuple(dict.fromkeys(p for p in raw if p in SERVICES))
    unknown = tuple(p for p in raw if p not in SERVICES)
    if flag_value(args, "--tls-cert-file"):
        secret = _mounted_secret(view)
    else:
        secret = flag_value(args, "--tls-secret-name", SECRET_NAME)
    names = tuple(flag_values(args, "--scheduler-name")) or (k.DEFAULT_SCHEDULER_NAME,)
    return WebhookSettings(
        installed=True,
        namespace=flag_value(args, "--webhook-namespace") or view.namespace,
        service_name=flag_value(args, "--webhook-service-name") or SERVICE_NAME,
        url=flag_value(args, "--webhook-url"),
        paths=known,
        unknown_paths=unknown,
        secret_name=secret,
        scheduler_names=names,
    )

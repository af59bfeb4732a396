"""``stromboli webhook-manager``: serve Volcano's admission webhooks (vc-webhook-manager).

Flags keep vc-webhook-manager's names and defaults, so its Deployment's arguments carry over;
Go-style boolean flags accept ``--enable-healthz`` as well as ``--enable-healthz=false``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from stromboli.core.api import constants as k
from stromboli.core.cli.process import (
    CommandFunction,
    go_bool,
    kube_options,
    kube_store_factory,
    serve,
    setup_logging,
)

if TYPE_CHECKING:
    from stromboli.webhooks.policyfile import PolicyFile

log = logging.getLogger("stromboli.webhooks")

#: ``webhooks.services.DEFAULT_ENABLED_ADMISSION`` and ``admission.queue.DEFAULT_MAX_QUEUE_DEPTH``,
#: repeated so that ``--help`` imports no webhook code (a test keeps them equal).
DEFAULT_ENABLED_ADMISSION = (
    "/jobs/mutate,/jobs/validate,/podgroups/mutate,/pods/validate,/pods/mutate,"
    "/queues/mutate,/queues/validate"
)
DEFAULT_MAX_QUEUE_DEPTH = 5
#: ``admission.jobsize.MAX_JOB_REPLICAS``, repeated for the same reason (tests/admission keeps it).
MAX_JOB_REPLICAS = 50_000

#: ``webhooks.limits.MAX_CONNECTIONS``, ``MAX_HANDSHAKES`` and ``KEEPALIVE_TIMEOUT``, repeated
#: for the same reason (tests/webhooks/test_connections.py keeps them equal).
MAX_CONNECTIONS = 256
MAX_HANDSHAKES = 32
KEEPALIVE_TIMEOUT = 60.0

#: The services that enforce a queue policy: its refusals, and its default queues.
POLICY_PATHS = (
    "/jobs/validate",
    "/podgroups/validate",
    "/pods/validate",
    "/jobs/mutate",
    "/podgroups/mutate",
    "/pods/mutate",
)


def _queue_policy(path: str | None, enabled_admission: str) -> PolicyFile | None:
    """The policy file of ``--queue-policy``, loaded now: a bad file stops the start, since
    there is no good version to keep yet. Services it needs but that are not enabled are
    named in a warning (``/podgroups/validate`` is off by default, as in Volcano)."""
    if not path:
        return None
    from stromboli.core.admission.policy import PolicyError
    from stromboli.webhooks.policyfile import PolicyFile
    from stromboli.webhooks.services import enabled_services

    try:
        policy = PolicyFile(path)
    except PolicyError as err:
        raise click.BadParameter(str(err), param_hint="--queue-policy") from None
    enabled = {s.path for s in enabled_services(enabled_admission)}
    missing = [p for p in POLICY_PATHS if p not in enabled]
    if missing:
        log.warning(
            "--queue-policy: %s not in --enabled-admission; the policy is not enforced there",
            ", ".join(missing),
        )
    return policy


def _go_flag(name: str, default: str, help: str) -> Callable[[CommandFunction], CommandFunction]:
    return click.option(
        name, is_flag=False, flag_value="true", default=default, show_default=True, help=help
    )


@click.command("webhook-manager")
@kube_options
@click.option("--listen-address", default="", help="Address to listen on (all when empty).")
@click.option("--port", default=8443, show_default=True, help="HTTPS port of the webhooks.")
@click.option(
    "--tls-cert-file",
    type=click.Path(dir_okay=False, exists=True),
    help="Serving certificate (PEM, chain allowed); a self-signed one is made when omitted.",
)
@click.option(
    "--tls-private-key-file",
    type=click.Path(dir_okay=False, exists=True),
    help="Key of --tls-cert-file.",
)
@click.option(
    "--ca-cert-file",
    type=click.Path(dir_okay=False, exists=True),
    help="CA that signed --tls-cert-file, put in the webhook configurations' caBundle.",
)
@click.option("--webhook-namespace", default="", help="Namespace of the webhook's Service.")
@click.option("--webhook-service-name", default="", help="Name of the webhook's Service.")
@click.option(
    "--webhook-url",
    default="",
    help="Base URL the API server calls instead of the Service (paths are appended).",
)
@click.option(
    "--enabled-admission",
    default=DEFAULT_ENABLED_ADMISSION,
    show_default=True,
    help="Comma-separated webhook paths to serve and register.",
)
@click.option(
    "--scheduler-name",
    "scheduler_names",
    multiple=True,
    default=(k.DEFAULT_SCHEDULER_NAME,),
    show_default=True,
    help="Admit pods of these schedulers; the first is the default of vcjobs (repeatable).",
)
@click.option(
    "--pods-failure-policy",
    type=click.Choice(["Ignore", "Fail"]),
    default="Ignore",
    show_default=True,
    help="failurePolicy of the pod webhooks (pods of our schedulers and of enrolled namespaces).",
)
@click.option(
    "--tls-secret-name",
    default="volcano-admission-secret",
    show_default=True,
    help="Secret in --webhook-namespace where replicas share a generated certificate "
    "(empty: each replica makes its own).",
)
@_go_flag("--enable-healthz", "false", "Serve /healthz, /readyz and /metrics on --healthz-address.")
@click.option("--healthz-address", default=":11251", show_default=True, help="Address of /healthz.")
@_go_flag(
    "--enable-queue-allocated-pods-check",
    "false",
    "Refuse deleting a queue that still has allocated pods.",
)
@click.option(
    "--max-queue-depth",
    default=DEFAULT_MAX_QUEUE_DEPTH,
    show_default=True,
    help="Deepest allowed queue hierarchy.",
)
@click.option(
    "--max-job-replicas",
    default=MAX_JOB_REPLICAS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Pods one vcjob may ask for over all its tasks; a larger one is refused.",
)
@_go_flag(
    "--enable-root-queue-protection",
    "true",
    "Refuse changing the root queue's capability, deserved and guarantee.",
)
@click.option(
    "--queue-policy",
    type=click.Path(dir_okay=False, exists=True),
    help="Queue policy file (YAML): the queues each namespace may use, its default queue, "
    "per-queue limits. Reloaded when it changes; see docs/queue-policy.md.",
)
@click.option(
    "--admission-conf",
    type=click.Path(dir_okay=False),
    help="Volcano's admission configuration (YAML): resourceGroups applied to pods at "
    "creation by /pods/mutate; see docs/webhook.md.",
)
@click.option(
    "--max-connections",
    default=MAX_CONNECTIONS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Connections open at once (Stromboli's bound); one more is closed as it is accepted.",
)
@click.option(
    "--max-tls-handshakes",
    default=MAX_HANDSHAKES,
    show_default=True,
    type=click.IntRange(min=1),
    help="TLS handshakes in progress at once; other new connections wait for a place.",
)
@click.option(
    "--keep-alive-timeout",
    default=KEEPALIVE_TIMEOUT,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a connection may stay open without a request.",
)
def webhook_manager(
    kubeconfig: str | None,
    master: str | None,
    kube_api_qps: float,
    kube_api_burst: int,
    verbosity: int,
    log_format: str,
    listen_address: str,
    port: int,
    tls_cert_file: str | None,
    tls_private_key_file: str | None,
    ca_cert_file: str | None,
    webhook_namespace: str,
    webhook_service_name: str,
    webhook_url: str,
    enabled_admission: str,
    scheduler_names: tuple[str, ...],
    pods_failure_policy: str,
    tls_secret_name: str,
    enable_healthz: str,
    healthz_address: str,
    enable_queue_allocated_pods_check: str,
    max_queue_depth: int,
    max_job_replicas: int,
    enable_root_queue_protection: str,
    queue_policy: str | None,
    admission_conf: str | None,
    max_connections: int,
    max_tls_handshakes: int,
    keep_alive_timeout: float,
) -> None:
    """Validate and default Volcano objects (vcjobs, queues, PodGroups, pods) on admission."""
    setup_logging(verbosity, log_format)
    from stromboli.core.admission.policy import EMPTY_POLICY
    from stromboli.core.admission.resourcegroups import AdmissionConfError, load_admission_conf
    from stromboli.core.logsetup import log_start, settings_of
    from stromboli.webhooks.connections import ConnectionLimits
    from stromboli.webhooks.server import WebhookOptions, WebhookServer
    from stromboli.webhooks.services import AdmissionOptions, enabled_services
    from stromboli.webhooks.tls import load_files

    if bool(tls_cert_file) != bool(tls_private_key_file):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file go together")
    try:
        enabled_services(enabled_admission)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--enabled-admission") from None
    policy = _queue_policy(queue_policy, enabled_admission)
    try:
        resource_groups = load_admission_conf(admission_conf) if admission_conf else ()
    except AdmissionConfError as err:
        raise click.BadParameter(str(err), param_hint="--admission-conf") from None
    options = WebhookOptions(
        listen_address=listen_address,
        port=port,
        enabled_admission=enabled_admission,
        webhook_namespace=webhook_namespace,
        webhook_service_name=webhook_service_name,
        webhook_url=webhook_url,
        pods_failure_policy=pods_failure_policy,
        tls_secret_name=tls_secret_name,
        enable_healthz=go_bool(enable_healthz),
        healthz_address=healthz_address,
        admission=AdmissionOptions(
            scheduler_names=tuple(scheduler_names),
            max_queue_depth=max_queue_depth,
            max_job_replicas=max_job_replicas,
            enable_queue_allocated_pods_check=go_bool(enable_queue_allocated_pods_check),
            enable_root_queue_protection=go_bool(enable_root_queue_protection),
            queue_policy=policy if policy is not None else EMPTY_POLICY,
            resource_groups=resource_groups,
        ),
        connections=ConnectionLimits(
            max_connections=max_connections,
            max_handshakes=max_tls_handshakes,
            keepalive_timeout=keep_alive_timeout,
        ),
    )
    certificate = (
        load_files(tls_cert_file, tls_private_key_file, ca_cert_file)
        if tls_cert_file and tls_private_key_file
        else None
    )
    settings = settings_of(options) | {
        "queue_policy": queue_policy or "",
        "admission_conf": admission_conf or "",
        "tls_cert_file": tls_cert_file or "(self-signed)",
    }
    settings["admission"] = {
        key: value
        for key, value in settings_of(options.admission).items()
        if key not in ("queue_policy", "resource_groups")
    } | {"resource_groups": len(resource_groups)}
    log_start(log, "webhook-manager", settings)
    factory = kube_store_factory(kubeconfig, master, kube_api_qps, kube_api_burst)
    asyncio.run(serve(factory, lambda store: WebhookServer(store, options, certificate)))

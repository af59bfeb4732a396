"""``stromboli webhook-manager``: Volcano's admission webhooks over HTTPS (vc-webhook-manager).

One aiohttp application serves every enabled service at its Volcano path. Each POST carries an
AdmissionReview; the answer is always an AdmissionReview for the same ``uid`` unless the body
is not one at all (HTTP 400 with the reason): a rule that fails is logged and answered as a
refusal with code 500, so the API server reports it instead of timing out.

    server = WebhookServer(store, WebhookOptions(port=8443, webhook_url="https://10.0.0.5:8443"))
    await server.run()      # until server.stop()
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from aiohttp import web

from stromboli.core.cluster.store import ClusterStore
from stromboli.core.httpserve import Endpoint, healthz_app
from stromboli.webhooks.registration import ClientTarget, register
from stromboli.webhooks.review import (
    AdmissionRequest,
    ReviewError,
    Verdict,
    decode_review,
    encode_response,
)
from stromboli.webhooks.services import (
    DEFAULT_ENABLED_ADMISSION,
    AdmissionOptions,
    AdmissionService,
    ClusterView,
    MissingObjectError,
    enabled_services,
)
from stromboli.webhooks.tls import ServingCertificate, self_signed, service_hosts

log = logging.getLogger(__name__)

MAX_BODY = 16 * 1024 * 1024
"""Bytes an AdmissionReview may have (the API server's own request limit is 3 MiB per object,
and a review of an UPDATE carries two)."""


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    """The webhook-manager's flags, with Volcano's names and defaults."""

    listen_address: str = ""
    port: int = 8443
    enabled_admission: str = DEFAULT_ENABLED_ADMISSION
    webhook_namespace: str = ""
    webhook_service_name: str = ""
    webhook_url: str = ""
    enable_healthz: bool = False
    healthz_address: str = ":11251"
    admission: AdmissionOptions = field(default_factory=AdmissionOptions)

    @property
    def registers(self) -> bool:
        """Whether to write the webhook configurations (we know where the server is)."""
        return bool(self.webhook_url or (self.webhook_namespace and self.webhook_service_name))


class AdmissionHandler:
    """Answers the AdmissionReviews of one service."""

    def __init__(
        self, service: AdmissionService, cluster: ClusterView, options: AdmissionOptions
    ) -> None:
        self.service = service
        self.cluster = cluster
        self.options = options

    async def handle(self, http: web.Request) -> web.Response:
        body = await http.read()
        try:
            request = decode_review(body)
        except ReviewError as err:
            log.warning("%s: bad AdmissionReview: %s", self.service.path, err)
            return web.json_response({"error": str(err)}, status=400)
        verdict = await self.verdict(request)
        return web.Response(body=encode_response(request, verdict), content_type="application/json")

    async def verdict(self, request: AdmissionRequest) -> Verdict:
        service = self.service
        mismatch = service.mismatch(request)
        if mismatch:
            return Verdict.deny(mismatch)
        if request.operation not in service.operations:
            return Verdict.allow()
        try:
            verdict = await service.rule(request, self.cluster, self.options)
        except MissingObjectError as err:
            return Verdict.deny(str(err))
        except Exception as err:
            log.exception("%s failed on %s %s", service.webhook_name, request.kind, request.name)
            return Verdict.deny(f"{service.webhook_name} failed: {err}", code=500)
        if not verdict.allowed:
            log.info(
                "%s denied %s %s/%s: %s",
                service.webhook_name,
                request.operation,
                request.namespace,
                request.name,
                verdict.message,
            )
        return verdict


def admission_app(
    services: list[AdmissionService], store: ClusterStore, options: AdmissionOptions
) -> web.Application:
    """The aiohttp application: one POST route per service."""
    app = web.Application(client_max_size=MAX_BODY)
    cluster = ClusterView(store)
    for service in services:
        app.router.add_post(service.path, AdmissionHandler(service, cluster, options).handle)
    return app


class WebhookServer:
    """The long-running webhook-manager: TLS, configurations, the HTTPS listener, health."""

    def __init__(
        self,
        store: ClusterStore,
        options: WebhookOptions,
        certificate: ServingCertificate | None = None,
    ) -> None:
        self.store = store
        self.options = options
        self.services = enabled_services(options.enabled_admission)
        self.certificate = certificate or self_signed(
            service_hosts(options.webhook_service_name, options.webhook_namespace)
        )
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.health: Endpoint | None = None
        self.registered: list[str] = []
        self._stopped = asyncio.Event()

    def stop(self) -> None:
        self._stopped.set()

    async def start(self) -> None:
        """Listen, then register the configurations (the API server may call at once)."""
        options = self.options
        app = admission_app(self.services, self.store, options.admission)
        host = options.listen_address or "0.0.0.0"
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(
            self.runner, host, options.port, ssl_context=self.certificate.ssl_context()
        )
        await site.start()
        sockets = site._server.sockets if site._server else ()  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1] if sockets else options.port
        log.info(
            "serving %s on https://%s:%d",
            ",".join(s.path for s in self.services),
            host,
            self.port,
        )
        if options.enable_healthz and options.healthz_address:
            self.health = Endpoint(healthz_app(lambda: (True, "ok")), options.healthz_address)
            await self.health.start()
        if options.registers:
            target = ClientTarget(
                options.webhook_url, options.webhook_namespace, options.webhook_service_name
            )
            self.registered = await register(
                self.store, self.services, target, self.certificate.ca_pem
            )

    async def close(self) -> None:
        if self.health is not None:
            await self.health.stop()
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def run(self) -> None:
        try:
            await self.start()
            await self._stopped.wait()
        finally:
            await self.close()

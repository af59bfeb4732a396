"""``stromboli webhook-manager``: Volcano's admission webhooks over HTTPS (vc-webhook-manager).

One aiohttp application serves every enabled service at its Volcano path. Each POST carries an
AdmissionReview; the answer is an AdmissionReview for the same ``uid`` whenever the body is
one. The server is built to survive what a cluster sends it (see :mod:`.limits`):

- connections are bounded, and so are TLS handshakes in progress; a socket over either bound
  is closed as it is accepted, and an idle one after the keep-alive timeout
  (:mod:`.connections`);
- a pod's review (:data:`INLINE_PATHS`, under :data:`~.limits.INLINE_BODY`) is answered on
  the event loop, which costs less than the hand-over to a thread: pods are the many
  admissions, and their rules read a few fields and the caches. Decoding, the rule and
  encoding of any other review run on :class:`~.workers.Workers` threads, so no single
  review stalls the others or the signals, and so does a pod whose owner must be read from
  the API server;
- a body over :data:`~.limits.MAX_BODY` is refused (413) before it is read, and the bodies in
  flight share a byte budget; over it, or over the request bound, a request is shed (429);
- a request whose deadline (``?timeout=`` from the API server) passes while its body is read
  or before a worker takes it is dropped (504) without running its rule;
- queues and namespaces come from a watch-fed cache (:mod:`.cache`), never a request per
  admission;
- a review the server cannot process is answered with code 500 (or HTTP 400 when it is not a
  review at all), counted in ``stromboli_webhook_request_errors_total``, and the server goes
  on; user strings reach the log only through :func:`~.logsafe.log_safe`.

    server = WebhookServer(store, WebhookOptions(port=8443, webhook_url="https://10.0.0.5:8443"))
    await server.run()      # until server.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Final

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from stromboli.core.cluster.store import ClusterStore
from stromboli.core.httpserve import Endpoint
from stromboli.core.logsafe import log_safe
from stromboli.webhooks.cache import AdmissionCache
from stromboli.webhooks.connections import ConnectionGate, ConnectionLimits, GatedSite
from stromboli.webhooks.limits import (
    INLINE_BODY,
    MAX_BODY,
    MAX_INFLIGHT,
    MAX_INFLIGHT_BYTES,
    RETRY_AFTER,
    Budget,
    deadline_after,
    expired,
)
from stromboli.webhooks.metrics import OUTCOMES, WebhookMetrics
from stromboli.webhooks.owners import FetchNeeded, inline_review
from stromboli.webhooks.policyfile import PolicyFile
from stromboli.webhooks.registration import ClientTarget, own_namespace, register
from stromboli.webhooks.review import (
    AdmissionRequest,
    ReviewError,
    Verdict,
    decode_review,
    encode_response,
    error_response,
)
from stromboli.webhooks.services import (
    DEFAULT_ENABLED_ADMISSION,
    AdmissionOptions,
    AdmissionService,
    ClusterSnapshot,
    MissingObjectError,
    enabled_services,
)
from stromboli.webhooks.tls import (
    SECRET_NAME,
    ServingCertificate,
    self_signed,
    service_hosts,
    shared_certificate,
)
from stromboli.webhooks.workers import DEFAULT_WORKERS, Workers

log = logging.getLogger(__name__)

SHUTDOWN_GRACE: Final = 5.0
"""Seconds a stopping server lets requests in hand finish; none waits longer than its
deadline anyway, and the kubelet's grace period (30 s) is well above this."""
INLINE_PATHS: Final = frozenset({"/pods/mutate", "/pods/validate"})
"""Services whose small reviews are answered on the loop (see the module docstring); the rules
of vcjobs and queues walk tasks and queue trees, whose cost the body size does not bound."""
LISTEN_BACKLOG: Final = 128
"""Connections the kernel holds before the server accepts them (aiohttp's default)."""
SYNC_TIMEOUT: Final = 30.0
"""How long start-up waits for the first listing of queues and namespaces before serving
anyway (not ready; reviews that read the cluster are answered 503 until it arrives)."""

__all__ = ["MAX_BODY", "AdmissionHandler", "WebhookOptions", "WebhookServer", "admission_app"]


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
    pods_failure_policy: str = "Ignore"
    tls_secret_name: str = SECRET_NAME
    """Where replicas in the cluster share a generated certificate ("" : each makes its own)."""
    admission: AdmissionOptions = field(default_factory=AdmissionOptions)
    workers: int = DEFAULT_WORKERS
    max_inflight: int = MAX_INFLIGHT
    max_inflight_bytes: int = MAX_INFLIGHT_BYTES
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)

    @property
    def registers(self) -> bool:
        """Whether to write the webhook configurations (we know where the server is)."""
        return bool(self.webhook_url or (self.webhook_namespace and self.webhook_service_name))


@dataclass(frozen=True, slots=True)
class Answer:
    """What a worker hands back for one request: HTTP status, body, and the outcome."""

    status: int
    body: bytes
    outcome: str
    reason: str = ""


def _verdict(
    service: AdmissionService,
    request: AdmissionRequest,
    cluster: ClusterSnapshot,
    options: AdmissionOptions,
) -> tuple[Verdict, str]:
    mismatch = service.mismatch(request)
    if mismatch:
        return Verdict.deny(mismatch), ""
    if request.operation not in service.operations:
        return Verdict.allow(), ""
    try:
        return service.rule(request, cluster, options), ""
    except FetchNeeded:
        raise  # answered on a worker instead
    except MissingObjectError as err:
        return Verdict.deny(str(err)), ""
    except Exception as err:  # crash-only: this review fails, the server goes on
        log.exception(
            "%s failed on %s %s/%s",
            service.webhook_name,
            log_safe(request.kind),
            log_safe(request.namespace),
            log_safe(request.name),
        )
        reason = type(err).__name__
        return Verdict.deny(f"{service.webhook_name} failed: {log_safe(err)}", code=500), reason


def answer_review(
    service: AdmissionService,
    body: bytes,
    cluster: ClusterSnapshot,
    options: AdmissionOptions,
    deadline: float,
) -> Answer:
    """Everything a request costs in CPU: decode, rule, encode. On a worker thread, or on
    the loop for a small review, where :class:`FetchNeeded` says to go to a worker."""
    if expired(deadline):
        return Answer(504, b"deadline passed before the review was taken up", "expired")
    try:
        request = decode_review(body)
    except ReviewError as err:
        log.warning("%s: bad AdmissionReview: %s", service.path, log_safe(err))
        return Answer(400, orjson.dumps({"error": str(err)}), "error", "bad_review")
    except Exception as err:  # whatever the decoder met: this request fails, not the server
        log.exception("%s: AdmissionReview not decoded", service.path)
        return Answer(400, orjson.dumps({"error": log_safe(err)}), "error", type(err).__name__)
    del body
    verdict, failure = _verdict(service, request, cluster, options)
    try:
        encoded = encode_response(request, verdict)
    except Exception as err:  # e.g. a patch orjson cannot write
        log.exception("%s: answer to %s not encoded", service.path, log_safe(request.uid))
        failure = type(err).__name__
        encoded = error_response(request, f"{service.webhook_name} failed: {log_safe(err)}")
    if failure:
        return Answer(200, encoded, "error", failure)
    if not verdict.allowed:
        log.info(
            "%s denied %s %s/%s: %s",
            service.webhook_name,
            log_safe(request.operation),
            log_safe(request.namespace),
            log_safe(request.name),
            log_safe(verdict.message),
        )
        return Answer(200, encoded, "denied")
    return Answer(200, encoded, "allowed")


class AdmissionHandler:
    """Answers the AdmissionReviews of one service, within the shared budget."""

    def __init__(
        self,
        service: AdmissionService,
        cache: AdmissionCache,
        options: AdmissionOptions,
        workers: Workers,
        budget: Budget,
        metrics: WebhookMetrics,
        inline_body: int = 0,
    ) -> None:
        self.service = service
        self.inline_body = inline_body
        self.cache = cache
        self.options = options
        self.workers = workers
        self.budget = budget
        self.metrics = metrics
        # This path's series, looked up once rather than per request.
        self._latency = metrics.latency.labels(service.path)
        self._outcomes = {o: metrics.requests.labels(service.path, o) for o in OUTCOMES}

    def _done(self, path: str, arrival: float, outcome: str, reason: str = "") -> None:
        self._outcomes[outcome].inc()
        if reason:
            self.metrics.errors.labels(path, reason).inc()
        self._latency.observe(time.monotonic() - arrival)

    def _give_back(self, size: int) -> None:
        self.budget.give_back(size)

    async def handle(self, http: web.Request) -> web.Response:
        arrival = time.monotonic()
        path = self.service.path
        deadline = deadline_after(arrival, http.query.get("timeout"))
        if expired(deadline):
            self._done(path, arrival, "expired")
            return web.Response(status=504, text="the request's deadline has passed")
        size = http.content_length
        if size is not None and size > MAX_BODY:
            self._done(path, arrival, "too_large")
            return _too_large(size)
        reserved = MAX_BODY if size is None else size
        if not self.budget.try_take(reserved):
            self._done(path, arrival, "shed")
            return web.Response(
                status=429,
                text="the webhook is at its in-flight limit; retry",
                headers={"Retry-After": RETRY_AFTER},
            )
        handed = False
        try:
            try:
                if http.content.is_eof():
                    body = await http.read()  # all here already: nothing to wait for
                else:
                    async with asyncio.timeout(deadline - time.monotonic()):
                        body = await http.read()
            except web.HTTPRequestEntityTooLarge:
                self._done(path, arrival, "too_large")
                return _too_large(None)
            except TimeoutError:
                self._done(path, arrival, "expired")
                return web.Response(status=504, text="the request's deadline has passed")
            if self.service.needs_cluster(self.options) and not self.cache.synced.is_set():
                self._done(path, arrival, "error", "not_synced")
                return web.Response(status=503, text="queues and namespaces not listed yet")
            cluster = self.cache.snapshot()
            result: Answer | None = None
            if len(body) <= self.inline_body:
                try:
                    with inline_review():
                        result = answer_review(self.service, body, cluster, self.options, deadline)
                except FetchNeeded:
                    result = None  # an owner to read: a worker waits for it, not the loop
            if result is None:
                job = partial(answer_review, self.service, body, cluster, self.options, deadline)
                del body
                future = self.workers.submit(job, partial(self._give_back, reserved))
                handed = True
                try:
                    result = await asyncio.wait_for(future, deadline - time.monotonic())
                except TimeoutError:
                    self._done(path, arrival, "expired")
                    return web.Response(status=504, text="the request's deadline has passed")
        finally:
            if not handed:
                self._give_back(reserved)
        assert result is not None
        self._done(path, arrival, result.outcome, result.reason)
        if result.status == 200:
            return web.Response(body=result.body, content_type="application/json")
        if result.status == 400:
            return web.Response(status=400, body=result.body, content_type="application/json")
        return web.Response(status=result.status, body=result.body)


def _too_large(size: int | None) -> web.Response:
    got = f"{size} bytes" if size is not None else "more"
    return web.Response(
        status=413,
        text=f"AdmissionReview body: {got} is over the limit of {MAX_BODY} bytes",
    )


APP_CACHE: Final = web.AppKey("admission_cache", AdmissionCache)
APP_METRICS: Final = web.AppKey("webhook_metrics", WebhookMetrics)


def admission_app(
    services: list[AdmissionService],
    store: ClusterStore,
    options: AdmissionOptions,
    *,
    workers: int = DEFAULT_WORKERS,
    max_inflight: int = MAX_INFLIGHT,
    max_inflight_bytes: int = MAX_INFLIGHT_BYTES,
    metrics: WebhookMetrics | None = None,
    inline_body: int = INLINE_BODY,
) -> web.Application:
    """The aiohttp application: one POST route per service. Starting it starts the watch of
    queues and namespaces, the worker threads and the look at a queue policy file for
    changes; cleaning it up stops them."""
    app = web.Application(client_max_size=MAX_BODY)
    cache = AdmissionCache(store)
    metrics = metrics or WebhookMetrics()
    app[APP_CACHE] = cache
    app[APP_METRICS] = metrics
    budget = Budget(max_inflight, max_inflight_bytes)
    metrics.inflight.set_function(lambda: budget.requests)  # read when scraped
    metrics.inflight_bytes.set_function(lambda: budget.bytes)
    pool = Workers(workers)

    policy_file = options.queue_policy if isinstance(options.queue_policy, PolicyFile) else None
    if policy_file is not None:
        policy_file.attach(metrics.registry)

    async def lifetime(_app: web.Application) -> AsyncIterator[None]:
        pool.start()
        await cache.start()
        watch = asyncio.create_task(policy_file.watch()) if policy_file is not None else None
        try:
            await cache.wait_synced(SYNC_TIMEOUT)
        except TimeoutError:
            log.warning("queues and namespaces not listed after %.0fs; serving", SYNC_TIMEOUT)
        yield
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        await cache.stop()
        pool.close()

    app.cleanup_ctx.append(lifetime)
    for service in services:
        inline = inline_body if service.path in INLINE_PATHS else 0
        handler = AdmissionHandler(service, cache, options, pool, budget, metrics, inline)
        app.router.add_post(service.path, handler.handle)
    return app


def health_app(cache: AdmissionCache, metrics: WebhookMetrics) -> web.Application:
    """``/healthz`` (the process answers), ``/readyz`` (queues and namespaces listed) and
    ``/metrics``: liveness must not depend on the API server, readiness does."""

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        if cache.synced.is_set():
            return web.Response(text="ok")
        return web.Response(status=503, text="queues and namespaces not listed yet")

    async def metrics_page(_request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
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
        self.certificate = certificate
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.health: Endpoint | None = None
        self.registered: list[str] = []
        self.metrics = WebhookMetrics()
        self.app: web.Application | None = None
        self.gate: ConnectionGate | None = None
        self._stopped = asyncio.Event()

    def stop(self) -> None:
        self._stopped.set()

    async def _certificate(self) -> ServingCertificate:
        if self.certificate is None:
            options = self.options
            hosts = service_hosts(options.webhook_service_name, options.webhook_namespace)
            if options.tls_secret_name and options.webhook_namespace:
                self.certificate = await shared_certificate(
                    self.store, options.webhook_namespace, options.tls_secret_name, hosts
                )
            else:
                self.certificate = self_signed(hosts)
        return self.certificate

    async def start(self) -> None:
        """Listen, then register the configurations (the API server may call at once)."""
        options = self.options
        certificate = await self._certificate()
        own = options.webhook_namespace or own_namespace()
        admission = replace(
            options.admission, exempt_namespaces=options.admission.exempt_namespaces | {own}
        )
        app = admission_app(
            self.services,
            self.store,
            admission,
            workers=options.workers,
            max_inflight=options.max_inflight,
            max_inflight_bytes=options.max_inflight_bytes,
            metrics=self.metrics,
        )
        self.app = app
        host = options.listen_address or "0.0.0.0"
        self.runner = web.AppRunner(
            app,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=SHUTDOWN_GRACE,
            keepalive_timeout=options.connections.keepalive_timeout,
        )
        if options.enable_healthz and options.healthz_address:
            # Before the app's start-up, which waits for the first listing: the probes
            # must answer (/healthz ok, /readyz not yet) meanwhile.
            self.health = Endpoint(
                health_app(app[APP_CACHE], self.metrics), options.healthz_address
            )
            await self.health.start()
        await self.runner.setup()
        assert self.runner.server is not None
        self.gate = ConnectionGate(
            options.connections,
            certificate.ssl_context(),
            self.runner.server,
            self.metrics.registry,
        )
        site = GatedSite(self.runner, host, options.port, self.gate, backlog=LISTEN_BACKLOG)
        await site.start()
        addresses = self.runner.addresses  # the socket names of this runner's one site
        self.port = addresses[0][1] if addresses else options.port
        log.info(
            "serving %s on https://%s:%d",
            ",".join(s.path for s in self.services),
            host,
            self.port,
        )
        if options.registers:
            target = ClientTarget(
                options.webhook_url,
                options.webhook_namespace,
                options.webhook_service_name,
                exempt_namespace=options.webhook_namespace or own_namespace(),
                pods_failure_policy=options.pods_failure_policy,
                scheduler_names=options.admission.scheduler_names,
                resource_groups=options.admission.resource_groups,
            )
            self.registered = await register(self.store, self.services, target, certificate.ca_pem)

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        if self.health is not None:
            await self.health.stop()
            self.health = None

    async def run(self) -> None:
        try:
            await self.start()
            await self._stopped.wait()
        finally:
            await self.close()

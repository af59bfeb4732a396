"""Small HTTP endpoints of long-running processes: Prometheus metrics and health checks."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def parse_address(address: str) -> tuple[str, int]:
    """``":8080"`` → ("0.0.0.0", 8080); ``"127.0.0.1:0"`` → ("127.0.0.1", 0)."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"{address!r} is not an address of the form [host]:port")
    return host.strip("[]") or "0.0.0.0", int(port)


class Endpoint:
    """One HTTP listener; ``port`` is the bound port (useful with port 0 in tests)."""

    def __init__(self, app: web.Application, address: str) -> None:
        self.app = app
        self.address = address
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        host, port = parse_address(self.address)
        self.runner = web.AppRunner(self.app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port)
        await site.start()
        addresses = self.runner.addresses  # the socket names of this runner's one site
        self.port = addresses[0][1] if addresses else port

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


def metrics_app(registry: CollectorRegistry) -> web.Application:
    async def metrics(_request: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def healthz_app(healthy: Callable[[], tuple[bool, str]]) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        ok, reason = healthy()
        return web.Response(text=reason or ("ok" if ok else "unhealthy"), status=200 if ok else 500)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", healthz)
    return app


async def start_process_endpoints(
    registry: CollectorRegistry,
    listen_address: str,
    healthy: Callable[[], tuple[bool, str]],
    healthz_address: str,
) -> list[Endpoint]:
    """A process's ``/metrics`` and ``/healthz`` listeners, started; an empty address leaves
    that one out."""
    endpoints = []
    if listen_address:
        endpoints.append(Endpoint(metrics_app(registry), listen_address))
    if healthz_address:
        endpoints.append(Endpoint(healthz_app(healthy), healthz_address))
    for endpoint in endpoints:
        await endpoint.start()
    return endpoints

"""The webhook listener's connections: how many are open, how many are in their TLS handshake.

``loop.create_server(ssl=...)`` starts a TLS handshake on every socket it accepts, with no
bound on how many: a client that opens new connections without end costs the server about
300 KiB and a handshake's CPU each, until it runs out of memory (see :mod:`.limits`). So the
listener here accepts plain TCP and this module decides, per socket, before any TLS work:

- over :attr:`ConnectionLimits.max_connections` open connections, the socket is closed at
  once and counted in ``stromboli_webhook_connections_refused_total{reason}``;
- otherwise TLS is started on it (``loop.start_tls``), when fewer than
  :attr:`~ConnectionLimits.max_handshakes` handshakes are in progress, or as soon as one
  ends: its ClientHello waits in the kernel meanwhile, so that a burst of new connections
  from the API server (it opens one per concurrent call when none is idle) costs latency,
  not errors. The handshake must end within :attr:`~ConnectionLimits.handshake_timeout` of
  the accept, waiting included; then the connection is handed to aiohttp's request handler.
  One that sends nothing within :attr:`~ConnectionLimits.first_request_timeout` is closed
  (a flood of idle connections would otherwise hold every place), and aiohttp closes one
  that goes :attr:`~ConnectionLimits.keepalive_timeout` without a request. A connection
  holds its place until it closes, however it closes.

Connections already open are never closed to make room: the API server's keep-alive
connections stay usable under a flood of new ones. Everything runs on the event loop, so
the counts need no lock.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge
from yarl import URL

from stromboli.webhooks.limits import (
    FIRST_REQUEST_TIMEOUT,
    HANDSHAKE_TIMEOUT,
    KEEPALIVE_TIMEOUT,
    MAX_CONNECTIONS,
    MAX_HANDSHAKES,
)

log = logging.getLogger(__name__)

OVER_CONNECTIONS: Final = "max_connections"
HANDSHAKE_TIMED_OUT: Final = "handshake_timeout"
HANDSHAKE_FAILED: Final = "handshake_failed"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The bounds of one listener (``--max-connections``, ``--max-tls-handshakes``,
    ``--keep-alive-timeout``); the handshake timeout counts from the accept."""

    max_connections: int = MAX_CONNECTIONS
    max_handshakes: int = MAX_HANDSHAKES
    handshake_timeout: float = HANDSHAKE_TIMEOUT
    keepalive_timeout: float = KEEPALIVE_TIMEOUT
    first_request_timeout: float = FIRST_REQUEST_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.max_handshakes < 1:
            raise ValueError(
                "max_connections and max_handshakes must be at least 1, got "
                f"{self.max_connections} and {self.max_handshakes}"
            )
        timeouts = (self.handshake_timeout, self.keepalive_timeout, self.first_request_timeout)
        if not all(t > 0 for t in timeouts):
            raise ValueError(
                "handshake, keep-alive and first-request timeouts must be positive seconds, "
                f"got {', '.join(map(str, timeouts))}"
            )


@dataclass(slots=True)
class ConnectionBook:
    """The counts behind the gate, kept apart from sockets so that they can be checked on
    their own. ``open`` includes the connections still in their handshake."""

    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    open: int = 0
    handshaking: int = 0
    peak_open: int = 0
    peak_handshaking: int = 0
    refused: Tally[str] = field(default_factory=Tally)

    def admit(self) -> str:
        """Take a place for a new connection: ``""``, or the bound that refuses it (counted)."""
        if self.open >= self.limits.max_connections:
            self.refused[OVER_CONNECTIONS] += 1
            return OVER_CONNECTIONS
        self.open += 1
        self.peak_open = max(self.peak_open, self.open)
        return ""

    def start_handshake(self) -> bool:
        """Take a handshake place for an admitted connection; ``False``: it waits."""
        if self.handshaking >= self.limits.max_handshakes:
            return False
        self.handshaking += 1
        self.peak_handshaking = max(self.peak_handshaking, self.handshaking)
        return True

    def handshake_over(self) -> None:
        """The handshake ended, either way; the connection keeps its place."""
        self.handshaking -= 1

    def closed(self) -> None:
        self.open -= 1


class ConnectionMetrics:
    """``stromboli_webhook_connections*``: the gauges read the book when scraped."""

    def __init__(self, registry: CollectorRegistry, book: ConnectionBook) -> None:
        self.refused = Counter(
            "stromboli_webhook_connections_refused",
            "Connections closed as they were accepted, by the bound they were over.",
            ["reason"],
            registry=registry,
        )
        self.silent = Counter(
            "stromboli_webhook_silent_connections_closed",
            "Connections closed because no request began within the first-request timeout.",
            registry=registry,
        )
        self.failed = Counter(
            "stromboli_webhook_tls_handshake_failures",
            "TLS handshakes that failed or did not finish in time, by reason.",
            ["reason"],
            registry=registry,
        )
        opened = Gauge(
            "stromboli_webhook_open_connections",
            "Connections open now, including those in their TLS handshake.",
            registry=registry,
        )
        opened.set_function(lambda: book.open)
        handshakes = Gauge(
            "stromboli_webhook_tls_handshakes_in_progress",
            "Connections in their TLS handshake now.",
            registry=registry,
        )
        handshakes.set_function(lambda: book.handshaking)
        self.waiting = Gauge(
            "stromboli_webhook_tls_handshakes_waiting",
            "Accepted connections waiting for a handshake place.",
            registry=registry,
        )


class _Tls(asyncio.Protocol):
    """An admitted connection: stands between the TLS transport and aiohttp's handler, so
    that its place is given back exactly once when it closes. Data that the TLS layer
    delivers before the handler is attached (a request sent with the handshake's last
    flight) is kept and passed on in order."""

    __slots__ = ("_book", "_eof", "_handler", "_pending", "_released", "_silence")

    def __init__(self, book: ConnectionBook, handler: asyncio.Protocol) -> None:
        self._book = book
        self._handler = handler
        self._pending: list[bytes] | None = []
        self._eof = False
        self._released = False
        self._silence: asyncio.TimerHandle | None = None

    def attach(
        self, transport: asyncio.Transport, first_request: float, silent: Callable[[], None]
    ) -> None:
        if self._released:
            return  # closed between the handshake and now
        self._handler.connection_made(transport)
        pending, self._pending = self._pending or [], None
        if not pending:
            self._silence = asyncio.get_running_loop().call_later(
                first_request, self._close_silent, transport, silent
            )
        for data in pending:
            self._handler.data_received(data)
        if self._eof:
            self._handler.eof_received()

    def _close_silent(self, transport: asyncio.Transport, silent: Callable[[], None]) -> None:
        self._silence = None
        silent()
        transport.abort()

    def release(self) -> None:
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None
        if not self._released:
            self._released = True
            self._book.closed()

    def data_received(self, data: bytes) -> None:
        if self._pending is None:
            if self._silence is not None:
                self._silence.cancel()
                self._silence = None
            self._handler.data_received(data)
        else:
            self._pending.append(data)

    def eof_received(self) -> bool | None:
        if self._pending is None:
            return self._handler.eof_received()
        self._eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        attached = self._pending is None and not self._released
        self.release()
        if attached:
            self._handler.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._pending is None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._pending is None:
            self._handler.resume_writing()


class _Arrival(asyncio.Protocol):
    """A socket just accepted: the gate decides what becomes of it."""

    __slots__ = ("_gate",)

    def __init__(self, gate: ConnectionGate) -> None:
        self._gate = gate

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._gate.arrived(transport)


class ConnectionGate:
    """Admits, refuses and upgrades the sockets of one listener (see the module docstring)."""

    def __init__(
        self,
        limits: ConnectionLimits,
        ssl_context: ssl.SSLContext,
        handler_factory: Callable[[], asyncio.Protocol],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.limits = limits
        self.book = ConnectionBook(limits)
        self.ssl_context = ssl_context
        self.handler_factory = handler_factory
        self.metrics = ConnectionMetrics(registry or CollectorRegistry(), self.book)
        self.waiting: deque[tuple[asyncio.Transport, _Tls, float]] = deque()
        self.metrics.waiting.set_function(lambda: len(self.waiting))
        self._handshakes: set[asyncio.Task[None]] = set()

    def protocol(self) -> asyncio.Protocol:
        """The protocol factory for ``loop.create_server`` (plain TCP)."""
        return _Arrival(self)

    def arrived(self, transport: asyncio.Transport) -> None:
        reason = self.book.admit()
        if reason:
            self.metrics.refused.labels(reason).inc()
            transport.abort()  # no TLS work, nothing read: the cheapest no
            return
        transport.pause_reading()  # the ClientHello waits for start_tls, not for us
        tls = _Tls(self.book, self.handler_factory())
        loop = asyncio.get_running_loop()
        if self.book.start_handshake():
            self._start(transport, tls, self.limits.handshake_timeout)
        else:
            self.waiting.append((transport, tls, loop.time()))

    def _start(self, transport: asyncio.Transport, tls: _Tls, timeout: float) -> None:
        task = asyncio.get_running_loop().create_task(self._handshake(transport, tls, timeout))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    def _next(self) -> None:
        """Give the handshake places that are free to the connections waiting longest;
        those that have waited out their handshake time are closed instead."""
        now = asyncio.get_running_loop().time()
        while self.waiting and self.book.handshaking < self.limits.max_handshakes:
            transport, tls, accepted = self.waiting.popleft()
            left = self.limits.handshake_timeout - (now - accepted)
            if left <= 0:
                self._failed(transport, tls, HANDSHAKE_TIMED_OUT)
                continue
            self.book.start_handshake()
            self._start(transport, tls, left)

    async def _handshake(self, transport: asyncio.Transport, tls: _Tls, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                secured = await loop.start_tls(
                    transport,
                    tls,
                    self.ssl_context,
                    server_side=True,
                    ssl_handshake_timeout=self.limits.handshake_timeout + 1,  # ours ends first
                )
        except TimeoutError:
            self._failed(transport, tls, HANDSHAKE_TIMED_OUT)
            return
        except Exception as err:  # a bad ClientHello, a reset: this connection, not the server
            log.debug("TLS handshake failed: %s", err)
            self._failed(transport, tls, HANDSHAKE_FAILED)
            return
        except BaseException:  # cancelled: the listener is stopping
            transport.abort()
            tls.release()
            raise
        finally:
            self.book.handshake_over()
            self._next()
        if secured is None:  # the connection closed as the handshake ended
            tls.release()
            return
        tls.attach(secured, self.limits.first_request_timeout, self.metrics.silent.inc)

    def _failed(self, transport: asyncio.Transport, tls: _Tls, reason: str) -> None:
        self.metrics.failed.labels(reason).inc()
        transport.abort()
        tls.release()

    def close(self) -> None:
        """Abandon the handshakes in progress and waiting (the listener is stopping); open
        connections are aiohttp's to close."""
        while self.waiting:
            transport, tls, _accepted = self.waiting.popleft()
            transport.abort()
            tls.release()
        for task in list(self._handshakes):
            task.cancel()


class GatedSite(web.BaseSite):
    """An aiohttp site whose sockets pass through a :class:`ConnectionGate`."""

    __slots__ = ("_gate", "_host", "_port")

    def __init__(
        self, runner: web.BaseRunner, host: str, port: int, gate: ConnectionGate, backlog: int
    ) -> None:
        super().__init__(runner, backlog=backlog)
        self._host = host
        self._port = port
        self._gate = gate

    @property
    def name(self) -> str:
        return str(URL.build(scheme="https", host=self._host, port=self._port))

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._gate.protocol,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
        )

    async def stop(self) -> None:
        self._gate.close()
        await super().stop()

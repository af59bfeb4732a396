"""The listener under connection floods (issue 10): open connections are bounded and the
excess closed at accept and counted, TLS handshakes in progress are bounded and the rest
wait their turn, stalled handshakes and idle connections time out, and a keep-alive client
goes on being served throughout.

The server is the whole WebhookServer with real TLS on loopback; the assertions are counts
(the server's book and its metrics), never timings. Waits have generous hang guards only.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.cli import main
from stromboli.core.cli import webhook as cli_webhook
from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.webhooks import limits
from stromboli.webhooks.connections import (
    HANDSHAKE_FAILED,
    HANDSHAKE_TIMED_OUT,
    OVER_CONNECTIONS,
    ConnectionBook,
    ConnectionGate,
    ConnectionLimits,
)
from stromboli.webhooks.server import WebhookOptions, WebhookServer
from stromboli.webhooks.tls import ServingCertificate, self_signed

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


# --- the book, pure ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    max_connections=st.integers(1, 8),
    max_handshakes=st.integers(1, 8),
    steps=st.lists(st.tuples(st.sampled_from("afdc"), st.integers(0, 50)), max_size=200),
)
def test_the_book_never_passes_its_bounds_and_counts_every_refusal(
    max_connections: int, max_handshakes: int, steps: list[tuple[str, int]]
) -> None:
    book = ConnectionBook(ConnectionLimits(max_connections, max_handshakes))
    waiting, shaking, established = 0, 0, 0  # the model
    refused = 0
    for step, _pick in steps:
        if step == "a":  # a socket arrives: refused, or admitted to shake hands or wait
            full = waiting + shaking + established >= max_connections
            assert book.admit() == (OVER_CONNECTIONS if full else "")
            if full:
                refused += 1
            elif book.start_handshake():
                assert shaking < max_handshakes
                shaking += 1
            else:
                assert shaking == max_handshakes
                waiting += 1
        elif step in "fd" and shaking:  # a handshake finishes (f) or fails (d)
            book.handshake_over()
            shaking -= 1
            if step == "f":
                established += 1
            else:
                book.closed()
            if waiting:  # the place goes to a waiting connection
                assert book.start_handshake()
                waiting, shaking = waiting - 1, shaking + 1
        elif step == "c" and established:  # an established connection closes
            book.closed()
            established -= 1
        assert (book.open, book.handshaking) == (waiting + shaking + established, shaking)
        assert book.open <= max_connections and book.handshaking <= max_handshakes
    assert book.refused[OVER_CONNECTIONS] == refused
    assert book.peak_open <= max_connections and book.peak_handshaking <= max_handshakes


@pytest.mark.parametrize(
    "bad",
    [
        {"max_connections": 0},
        {"max_handshakes": -1},
        {"handshake_timeout": 0},
        {"keepalive_timeout": float("nan")},
        {"first_request_timeout": -1.0},
    ],
)
def test_limits_that_cannot_work_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        ConnectionLimits(**bad)


def test_the_cli_repeats_the_defaults_and_refuses_a_zero_bound() -> None:
    assert cli_webhook.MAX_CONNECTIONS == limits.MAX_CONNECTIONS
    assert cli_webhook.MAX_HANDSHAKES == limits.MAX_HANDSHAKES
    assert cli_webhook.KEEPALIVE_TIMEOUT == limits.KEEPALIVE_TIMEOUT
    runner = CliRunner()
    for flag in ("--max-connections=0", "--max-tls-handshakes=0", "--keep-alive-timeout=0"):
        result = runner.invoke(main, ["webhook-manager", flag])
        assert result.exit_code == 2, result.output
        assert flag.split("=")[0] in result.output


# --- the server under a flood ----------------------------------------------------------------


def pod_review() -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "i"}]},
    }
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "name": "p",
        "namespace": "team",
        "object": pod,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return orjson.dumps(review)


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(3000):  # a hang guard of 30 s, not a speed check
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


@pytest.fixture
def certificate() -> ServingCertificate:
    return self_signed(["127.0.0.1"])


@pytest.fixture
def trust(certificate: ServingCertificate) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=certificate.ca_pem.decode())


@contextlib.asynccontextmanager
async def serving(
    certificate: ServingCertificate, connections: ConnectionLimits
) -> AsyncIterator[WebhookServer]:
    options = WebhookOptions(
        listen_address="127.0.0.1",
        port=0,
        enabled_admission="/pods/validate",
        connections=connections,
    )
    server = WebhookServer(MemoryStore(SystemClock()), options, certificate)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def gate_of(server: WebhookServer) -> ConnectionGate:
    assert server.gate is not None
    return server.gate


def sample(server: WebhookServer, name: str, reason: str) -> float:
    value = server.metrics.registry.get_sample_value(name, {"reason": reason})
    return value or 0.0


async def tls_attempt(port: int, trust: ssl.SSLContext) -> Stream | None:
    """A new TLS connection, or ``None`` when the server closed it instead."""
    try:
        return await asyncio.open_connection("127.0.0.1", port, ssl=trust, ssl_handshake_timeout=30)
    except (OSError, asyncio.IncompleteReadError):  # reset, EOF in the handshake, SSLError
        return None


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 30) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def close_all(streams: list[Stream]) -> None:
    for _reader, writer in streams:
        writer.transport.abort()


async def test_a_flood_of_connections_is_bounded_and_a_keep_alive_client_is_served(
    certificate: ServingCertificate, trust: ssl.SSLContext
) -> None:
    bounds = ConnectionLimits(max_connections=16, max_handshakes=4, handshake_timeout=60)
    async with serving(certificate, bounds) as server:
        book = gate_of(server).book
        url = f"https://127.0.0.1:{server.port}/pods/validate?timeout=10s"
        created = 0

        async def on_create(*_args: Any) -> None:
            nonlocal created
            created += 1

        tracing = aiohttp.TraceConfig()
        tracing.on_connection_create_end.append(on_create)
        connector = aiohttp.TCPConnector(limit=1, ssl=trust)
        async with aiohttp.ClientSession(connector=connector, trace_configs=[tracing]) as api:

            async def admitted() -> bool:
                async with api.post(url, data=pod_review()) as answer:
                    return answer.status == 200 and (await answer.json())["response"]["allowed"]

            assert await admitted()  # the API server's keep-alive connection, opened first
            assert book.open == 1

            # 50 sockets that never start their handshake: 4 hold the handshake places,
            # 11 wait for one, 35 are refused.
            stalled = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(50)]
            await until(lambda: book.open + book.refused[OVER_CONNECTIONS] == 51, "not accepted")
            assert (book.open, book.handshaking, len(gate_of(server).waiting)) == (16, 4, 11)

            def ended(stream: Stream) -> bool:
                return stream[0].at_eof() or stream[0].exception() is not None

            await until(lambda: sum(map(ended, stalled)) == 35, "the refused were not closed")
            for _ in range(20):  # the keep-alive client is served while the server is full
                assert await admitted()
            close_all(stalled)  # they give up: handshakes fail, the waiting get their turn
            await until(lambda: book.open == 1, "failed handshakes kept their places")
            failed = "stromboli_webhook_tls_handshake_failures_total"
            assert sample(server, failed, HANDSHAKE_FAILED) == 15

            # 100 complete TLS connections, one after another: 15 fit beside the client.
            flood = [s for _ in range(100) if (s := await tls_attempt(server.port, trust))]
            assert len(flood) == 15
            assert book.open == 16 and book.refused[OVER_CONNECTIONS] == 35 + 85
            for _ in range(20):
                assert await admitted()
            assert created == 1  # on its one connection, which the flood never took

            assert book.peak_open <= 16 and book.peak_handshaking <= 4
            refused = "stromboli_webhook_connections_refused_total"
            assert sample(server, refused, OVER_CONNECTIONS) == 120
            gauge = server.metrics.registry.get_sample_value("stromboli_webhook_open_connections")
            assert gauge == 16

            close_all(flood)
            await until(lambda: book.open == 1, "closed connections kept their places")
            assert book.handshaking == 0

        later = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust))
        async with later, later.post(url, data=pod_review()) as answer:
            assert answer.status == 200  # room again for new clients


def request_bytes(body: bytes, close: bool = False) -> bytes:
    head = (
        "POST /pods/validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n" + ("Connection: close\r\n" if close else "") + "\r\n"
    )
    return head.encode() + body


async def test_stalled_handshakes_and_silent_connections_are_closed(
    certificate: ServingCertificate, trust: ssl.SSLContext
) -> None:
    bounds = ConnectionLimits(handshake_timeout=0.3, first_request_timeout=0.3)
    async with serving(certificate, bounds) as server:
        book = gate_of(server).book
        reader, _writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await closed_by_server(reader)  # sent no ClientHello
        failed = "stromboli_webhook_tls_handshake_failures_total"
        await until(lambda: sample(server, failed, HANDSHAKE_TIMED_OUT) == 1, "not counted")
        secured = await tls_attempt(server.port, trust)
        assert secured is not None
        assert await closed_by_server(secured[0])  # handshake done, no request sent
        await until(lambda: book.open == 0, "timed-out connections kept their places")
        assert sample(server, failed, HANDSHAKE_FAILED) == 0
        silent = server.metrics.registry.get_sample_value(
            "stromboli_webhook_silent_connections_closed_total"
        )
        assert silent == 1


async def test_a_connection_idle_after_its_requests_is_closed_after_the_keep_alive_timeout(
    certificate: ServingCertificate, trust: ssl.SSLContext
) -> None:
    bounds = ConnectionLimits(first_request_timeout=0.2, keepalive_timeout=5.0)
    async with serving(certificate, bounds) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=trust)
        for _ in range(3):  # answered one after another, on the one connection
            writer.write(request_bytes(pod_review()))
            status = await asyncio.wait_for(reader.readline(), 30)
            assert status.startswith(b"HTTP/1.1 200")
            headers = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            length = int(headers.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await asyncio.wait_for(reader.readexactly(length), 30)
            await asyncio.sleep(0.5)  # past the first-request timeout: not closed for it
        assert await closed_by_server(reader)  # then idle: closed
        await until(lambda: gate_of(server).book.open == 0, "the idle one kept its place")
        silent = server.metrics.registry.get_sample_value(
            "stromboli_webhook_silent_connections_closed_total"
        )
        assert silent == 0


async def test_a_request_in_the_handshakes_last_flight_is_answered(
    certificate: ServingCertificate, trust: ssl.SSLContext
) -> None:
    """Bytes the TLS layer delivers before aiohttp's handler is attached are not lost: many
    connections each write their request at once after the handshake."""
    async with serving(certificate, ConnectionLimits()) as server:
        request = request_bytes(pod_review(), close=True)

        async def one() -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=trust)
            writer.write(request)
            answer = await asyncio.wait_for(reader.read(), 30)
            writer.close()
            return answer

        answers = await asyncio.gather(*(one() for _ in range(20)))
        assert all(a.startswith(b"HTTP/1.1 200") and b'"allowed":true' in a for a in answers)
        await until(lambda: gate_of(server).book.open == 0, "closed connections kept places")


async def test_a_connection_over_the_handshake_bound_waits_its_turn(
    certificate: ServingCertificate, trust: ssl.SSLContext
) -> None:
    bounds = ConnectionLimits(max_handshakes=1, handshake_timeout=60)
    async with serving(certificate, bounds) as server:
        book = gate_of(server).book
        stall = await asyncio.open_connection("127.0.0.1", server.port)  # holds the one place
        await until(lambda: book.handshaking == 1, "the stalled socket was not taken up")
        client = asyncio.create_task(tls_attempt(server.port, trust))
        await until(lambda: len(gate_of(server).waiting) == 1, "the client did not wait")
        assert not client.done()
        close_all([stall])
        secured = await client
        assert secured is not None  # its turn came: a wait, not a refusal
        assert book.peak_handshaking == 1 and not book.refused
        close_all([secured])
        await until(lambda: book.open == 0, "closed connections kept their places")


async def test_a_client_that_speaks_no_tls_is_closed_and_counted(
    certificate: ServingCertificate,
) -> None:
    async with serving(certificate, ConnectionLimits()) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request_bytes(pod_review()))  # plain HTTP to the HTTPS port
        assert await closed_by_server(reader)
        failed = "stromboli_webhook_tls_handshake_failures_total"
        await until(lambda: sample(server, failed, HANDSHAKE_FAILED) == 1, "not counted")
        await until(lambda: gate_of(server).book.open == 0, "it kept its place")


class Recorder(asyncio.Protocol):
    """The protocol behind the TLS layer, as aiohttp's handler sees its events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, bytes]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.events.append(("made", b""))

    def data_received(self, data: bytes) -> None:
        self.events.append(("data", data))

    def eof_received(self) -> None:
        self.events.append(("eof", b""))

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append(("lost", b""))


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(st.binary(min_size=1, max_size=8), max_size=5),
    after=st.lists(st.binary(min_size=1, max_size=8), max_size=5),
    eof_early=st.booleans(),
    lost_early=st.booleans(),
)
def test_what_arrives_before_the_handler_is_attached_reaches_it_in_order(
    before: list[bytes], after: list[bytes], eof_early: bool, lost_early: bool
) -> None:
    from stromboli.webhooks.connections import _Tls

    async def scenario() -> None:
        book = ConnectionBook()
        assert book.admit() == ""
        handler = Recorder()
        tls = _Tls(book, handler)
        for data in before:
            tls.data_received(data)
        if eof_early:
            tls.eof_received()
        if lost_early:  # the connection went between the handshake and the attach
            tls.connection_lost(None)
            server, client = socket.socketpair()
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
                asyncio.Protocol, server
            )
            tls.attach(transport, 60, lambda: None)
            transport.abort()
            client.close()
            assert handler.events == [] and book.open == 0
            tls.release()
            assert book.open == 0  # given back once
            return
        server, client = socket.socketpair()
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
            asyncio.Protocol, server
        )
        tls.attach(transport, 60, lambda: None)
        later = [] if eof_early else after  # nothing follows an end of stream
        for data in later:
            tls.data_received(data)
        tls.connection_lost(None)
        tls.connection_lost(None)
        expected = [("made", b"")] + [("data", d) for d in before]
        expected += [("eof", b"")] if eof_early else []
        expected += [("data", d) for d in later] + [("lost", b"")]
        assert handler.events == expected
        assert book.open == 0
        transport.abort()
        client.close()

    asyncio.run(scenario())

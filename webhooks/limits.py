"""How much admission work the server takes on at once, and until when a request is wanted.

**Body size.** The API server refuses request bodies over 3 MiB, so no object it admits is
larger; an UPDATE review carries the object and the old object, and the envelope (user info,
options) is small. ``MAX_BODY`` = 2 × 3 MiB + 1 MiB. A parsed JSON document takes up to about
27 times its size in Python objects (measured: 7 MiB of ``[{},{},…]`` grows the heap by
190 MB), so the limit alone does not keep the server under its 512 Mi; the byte budget does.
Measured with ``benchmarks/webhook_bench.py --memory``: one such review takes the process to
345 MiB peak RSS, eight sent at once 411 MiB (one is taken at a time, the rest shed).

**In-flight budget.** A request holds its body length (``MAX_BODY`` when it sends none) from
arrival until a worker is finished with it; ``MAX_INFLIGHT_BYTES`` admits one review of the
largest size next to many ordinary ones (a pod review is a few KB), which bounds parsing to
about 220 MB on top of the process's ~80 MB. ``MAX_INFLIGHT`` bounds the number of requests.
Over either bound a request is shed at once with HTTP 429 and ``Retry-After``: the API server
treats a 429 from a webhook as a transient failure and retries it with back-off within its
own timeout (possibly on the other replica behind the Service), and then applies the
webhook's ``failurePolicy``. An ``allowed: false`` answer would instead refuse the object
outright, turning an overload into user-visible denials even where ``failurePolicy: Ignore``
says to let objects through.

**Deadlines.** The API server appends ``?timeout=10s`` (its ``timeoutSeconds``) to the URL and
gives up after it; a request whose deadline has passed before a worker takes it is dropped
(answered 504 without running the rule), so an overload never leaves a backlog that answers
nobody for minutes after the load stops.

**Connections.** Each TLS connection costs the process about 300 KiB (asyncio's 256 KiB read
buffer per TLS connection, OpenSSL's state, aiohttp's handler), so a client that opens new
connections without end grows the server without end (measured before this bound: 3.8 GiB at
800 new connections a second). At most ``MAX_CONNECTIONS`` are open at once; one more is
closed as it is accepted, before any TLS work, and counted. At most ``MAX_HANDSHAKES`` are in
their TLS handshake at once (the CPU-heavy part; the others wait for a place). A handshake not
finished within ``HANDSHAKE_TIMEOUT`` of the accept is abandoned, a new connection that sends
nothing within ``FIRST_REQUEST_TIMEOUT`` after it is closed, and so is one that sends no
request for ``KEEPALIVE_TIMEOUT``. The API server reuses keep-alive connections
to a webhook and opens another only for a concurrent call, so a few API servers need a few
dozen connections, well under the bound.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Final

MiB: Final = 1024 * 1024
MAX_BODY: Final = 7 * MiB
MAX_INFLIGHT_BYTES: Final = 8 * MiB
MAX_INFLIGHT: Final = 64
MAX_CONNECTIONS: Final = 256
MAX_HANDSHAKES: Final = 32
HANDSHAKE_TIMEOUT: Final = 5.0
"""Seconds a TLS handshake may take: one takes milliseconds, and the API server gives up on
the whole call after its ``timeoutSeconds`` (10 s by default)."""
FIRST_REQUEST_TIMEOUT: Final = 5.0
"""Seconds a new connection may take to start its first request after the handshake: a
client connects because it has a request to send, and a connection that sends none would
hold its place until the keep-alive timeout."""
KEEPALIVE_TIMEOUT: Final = 60.0
"""Seconds an open connection may go without a request before it is closed."""
INLINE_BODY: Final = 64 * 1024
"""Reviews up to this size are answered on the event loop: a pod's review (a few KB) takes
a fraction of a millisecond there, less than the hand-over to a worker thread and back, which
on a busy machine waits for the interpreter lock (up to its 5 ms switch interval)."""
DEFAULT_TIMEOUT: Final = 10.0
"""The API server's default ``timeoutSeconds``, used when a request names none."""
MAX_TIMEOUT: Final = 30.0
"""The largest ``timeoutSeconds`` a webhook configuration may have."""
DEADLINE_MARGIN: Final = 0.05
"""Seconds taken off a deadline for the way back: an answer that would arrive at the deadline
is no use."""
RETRY_AFTER: Final = "1"

_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration (``10s``, ``1m30s``, ``500ms``); ``None`` when it is not one
    (or is longer than 40 characters: the API server writes short ones)."""
    if len(text) > 40 or not _DURATION.fullmatch(text):
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(text))


def request_timeout(query_timeout: str | None) -> float:
    """How long the API server waits for this request: its ``timeout`` query parameter,
    capped at :data:`MAX_TIMEOUT`; :data:`DEFAULT_TIMEOUT` when absent or unreadable."""
    seconds = go_duration(query_timeout) if query_timeout else None
    if seconds is None:
        return DEFAULT_TIMEOUT
    return min(seconds, MAX_TIMEOUT)


def deadline_after(arrival: float, query_timeout: str | None) -> float:
    """The ``time.monotonic()`` after which nobody waits for the answer."""
    return arrival + request_timeout(query_timeout) - DEADLINE_MARGIN


def expired(deadline: float) -> bool:
    return time.monotonic() >= deadline


@dataclass(slots=True)
class Budget:
    """Requests and body bytes in flight, with their bounds (see the module docstring)."""

    max_requests: int = MAX_INFLIGHT
    max_bytes: int = MAX_INFLIGHT_BYTES
    requests: int = 0
    bytes: int = 0

    def try_take(self, size: int) -> bool:
        """Reserve room for one request of ``size`` bytes; ``False`` when there is none.
        Called and released on the event loop only, so no lock is needed."""
        if self.requests >= self.max_requests or self.bytes + size > self.max_bytes:
            return False
        self.requests += 1
        self.bytes += size
        return True

    def give_back(self, size: int) -> None:
        self.requests -= 1
        self.bytes -= size

"""Client-side request rate limit: a token bucket, as client-go's ``--kube-api-qps/-burst``.

The bucket holds up to ``burst`` tokens and refills at ``qps`` per second; every request takes
one. Instead of polling for a free token, a request *reserves* the next one, possibly driving
the balance negative, and sleeps until the refill covers it. Reservations are handed out in call
order, so concurrent binders are served first come, first served and the limiter never wakes
more tasks than it can admit. A reservation that is cancelled while sleeping is not refunded:
the limit is an upper bound on the rate, which an unused token cannot break.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable


class TokenBucket:
    """``qps`` requests per second on average, at most ``burst`` at once; ``qps <= 0`` or
    ``inf`` means no limit. ``monotonic`` is the time source (injected for tests)."""

    __slots__ = ("_last", "_monotonic", "_tokens", "burst", "qps")

    def __init__(self, qps: float, burst: int, monotonic: Callable[[], float]) -> None:
        if burst < 1:
            raise ValueError(f"burst must be at least 1 (got {burst}); a request takes one token")
        self.qps = float(qps)
        self.burst = int(burst)
        self._monotonic = monotonic
        self._tokens = float(burst)
        self._last = monotonic()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0 or math.isinf(self.qps)

    def tokens(self) -> float:
        """The balance now (negative while reservations are waiting for the refill)."""
        self._refill()
        return self._tokens

    def _refill(self) -> None:
        now = self._monotonic()
        elapsed = now - self._last
        self._last = now
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)

    def reserve(self) -> float:
        """Take the next token; the seconds to wait before using it (0 when one is free)."""
        if self.unlimited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        """Wait for a token (returns at once while the burst lasts)."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)

"""The queue policy file the webhook enforces (``--queue-policy``), reloaded when it changes.

A ConfigMap mounted as a volume changes by a symlink swap, which no inotify watch on the file
itself sees, so the file is polled: every :data:`CHECK_PERIOD` seconds its ``stat`` (device,
inode, size, modification time, following links) is compared with the last one, on a thread
so that a slow volume never holds up the event loop. A changed file is loaded again; the
rules read :meth:`PolicyFile.current` once per review, so a review sees one version whole.

A version that fails to load (bad YAML, a schema error, a file gone) never replaces the
policy in force: the error is logged once per version, counted in
``stromboli_webhook_queue_policy_reloads_total{outcome="failure"}``, and
``stromboli_webhook_queue_policy_stale`` is 1 until a good version arrives. The first load
has nothing to fall back on, so it raises and the process does not start.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

from stromboli.core.admission.policy import PolicyError, QueuePolicy, load_policy
from stromboli.core.logsafe import log_safe

log = logging.getLogger(__name__)

CHECK_PERIOD: Final = 5.0
"""Seconds between two looks at the file; the kubelet takes up to a minute to update a
mounted ConfigMap anyway."""

Signature = tuple[int, int, int, int] | None


def _signature(path: Path) -> Signature:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reloads = Counter(
            "stromboli_webhook_queue_policy_reloads",
            "Loads of the queue policy file after a change, by outcome (success, failure).",
            ["outcome"],
            registry=registry,
        )
        self.stale = Gauge(
            "stromboli_webhook_queue_policy_stale",
            "1 while the queue policy file on disk could not be loaded and an older version "
            "is enforced.",
            registry=registry,
        )


class PolicyFile:
    """The policy loaded from ``path``; a :class:`~stromboli.core.admission.policy.PolicySource`."""

    def __init__(self, path: str | Path, period: float = CHECK_PERIOD) -> None:
        self.path = Path(path)
        self.period = period
        self._signature = _signature(self.path)
        self._policy = load_policy(self.path)  # no policy to keep yet: a bad file stops here
        self.stale = False
        self.successes = 0
        self.failures = 0
        self._metrics: _Metrics | None = None

    def current(self) -> QueuePolicy:
        return self._policy

    def attach(self, registry: CollectorRegistry) -> None:
        """Publish the reload metrics in ``registry`` (the webhook's ``/metrics``)."""
        if self._metrics is not None and self._metrics.registry is registry:
            return
        self._metrics = _Metrics(registry)
        self._metrics.reloads.labels("success").inc(self.successes)
        self._metrics.reloads.labels("failure").inc(self.failures)
        self._metrics.stale.set(1 if self.stale else 0)

    def _outcome(self, success: bool) -> None:
        self.stale = not success
        if success:
            self.successes += 1
        else:
            self.failures += 1
        if self._metrics is not None:
            self._metrics.reloads.labels("success" if success else "failure").inc()
            self._metrics.stale.set(0 if success else 1)

    def check(self) -> bool:
        """Load the file again if it changed since the last look; whether the policy in
        force changed. Blocking: call it on a thread."""
        signature = _signature(self.path)
        if signature == self._signature:
            return False
        self._signature = signature  # a bad version is reported once, not every period
        if signature is None:
            log.error(
                "queue policy %s is gone; still enforcing the version loaded before",
                log_safe(str(self.path)),
            )
            self._outcome(False)
            return False
        try:
            policy = load_policy(self.path)
        except PolicyError as err:
            log.error(
                "queue policy not reloaded, the version loaded before stays: %s",
                log_safe(str(err), 4000),
            )
            self._outcome(False)
            return False
        self._policy = policy
        self._outcome(True)
        log.info(
            "queue policy %s reloaded: %d namespace and %d queue entries",
            log_safe(str(self.path)),
            len(policy.namespaces),
            len(policy.queues),
        )
        return True

    async def watch(self) -> None:
        """Check the file every :attr:`period` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.period)
            try:
                await asyncio.to_thread(self.check)
            except Exception:  # crash-only: the check fails, the watch and the server go on
                log.exception("queue policy %s: check failed", log_safe(str(self.path)))

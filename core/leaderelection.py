"""Leader election on a ``coordination.k8s.io/v1`` Lease, as Kubernetes components do.

A candidate takes the Lease when it is free or its holder stopped renewing it for longer than
the lease duration, then renews it every ``renew_period``; it is leader while its last renewal
is younger than the lease duration. Only one replica of a process schedules at a time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from datetime import datetime, timedelta

from stromboli.core.clock import Clock, format_micro_time, parse_time
from stromboli.core.cluster.errors import AlreadyExistsError, ApiError, ConflictError, NotFoundError
from stromboli.core.cluster.store import ClusterStore

log = logging.getLogger(__name__)
LEASE = ("coordination.k8s.io/v1", "Lease")


class LeaderElector:
    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_period: float = 2.0,
    ) -> None:
        self.store = store
        self.clock = clock
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_period = renew_period
        self._renewed_at: float | None = None

    @classmethod
    def for_this_process(
        cls, store: ClusterStore, clock: Clock, name: str, namespace: str
    ) -> LeaderElector:
        """A candidate named after this host and process, as Kubernetes components are."""
        return cls(store, clock, name, namespace, f"{socket.gethostname()}_{os.getpid()}")

    @property
    def is_leader(self) -> bool:
        if self._renewed_at is None:
            return False
        return self.clock.monotonic() - self._renewed_at < self.lease_duration

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        now = self.clock.now()
        stamp = format_micro_time(now)
        try:
            lease = await self.store.get(*LEASE, self.name, self.namespace)
        except NotFoundError:
            lease = None
        except ApiError as err:
            log.warning("cannot read lease %s/%s: %s", self.namespace, self.name, err)
            return self.is_leader
        try:
            if lease is None:
                await self.store.create(
                    {
                        "apiVersion": LEASE[0],
                        "kind": LEASE[1],
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": {
                            "holderIdentity": self.identity,
                            "leaseDurationSeconds": int(self.lease_duration),
                            "acquireTime": stamp,
                            "renewTime": stamp,
                            "leaseTransitions": 0,
                        },
                    }
                )
            else:
                spec = lease.setdefault("spec", {})
                holder = spec.get("holderIdentity")
                if holder and holder != self.identity and not self._expired(spec, now):
                    self._renewed_at = None
                    return False
                if holder != self.identity:
                    spec["holderIdentity"] = self.identity
                    spec["acquireTime"] = stamp
                    spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
                spec["renewTime"] = stamp
                spec["leaseDurationSeconds"] = int(self.lease_duration)
                await self.store.update(lease)
        except (ConflictError, AlreadyExistsError):
            return self.is_leader
        except ApiError as err:
            log.warning("cannot update lease %s/%s: %s", self.namespace, self.name, err)
            return self.is_leader
        self._renewed_at = self.clock.monotonic()
        return True

    def _expired(self, spec: dict, now: datetime) -> bool:
        renewed = spec.get("renewTime")
        if not renewed:
            return True
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return parse_time(renewed) + timedelta(seconds=duration) < now

    async def acquire(self) -> None:
        """Wait until this candidate leads."""
        while not await self.try_acquire_or_renew():
            await asyncio.sleep(self.renew_period)

    async def acquire_unless(self, stopping: asyncio.Event) -> bool:
        """Wait until this candidate leads (True) or ``stopping`` is set first (False)."""
        acquiring = asyncio.create_task(self.acquire())
        stopped = asyncio.create_task(stopping.wait())
        await asyncio.wait({acquiring, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if acquiring.done():
            return True
        acquiring.cancel()
        return False

    async def keep_renewing(self) -> None:
        """Renew until leadership is lost; returns then (the caller should stop working)."""
        while True:
            await asyncio.sleep(self.renew_period)
            await self.try_acquire_or_renew()
            if not self.is_leader:
                log.error("lost the lease %s/%s", self.namespace, self.name)
                return

    async def release(self) -> None:
        """Give the Lease up on shutdown so a standby takes over at once."""
        try:
            lease = await self.store.get(*LEASE, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                await self.store.update(lease)
        except ApiError as err:
            log.info("could not release lease: %s", err)
        self._renewed_at = None

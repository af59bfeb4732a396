"""Fixtures for the cluster-store tests: a seeded memory store on a virtual clock."""

from __future__ import annotations

import pytest

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def store(clock: VirtualClock) -> MemoryStore:
    return MemoryStore(clock, seed=7)

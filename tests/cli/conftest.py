"""A memory store behind the vcctl-style commands, on a virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from stromboli.core.cli import main
from stromboli.core.cli.vcctl import VcctlContext
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore

START = 1_700_000_000.0  # 2023-11-14T22:13:20Z


class Cluster:
    """The store, its clock, and a way to run ``stromboli`` against it."""

    def __init__(self) -> None:
        self.clock = VirtualClock(START)
        self.store = MemoryStore(self.clock, seed=1)
        self.context = VcctlContext(
            store_factory=self.factory, close_store=False, now=self.clock.now
        )
        self.connections: list[tuple[str | None, str | None]] = []

    def factory(self, kubeconfig: str | None, master: str | None) -> MemoryStore:
        self.connections.append((kubeconfig, master))
        return self.store

    def cli(self, *args: str) -> Result:
        return CliRunner().invoke(main, list(args), obj=self.context, catch_exceptions=False)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return asyncio.run(getattr(self.store, method)(*args, **kwargs))

    def create(self, obj: dict) -> dict:
        return self.call("create", obj)

    def items(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict]:
        return self.call("list", api_version, kind, namespace).items


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


@pytest.fixture
def write(tmp_path: Any) -> Callable[[str, str], str]:
    def writer(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return writer

"""Builders for the objects the cluster-store tests create."""

from __future__ import annotations

import asyncio
from typing import Any

from stromboli.core.cluster.store import WatchEvent, WatchStream


def pod(
    name: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A minimal valid pod."""
    md: dict[str, Any] = {"name": name, "namespace": namespace, **metadata}
    if labels is not None:
        md["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference pointing at ``obj``."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
    }


def queue(name: str, weight: int = 1) -> dict[str, Any]:
    """A cluster-scoped Volcano Queue (status subresource)."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }


def configmap(name: str, namespace: str = "default", **metadata: Any) -> dict[str, Any]:
    """A namespaced kind without a status subresource."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "data": {"k": "v"},
    }


async def next_event(watch: WatchStream, timeout: float = 1.0) -> WatchEvent:
    """The next watch event, failing the test instead of hanging when none comes."""
    return await asyncio.wait_for(anext(watch), timeout)

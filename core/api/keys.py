"""Object keys: how every cache, informer and report names one stored object.

``(namespace, name)``, the namespace ``""`` for a cluster-scoped object (a Queue, a Node), as
the store returns them; a namespaced object read from a store always carries its namespace, so
no key guesses ``default`` for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Key = tuple[str, str]


def object_key(obj: Mapping[str, Any]) -> Key:
    """``(namespace, name)`` of ``obj``; ``""`` for what its metadata lacks."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def key_text(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object: as kubectl names them."""
    namespace, name = object_key(obj)
    return f"{namespace}/{name}" if namespace else name

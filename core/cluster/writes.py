"""Status writes against an object's latest version, shared by the controllers.

Custom resources take no unconditional updates, so a status is written with the
resourceVersion last seen and, on conflict, recomputed on a fresh read and tried again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stromboli.core.cluster.errors import ConflictError, NotFoundError
from stromboli.core.cluster.store import ClusterStore

CONFLICT_RETRIES = 5


async def put_status(
    store: ClusterStore,
    obj: dict[str, Any],
    status_for: Callable[[dict[str, Any]], dict[str, Any] | None],
    retries: int = CONFLICT_RETRIES,
) -> dict[str, Any] | None:
    """Write ``status_for(current)`` as the status of ``obj``; returns the written object, or
    None when the object is gone or ``status_for`` says there is nothing to write. Raises
    ``ConflictError`` when every attempt conflicted."""
    meta = obj["metadata"]
    current = obj
    for _ in range(retries):
        status = status_for(current)
        if status is None:
            return None
        try:
            return await store.update_status({**current, "status": status})
        except ConflictError:
            try:
                current = await store.get(
                    obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")
                )
            except NotFoundError:
                return None
        except NotFoundError:
            return None
    raise ConflictError(f"{obj['kind']} {meta.get('name')}: status kept conflicting")

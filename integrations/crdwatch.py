"""The controller's watch of CustomResourceDefinitions: a paged list, then one watch.

Why a watch and not discovery asked again every few seconds: one list at start and one watch
request renewed every few minutes, against one GET per framework API group version per period,
forever, and a framework noticed only at the next period. Why not the generic
:class:`~stromboli.core.informer.Informer`: CRDs are large (a real operator's is 0.5 to 1.3 MB
of JSON: its whole pod template schema) and a cluster may hold hundreds; an informer lists them
in one response and keeps every one. Here the list comes a page at a time, each CRD is read
(:func:`~.crds.read_crd`) and dropped, and only the framework CRDs' names are kept, to tell a
deletion missed while the watch was down (410 Gone) after the next list.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from stromboli.core.cluster.errors import ApiError, GoneError
from stromboli.core.cluster.kube import KubeStore
from stromboli.core.cluster.store import ClusterStore
from stromboli.integrations.crds import read_crd
from stromboli.integrations.kinds import CRD_KIND
from stromboli.integrations.watches import RETRY_MAX_SECONDS, RETRY_MIN_SECONDS

log = logging.getLogger(__name__)

CRD: Final = (CRD_KIND.api_version, CRD_KIND.kind)
#: CRDs per list page: a page of real operators' CRDs is then a few MB, not the cluster's all.
PAGE: Final = 20
#: Status codes that no retry mends: the grant is missing, or the server serves no CRDs.
REFUSED: Final = frozenset({401, 403})

#: Called with the event type and the CRD (a deletion synthesised after a relist carries only
#: the name, group and kind).
CrdHandler = Callable[[str, dict[str, Any]], None]


def _stub(crd: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a framework CRD: enough to say which kinds its deletion stops."""
    spec = crd.get("spec") or {}
    return {
        "apiVersion": CRD_KIND.api_version,
        "kind": CRD_KIND.kind,
        "metadata": {"name": (crd.get("metadata") or {}).get("name")},
        "spec": {
            "group": spec.get("group"),
            "names": {"kind": (spec.get("names") or {}).get("kind")},
        },
    }


class CrdWatch:
    """Hands every CRD event to ``handler`` until cancelled (see the module docstring)."""

    def __init__(self, store: ClusterStore, handler: CrdHandler, *, page: int = PAGE) -> None:
        self.store = store
        self.handler = handler
        self.page = page
        #: Framework CRDs known, by name (their stubs).
        self.framework: dict[str, dict[str, Any]] = {}
        self.lists = 0

    def _deliver(self, event_type: str, crd: dict[str, Any]) -> None:
        name = str((crd.get("metadata") or {}).get("name") or "")
        if read_crd(crd) is None:
            return
        if event_type == "DELETED":
            self.framework.pop(name, None)
        else:
            self.framework[name] = _stub(crd)
        try:
            self.handler(event_type, crd)
        except Exception:  # one CRD must not end the watch of all
            log.exception("handling CRD %s failed", name)

    async def _pages(self, seen: set[str]) -> str:
        """List every CRD, a page at a time; returns the list's resourceVersion."""
        self.lists += 1
        if not isinstance(self.store, KubeStore):
            listed = await self.store.list(*CRD)
            for crd in listed.items:
                seen.add(str(crd["metadata"]["name"]))
                self._deliver("ADDED", crd)
            return listed.resource_version
        resource = await self.store.resources.resolve(*CRD)
        params = {"limit": str(self.page)}
        version = ""
        while True:
            answer = await self.store.transport.request(
                "GET", resource.collection(None), params=params
            )
            for crd in answer.get("items") or ():
                seen.add(str((crd.get("metadata") or {}).get("name")))
                crd.setdefault("apiVersion", CRD_KIND.api_version)
                crd.setdefault("kind", CRD_KIND.kind)
                self._deliver("ADDED", crd)
            meta = answer.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue")
            if not token:
                return version
            params = {"limit": str(self.page), "continue": str(token)}

    async def relist(self) -> str:
        """List, then say which framework CRDs vanished meanwhile; returns the version."""
        before = dict(self.framework)
        seen: set[str] = set()
        version = await self._pages(seen)
        for name, stub in before.items():
            if name not in seen and name in self.framework:
                self._deliver("DELETED", stub)
        return version

    async def _watch(self, version: str) -> None:
        """Follow from ``version`` until the server says it is too old (410 Gone)."""
        stream = self.store.watch(*CRD, resource_version=version)
        try:
            async for event in stream:
                if event.type != "BOOKMARK":
                    self._deliver(event.type, event.object)
        except GoneError:
            log.info("watch of CustomResourceDefinitions expired; listing again")
        finally:
            await stream.aclose()

    async def run(self) -> None:
        """List and watch until cancelled; a failure is retried with backoff, except a
        refusal (no grant): then this says once that CRDs installed later need a restart."""
        loop = asyncio.get_running_loop()
        delay = RETRY_MIN_SECONDS
        while True:
            began = loop.time()
            try:
                await self._watch(await self.relist())
                continue  # 410 Gone: list again at once
            except ApiError as err:
                if err.code in REFUSED or (err.code == 404 and self.lists == 1):
                    log.warning(
                        "CustomResourceDefinitions cannot be watched (%s): a framework CRD "
                        "installed from now on is followed after a restart; grant list and "
                        "watch on customresourcedefinitions.apiextensions.k8s.io "
                        "(deploy/rbac.yaml)",
                        err,
                    )
                    return
                failure: Exception = err
            except Exception as err:
                failure = err
            if loop.time() - began >= RETRY_MAX_SECONDS:
                delay = RETRY_MIN_SECONDS
            log.warning(
                "watch of CustomResourceDefinitions failed (%s); listing again in %.0fs",
                failure,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_SECONDS)


__all__ = ["PAGE", "CrdWatch"]

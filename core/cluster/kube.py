"""The Kubernetes backend of the cluster store: the same interface, a real API server behind it.

    store = KubeStore(KubeConfig.load(), qps=2000, burst=2000)
    pods = await store.list("v1", "Pod", "default")
    await store.bind("default", "p1", "node-1", pod_uid=pods.items[0]["metadata"]["uid"])

Objects travel as JSON through orjson and stay plain dicts; no ``kubernetes.client`` models,
whose deserialisation costs more than the scheduling they feed. Every call goes through one
aiohttp session and one token bucket (``qps``/``burst``, Volcano's scheduler defaults 2000/2000).

The semantics are the memory store's, which are the API server's: the same errors for the same
failures (the server's ``Status`` mapped back to :mod:`~stromboli.core.cluster.errors`), items
of a list carry ``apiVersion`` and ``kind`` (the server leaves them out of built-in lists), and
``update_status`` on a kind without a status subresource raises ``NotFoundError`` instead of
quietly writing the spec too. Lists and watches drop ``metadata.managedFields`` (as informers
are usually told to): it is often the larger half of a pod, no caller reads it, and an update
that leaves it out keeps the server's copy; ``get`` returns objects whole. Where a real cluster
differs it is because of what runs in it: garbage collection and grace periods belong to its
controllers and kubelets, not to the store.
"""

from __future__ import annotations

import builtins
import weakref
from typing import Any, Final, Literal

from stromboli.core.clock import Clock, SystemClock
from stromboli.core.cluster.errors import (
    BadRequestError,
    GoneError,
    InvalidError,
    NotFoundError,
    UnsupportedMediaTypeError,
)
from stromboli.core.cluster.kubeconfig import KubeConfig, KubeConfigError
from stromboli.core.cluster.kubehttp import JSON_PATCH, MERGE_PATCH, KubeTransport, UnreachableError
from stromboli.core.cluster.kuberesources import Resource, ResourceResolver, unknown_kind
from stromboli.core.cluster.kubewatch import KubeWatch
from stromboli.core.cluster.ratelimit import TokenBucket
from stromboli.core.cluster.store import (
    ClusterStore,
    Obj,
    ObjectList,
    PatchType,
    Propagation,
    WatchStream,
)

__all__ = ["KubeConfig", "KubeConfigError", "KubeStore", "UnreachableError"]

DEFAULT_QPS: Final = 2000.0
DEFAULT_BURST: Final = 2000
LIST_PAGE_SIZE: Final = 500
"""Items per list page, as client-go's informers: bounds the server's memory per request."""
WATCH_TIMEOUT: Final = 300
"""Seconds a watch request lasts before the server ends it and we resume (client-go picks
5 to 10 minutes); a shorter one only costs a reconnect."""

_PATCH_CONTENT_TYPES: Final = {"merge": MERGE_PATCH, "json": JSON_PATCH}
_POD: Final = ("v1", "Pod")


class KubeStore(ClusterStore):
    """:class:`ClusterStore` over a Kubernetes API server; see the module docstring.

    Create it anywhere; use it (and close it) inside one event loop, which owns its connections.
    """

    def __init__(
        self,
        config: KubeConfig,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        user_agent: str = "stromboli",
        *,
        clock: Clock | None = None,
        request_timeout: float = 60.0,
        max_connections: int = 64,
        list_page_size: int = LIST_PAGE_SIZE,
        watch_timeout: int = WATCH_TIMEOUT,
        watch_max_backoff: float = 10.0,
        strip_managed_fields: bool = True,
    ) -> None:
        self.config = config
        clock = clock or SystemClock()
        self.transport = KubeTransport(
            config,
            qps=qps,
            burst=burst,
            user_agent=user_agent,
            request_timeout=request_timeout,
            max_connections=max_connections,
            monotonic=clock.monotonic,
        )
        self.resources = ResourceResolver(self.transport)
        self.list_page_size = list_page_size
        self.watch_timeout = watch_timeout
        self.watch_max_backoff = watch_max_backoff
        self.strip_managed_fields = strip_managed_fields
        self._watches: weakref.WeakSet[KubeWatch] = weakref.WeakSet()

    @property
    def limiter(self) -> TokenBucket:
        """The client rate limiter (read ``qps``/``burst`` or ``tokens()`` from it)."""
        return self.transport.limiter

    # --- reads --------------------------------------------------------------------------------

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj:
        r = await self.resources.resolve(api_version, kind)
        return await self.transport.request("GET", r.item(namespace, name))

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        cached: bool = False,
    ) -> ObjectList:
        r = await self.resources.resolve(api_version, kind)
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if cached:
            # resourceVersion=0: kube-apiserver answers from its watch cache in one response
            # (it ignores ``limit`` then), as client-go's reflectors list first. Paging with
            # continue tokens costs a round trip and a sorted walk per 500 objects: at 10,000
            # pods on the test control plane that is minutes against seconds.
            params["resourceVersion"] = "0"
            items, version = await self._list_pages(r, namespace, params, 0)
            return self._typed(items, version, api_version, kind)
        try:
            items, version = await self._list_pages(r, namespace, params, self.list_page_size)
        except GoneError:
            # The continue token expired between pages: one unpaginated list instead.
            items, version = await self._list_pages(r, namespace, params, 0)
        return self._typed(items, version, api_version, kind)

    def _typed(
        self, items: builtins.list[Obj], version: str, api_version: str, kind: str
    ) -> ObjectList:
        strip = self.strip_managed_fields
        for item in items:
            # Lists of built-in kinds leave the type out of every item; callers need it.
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            if strip:
                (item.get("metadata") or {}).pop("managedFields", None)
        return ObjectList(items, version)

    async def _list_pages(
        self, r: Resource, namespace: str | None, params: dict[str, str], limit: int
    ) -> tuple[builtins.list[Obj], str]:  # ``list`` is the method in this class
        path = r.collection(namespace if r.namespaced else None)
        page = dict(params)
        if limit:
            page["limit"] = str(limit)
        items: builtins.list[Obj] = []
        version = ""
        while True:
            answer = await self.transport.request("GET", path, params=page)
            items.extend(answer.get("items") or ())
            meta = answer.get("metadata") or {}
            version = version or meta.get("resourceVersion", "")
            token = meta.get("continue")
            if not token:
                return items, version
            page["continue"] = token

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> WatchStream:
        known = self.resources.known(api_version, kind)

        async def resolve() -> Resource:
            return known or await self.resources.resolve(api_version, kind)

        async def lister() -> ObjectList:
            # Only a stream's start lists (a 410 later reaches the consumer, who relists):
            # any recent version will do, so the watch cache answers, as for an informer.
            return await self.list(api_version, kind, namespace, cached=True)

        stream = KubeWatch(
            self.transport,
            resolve,
            lister,
            namespace,
            resource_version,
            timeout_seconds=self.watch_timeout,
            max_backoff=self.watch_max_backoff,
            strip_managed_fields=self.strip_managed_fields,
            on_close=self._watches.discard,
        )
        self._watches.add(stream)
        return stream

    # --- writes -------------------------------------------------------------------------------

    async def create(self, obj: Obj) -> Obj:
        r, md = await self._target(obj)
        return await self.transport.request(
            "POST", r.collection(r.namespace_of(md.get("namespace"))), body=obj
        )

    async def update(self, obj: Obj) -> Obj:
        r, md = await self._target(obj)
        return await self.transport.request(
            "PUT", r.item(md.get("namespace"), self._name(r, md)), body=obj
        )

    async def update_status(self, obj: Obj) -> Obj:
        r, md = await self._target(obj)
        if not r.status_subresource:
            raise NotFoundError(
                f"{r.resource} has no status subresource; update the whole object instead"
            )
        return await self.transport.request(
            "PUT", r.item(md.get("namespace"), self._name(r, md), "status"), body=obj
        )

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: Literal["status"] | None = None,
    ) -> Obj:
        r = await self.resources.resolve(api_version, kind)
        content_type = _PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise UnsupportedMediaTypeError(
                f"patch type {patch_type!r} is not supported; use 'merge' or 'json'"
            )
        if patch_type == "merge" and not isinstance(patch, dict):
            raise BadRequestError("a merge patch must be a JSON object (dict)")
        if subresource not in (None, "status"):
            raise NotFoundError(f"{r.resource} has no subresource {subresource!r}")
        return await self.transport.request(
            "PATCH", r.item(namespace, name, subresource), body=patch, content_type=content_type
        )

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> None:
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise BadRequestError(
                f"propagation {propagation!r} is not one of Background, Foreground, Orphan"
            )
        r = await self.resources.resolve(api_version, kind)
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        await self.transport.request("DELETE", r.item(namespace, name), body=options)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, pod_uid: str | None = None
    ) -> None:
        if not node_name:
            raise InvalidError.for_object("Binding", pod_name, "target.name: Required value")
        r = await self.resources.resolve(*_POD)
        metadata: dict[str, str] = {"name": pod_name, "namespace": namespace}
        if pod_uid is not None:
            # The server checks it: a pod deleted and re-created under the same name since
            # the scheduler saw it is not bound by mistake.
            metadata["uid"] = pod_uid
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self.transport.request("POST", r.item(namespace, pod_name, "binding"), body=binding)

    async def evict(self, namespace: str, pod_name: str) -> None:
        r = await self.resources.resolve(*_POD)
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod_name, "namespace": namespace},
        }
        # A 429 here is a disruption budget saying no; waiting and repeating is the caller's
        # call (the scheduler picks other victims), so it is not retried.
        await self.transport.request(
            "POST", r.item(namespace, pod_name, "eviction"), body=eviction, retry_throttled=False
        )

    async def close(self) -> None:
        for stream in list(self._watches):
            await stream.aclose()
        await self.transport.close()

    # --- helpers ------------------------------------------------------------------------------

    async def _target(self, obj: Obj) -> tuple[Resource, dict[str, Any]]:
        """The resource and metadata of an object sent for a write (the memory store's 400s)."""
        if not isinstance(obj, dict):
            raise BadRequestError(f"expected an object (dict), got {type(obj).__name__}")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not api_version or not isinstance(kind, str):
            raise BadRequestError(
                "object has no apiVersion and kind; every object sent to the store needs both "
                '(e.g. apiVersion: "v1", kind: "Pod")'
            )
        if not kind:
            raise unknown_kind(api_version, kind)
        md = obj.get("metadata")
        if md is None:
            md = {}
        if not isinstance(md, dict):
            raise BadRequestError(f"{kind} metadata must be an object, got {type(md).__name__}")
        return await self.resources.resolve(api_version, kind), md

    @staticmethod
    def _name(r: Resource, md: dict[str, Any]) -> str:
        name = md.get("name")
        if not name or not isinstance(name, str):
            raise InvalidError.for_object(r.qualified_kind, "", "metadata.name: Required value")
        return name

"""From ``(apiVersion, kind)`` to URLs: the shared kind registry first, API discovery second.

Kinds Stromboli knows (Volcano's, the core ones) are resolved from
:mod:`stromboli.core.api.registry` without a request, which keeps :meth:`KubeStore.watch`
synchronous and the hot paths free of discovery. Any other kind (a framework CRD nobody
registered) is looked up once in the server's discovery document and cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from stromboli.core.api.kinds import kind_info
from stromboli.core.cluster.errors import NotFoundError, qualified_kind, qualified_resource
from stromboli.core.cluster.kubehttp import KubeTransport


@dataclass(frozen=True, slots=True)
class Resource:
    """Where one kind lives in the API and how it is served."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool

    @property
    def prefix(self) -> str:
        """``/api/v1`` for the core group, ``/apis/<group>/<version>`` otherwise."""
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    @property
    def resource(self) -> str:
        """``pods`` or ``podgroups.scheduling.volcano.sh``, as the API server words messages."""
        return qualified_resource(self.plural, self.api_version)

    @property
    def qualified_kind(self) -> str:
        return qualified_kind(self.kind, self.api_version)

    def namespace_of(self, namespace: str | None) -> str | None:
        """The namespace a single-object call uses: ``default`` when none is given, nothing
        for cluster-scoped kinds (whatever the caller passed, as the memory store)."""
        if not self.namespaced:
            return None
        return namespace or "default"

    def collection(self, namespace: str | None) -> str:
        """The list/create/watch path; ``namespace=None`` means all namespaces."""
        if self.namespaced and namespace:
            return f"{self.prefix}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{self.prefix}/{self.plural}"

    def item(
        self,
        namespace: str | None,
        name: str,
        subresource: Literal["status", "binding", "eviction"] | None = None,
    ) -> str:
        path = f"{self.collection(self.namespace_of(namespace))}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path


def unknown_kind(api_version: str, kind: str) -> NotFoundError:
    """The memory store's error for a kind nobody serves."""
    return NotFoundError(
        f'the server could not find the requested resource: kind "{kind}" is not '
        f'registered for apiVersion "{api_version}"'
    )


class ResourceResolver:
    """Resolves kinds for one server; see the module docstring."""

    def __init__(self, transport: KubeTransport) -> None:
        self._transport = transport
        self._cache: dict[tuple[str, str], Resource] = {}
        self._discovered: set[str] = set()

    def known(self, api_version: str, kind: str) -> Resource | None:
        """The kind if it needs no request (registered, or discovered earlier)."""
        key = (api_version, kind)
        resource = self._cache.get(key)
        if resource is None:
            info = kind_info(api_version, kind)
            if info is None:
                return None
            resource = Resource(
                api_version, kind, info.plural, info.namespaced, info.status_subresource
            )
            self._cache[key] = resource
        return resource

    async def resolve(self, api_version: str, kind: str) -> Resource:
        resource = self.known(api_version, kind)
        if resource is not None:
            return resource
        if api_version not in self._discovered:
            await self._discover(api_version)
        resource = self._cache.get((api_version, kind))
        if resource is None:
            # A CRD created since the last look: read discovery again next time.
            self._discovered.discard(api_version)
            raise unknown_kind(api_version, kind)
        return resource

    async def _discover(self, api_version: str) -> None:
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            doc = await self._transport.request("GET", prefix)
        except NotFoundError:
            doc = None
        self._discovered.add(api_version)
        resources = (doc or {}).get("resources") or ()
        names = {r.get("name") for r in resources}
        for entry in resources:
            name = entry.get("name", "")
            if "/" in name or not entry.get("kind"):
                continue
            key = (api_version, entry["kind"])
            self._cache.setdefault(
                key,
                Resource(
                    api_version,
                    entry["kind"],
                    name,
                    bool(entry.get("namespaced")),
                    f"{name}/status" in names,
                ),
            )

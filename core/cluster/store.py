"""The cluster store: the one interface the scheduler, controller and webhook talk to.

Two backends implement it: :class:`~stromboli.core.cluster.memory.MemoryStore` (the simulator and
tests) and the Kubernetes backend (a real API server). Code above this layer never knows which one
it has, which is what lets the simulator run the real scheduler instead of a second model of it.

Objects are plain JSON-like dicts in Kubernetes wire shape (``apiVersion``, ``kind``,
``metadata``, ``spec``, ``status``); a kind is named by ``(api_version, kind)``. Every object a
store returns is the caller's own copy. Failures raise the errors in
:mod:`stromboli.core.cluster.errors`, which mirror the API server's statuses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, Self

Obj = dict[str, Any]
"""A Kubernetes object in wire shape."""

WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
BOOKMARK: Final = "BOOKMARK"

PatchType = Literal["merge", "json"]
"""``merge``: RFC 7386 JSON merge patch (a dict); ``json``: RFC 6902 JSON patch (a list of ops)."""

Propagation = Literal["Background", "Foreground", "Orphan"]


@dataclass(slots=True)
class ObjectList:
    """The result of a list: the items and the resourceVersion to start a watch from."""

    items: list[Obj] = field(default_factory=list)
    resource_version: str = ""


@dataclass(slots=True)
class WatchEvent:
    """One change seen by a watch; for ``DELETED`` the object is its last state."""

    type: WatchEventType
    object: Obj


class WatchStream(ABC, AsyncIterator[WatchEvent]):
    """An open watch: iterate it for events in commit order; close it to stop.

    Use it as ``async with store.watch(...) as events: async for event in events: ...``.
    Iteration raises :class:`~stromboli.core.cluster.errors.GoneError` when the requested
    resourceVersion is no longer retained; the caller then lists again and watches from the
    list's resourceVersion.
    """

    def __aiter__(self) -> Self:
        return self

    @abstractmethod
    async def __anext__(self) -> WatchEvent: ...

    @abstractmethod
    async def aclose(self) -> None:
        """Stop the watch; a pending or later ``__anext__`` ends the iteration."""

    def drain(self) -> list[WatchEvent]:
        """Events already received, without waiting (for step-driven consumers such as the
        simulator); streams that cannot tell return nothing and are read by iterating."""
        return []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class ClusterStore(ABC):
    """API-server semantics over plain dicts; see the module docstring.

    ``namespace`` is ignored for cluster-scoped kinds. For namespaced kinds, ``None`` means all
    namespaces in ``list``/``watch`` and the ``default`` namespace elsewhere (as ``kubectl``).
    """

    @abstractmethod
    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj:
        """The object, or :class:`NotFoundError`."""

    @abstractmethod
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
        """Objects of a kind, filtered by selectors; ``resource_version`` is the list's version.

        ``cached``: any recent version will do (an informer's first list, which a watch from
        the list's version then brings up to date); a server may answer it from its cache."""

    @abstractmethod
    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> WatchStream:
        """Changes of a kind, in commit order.

        Without ``resource_version`` (or with ``"0"``) the stream first sends a synthetic
        ``ADDED`` for every existing object, then live changes. With a version from an earlier
        list or event it sends every change after that version, or raises ``GoneError`` on
        iteration if that history is gone.
        """

    @abstractmethod
    async def create(self, obj: Obj) -> Obj:
        """Create; the server fills uid, resourceVersion, creationTimestamp, generation.

        ``metadata.generateName`` without ``name`` picks a unique name. A duplicate name raises
        :class:`AlreadyExistsError`.
        """

    @abstractmethod
    async def update(self, obj: Obj) -> Obj:
        """Replace the whole object.

        If ``metadata.resourceVersion`` is set and stale, raise :class:`ConflictError`. For kinds
        with a status subresource, changes to ``status`` are ignored (use :meth:`update_status`).
        """

    @abstractmethod
    async def update_status(self, obj: Obj) -> Obj:
        """Replace only ``status`` (the status subresource); everything else is ignored."""

    @abstractmethod
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
        """Patch the object (``subresource="status"`` patches the status subresource)."""

    @abstractmethod
    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> None:
        """Delete; dependents (by ownerReferences) are deleted too unless ``Orphan``.

        An object with finalizers is only marked (``deletionTimestamp``) and disappears when an
        update empties its finalizers.
        """

    @abstractmethod
    async def bind(
        self, namespace: str, pod_name: str, node_name: str, pod_uid: str | None = None
    ) -> None:
        """Bind a pod to a node (``pods/binding``); :class:`ConflictError` if already bound."""

    @abstractmethod
    async def evict(self, namespace: str, pod_name: str) -> None:
        """Evict a pod (``pods/eviction``), honouring PodDisruptionBudgets.

        A budget that forbids the disruption raises :class:`TooManyRequestsError`.
        """

    async def close(self) -> None:  # noqa: B027 - optional hook, a no-op unless overridden
        """Release connections and end open watches."""

"""The in-memory cluster store: an embedded API server for the simulator and tests.

It reproduces the API-server behaviour the scheduler and controller depend on: one global,
monotonically increasing resourceVersion; uid, creationTimestamp and generation set by the server;
optimistic concurrency; status subresources; watches in commit order with resumable history;
ownerReference garbage collection; finalizers; pod binding and eviction with PodDisruptionBudgets.

Each object is stored as JSON bytes (keys sorted, as the API server writes unstructured objects)
plus a small index record (name, uid, labels, owners, finalizers). Every read decodes the bytes,
the cheapest deep copy there is, so callers can never alias stored state; and because bytes are
invisible to Python's cyclic garbage collector, 20,000 stored objects cost it nothing. Writes
decode a fresh copy, change it, and serialize it once; watch events reuse those bytes.
Garbage collection runs synchronously inside the delete that triggers it, so a simulation is
reproducible.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from stromboli.core.clock import Clock, format_time
from stromboli.core.cluster.errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    InternalError,
    InvalidError,
    NotFoundError,
    TooManyRequestsError,
    UnsupportedMediaTypeError,
    qualified_kind,
    qualified_resource,
)
from stromboli.core.cluster.patch import PatchError, json_patch, merge_patch
from stromboli.core.cluster.selectors import (
    SelectorError,
    parse_field_selector,
    parse_selector,
    selector_from_dict,
)
from stromboli.core.cluster.store import (
    ADDED,
    DELETED,
    MODIFIED,
    ClusterStore,
    Obj,
    ObjectList,
    PatchType,
    Propagation,
    WatchEventType,
    WatchStream,
)
from stromboli.core.cluster.validation import metadata_problems, name_problems
from stromboli.core.cluster.watching import History, MemoryWatch

POD: Final = ("v1", "Pod")
NAMESPACE: Final = ("v1", "Namespace")
NODE: Final = ("v1", "Node")
PDB: Final = ("policy/v1", "PodDisruptionBudget")
FOREGROUND_FINALIZER: Final = "foregroundDeletion"

_NAME_ALPHABET: Final = string.ascii_lowercase + string.digits
_MAX_GENERATE_PREFIX: Final = 58
_SERVER_FIELDS: Final = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)
# Datetimes (YAML timestamps) serialize as RFC 3339 in UTC, as the API server would store them.
_SORTED: Final = orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC
_LENIENT: Final = _SORTED | orjson.OPT_NON_STR_KEYS
_PROPAGATIONS: Final = ("Background", "Foreground", "Orphan")
_IGNORES_PDB: Final = frozenset({"Pending", "Succeeded", "Failed"})
_NO_LABELS: Final[dict[str, str]] = {}
_UUID_VERSION_4: Final = (0x4 << 76) | (0x8 << 60)
_UUID_CLEAR: Final = ~((0xF << 76) | (0xC << 60))


class KindLike(Protocol):
    """What the store needs to know about a kind (``core.api.registry.KindInfo`` fits)."""

    @property
    def api_version(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def namespaced(self) -> bool: ...
    @property
    def status_subresource(self) -> bool: ...


KindResolver = Callable[[str, str], KindLike | None]


def _registry_resolver() -> KindResolver:
    """The shared kind table; imported late so this module loads without the API package."""
    from stromboli.core.api.registry import kind_info

    return kind_info


class _Entry:
    """A stored object: its JSON and the few fields the store itself needs to read."""

    __slots__ = ("deleting", "finalizers", "labels", "owners", "raw", "rv", "uid")

    def __init__(self, obj: Obj, raw: bytes) -> None:
        md = obj["metadata"]
        self.raw = raw
        self.rv: str = md["resourceVersion"]
        self.uid: str = md["uid"]
        labels = md.get("labels")
        self.labels: dict[str, str] = dict(labels) if labels else _NO_LABELS
        refs = md.get("ownerReferences")
        self.owners: tuple[str, ...] = tuple(ref["uid"] for ref in refs) if refs else ()
        finalizers = md.get("finalizers")
        self.finalizers: tuple[str, ...] = tuple(finalizers) if finalizers else ()
        self.deleting = bool(md.get("deletionTimestamp"))

    def decode(self) -> Obj:
        """A fresh, private, mutable copy of the object."""
        return orjson.loads(self.raw)


@dataclass(slots=True)
class _Kind:
    """Everything the store keeps per kind: objects by namespace and name, and history."""

    info: KindLike
    key: tuple[str, str]
    resource: str  # "pods", "podgroups.scheduling.volcano.sh" - for messages
    qualified_kind: str  # "Pod", "PodGroup.scheduling.volcano.sh" - for messages
    objects: dict[str, dict[str, _Entry]]  # namespace ("" if cluster-scoped) -> name -> entry
    history: History


def _type_of(obj: Any) -> tuple[str, str, dict[str, Any]]:
    """``(apiVersion, kind, metadata)`` of an incoming object, or a 400."""
    if not isinstance(obj, dict):
        raise BadRequestError(f"expected an object (dict), got {type(obj).__name__}")
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        raise BadRequestError(
            "object has no apiVersion and kind; every object sent to the store needs both "
            '(e.g. apiVersion: "v1", kind: "Pod")'
        )
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise BadRequestError(f"{kind} metadata must be an object, got {type(metadata).__name__}")
    return api_version, kind, metadata


def _spec_changed(old: Obj, new: Obj, status_subresource: bool) -> bool:
    """Whether anything but metadata (and status, when it is a subresource) differs."""
    for key in old.keys() | new.keys():
        if key in ("metadata", "apiVersion", "kind") or (status_subresource and key == "status"):
            continue
        if old.get(key) != new.get(key):
            return True
    return False


class MemoryStore(ClusterStore):
    """API-server semantics in process memory; see the module docstring.

    ``kinds`` resolves ``(api_version, kind)`` to its scope and subresources (default: the
    shared registry in ``core.api.registry``). ``history_limit`` bounds the changes retained per
    kind for resuming watches. ``seed`` makes uids and generated names reproducible.

    Differences from a real API server, all deliberate: deletion is immediate (no grace
    period), garbage collection is synchronous, lists come in creation order, and only the
    ``merge`` and ``json`` patch types exist (strategic merge needs Go struct tags).
    """

    def __init__(
        self,
        clock: Clock,
        *,
        kinds: KindResolver | None = None,
        history_limit: int = 10_000,
        seed: int | None = None,
    ) -> None:
        self._clock = clock
        self._resolve = kinds if kinds is not None else _registry_resolver()
        self._history_limit = history_limit
        self._rng = random.Random(seed)
        self._rv = 0
        self._kinds: dict[tuple[str, str], _Kind] = {}
        self._by_uid: dict[str, tuple[_Kind, str, str]] = {}
        self._dependents: dict[str, dict[str, None]] = {}  # owner uid -> dependent uids, ordered

    # --- public API ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The version of the latest write (what a list now would report)."""
        return str(self._rv)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj:
        k = self._kind(api_version, kind)
        return orjson.loads(self._entry(k, self._namespace(k, namespace), name).raw)

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
        k = self._kind(api_version, kind)
        try:
            labels = parse_selector(label_selector)
            fields = parse_field_selector(field_selector) if field_selector else None
        except SelectorError as error:
            raise BadRequestError(str(error)) from None
        loads = orjson.loads
        items: list[Obj] = []
        for entry in self._entries(k, namespace):
            if not labels.empty and not labels.matches(entry.labels):
                continue
            obj = loads(entry.raw)
            if fields is not None and not fields.matches(obj):
                continue
            items.append(obj)
        return ObjectList(items, str(self._rv))

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> WatchStream:
        k = self._kind(api_version, kind)
        scope = namespace if k.info.namespaced else None
        if resource_version in (None, "", "0"):
            watch = MemoryWatch(k.history, scope, self._rv)
            for entry in self._entries(k, scope):
                watch.push(ADDED, entry.raw)
        else:
            try:
                start = int(str(resource_version))
            except ValueError:
                return MemoryWatch.failed(
                    k.history,
                    BadRequestError(f"resourceVersion {resource_version!r} is not a valid version"),
                )
            try:
                replay = list(k.history.since(start, scope))
            except ApiError as error:
                return MemoryWatch.failed(k.history, error)
            watch = MemoryWatch(k.history, scope, max(start, self._rv))
            for _rv, event_type, _ns, raw in replay:
                watch.push(event_type, raw)
        watch.open()
        return watch

    async def create(self, obj: Obj) -> Obj:
        api_version, kind, metadata = _type_of(obj)
        k = self._kind(api_version, kind)
        md = dict(metadata)
        namespace = self._namespace(k, md.get("namespace"))
        name = md.get("name")
        if not name:
            prefix = md.get("generateName")
            if not prefix or not isinstance(prefix, str):
                raise InvalidError.for_object(
                    k.qualified_kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                )
            name = self._generate_name(k, namespace, prefix)
        if not isinstance(name, str):
            raise InvalidError.for_object(
                k.qualified_kind, str(name), "metadata.name: Invalid value: must be a string"
            )
        self._validate(k, name, md)
        if name in k.objects.get(namespace, ()):
            raise AlreadyExistsError.for_object(k.resource, name)
        md["name"] = name
        if k.info.namespaced:
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
        for server_field in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            md.pop(server_field, None)
        md["uid"] = self._new_uid()
        md["creationTimestamp"] = format_time(self._clock.now())
        md["generation"] = 1
        new = dict(obj)
        new["metadata"] = md
        self._default_status(k, new)
        return orjson.loads(self._put(k, namespace, name, new, ADDED, None).raw)

    async def update(self, obj: Obj) -> Obj:
        k, namespace, name, entry = self._locate(obj)
        return self._update_main(k, namespace, name, entry, obj)

    async def update_status(self, obj: Obj) -> Obj:
        k, namespace, name, entry = self._locate(obj)
        return self._update_status(k, namespace, name, entry, obj)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj:
        k = self._kind(api_version, kind)
        ns = self._namespace(k, namespace)
        entry = self._entry(k, ns, name)
        if subresource not in (None, "status"):
            raise NotFoundError(f"{k.resource} has no subresource {subresource!r}")
        try:
            if patch_type == "merge":
                if not isinstance(patch, dict):
                    raise BadRequestError("a merge patch must be a JSON object (dict)")
                patched = merge_patch(entry.decode(), patch)
            elif patch_type == "json":
                patched = json_patch(entry.decode(), patch, in_place=True)
            else:
                raise UnsupportedMediaTypeError(
                    f"patch type {patch_type!r} is not supported; use 'merge' or 'json'"
                )
        except PatchError as error:
            raise InvalidError.for_object(k.qualified_kind, name, str(error)) from None
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise InvalidError.for_object(k.qualified_kind, name, "metadata: Required value")
        patched_md = patched["metadata"]
        if patched_md.get("name") != name:
            raise BadRequestError(
                f"the patch renames {k.resource} {name!r}; an object's name cannot change"
            )
        if k.info.namespaced and patched_md.get("namespace") != ns:
            raise BadRequestError(
                f"the patch moves {k.resource} {name!r} out of namespace {ns!r}; "
                "an object's namespace cannot change"
            )
        if (patched.get("apiVersion"), patched.get("kind")) != k.key:
            raise BadRequestError(f"the patch changes the apiVersion or kind of {name!r}")
        if subresource == "status":
            return self._update_status(k, ns, name, entry, patched)
        return self._update_main(k, ns, name, entry, patched)

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> None:
        if propagation not in _PROPAGATIONS:
            raise BadRequestError(
                f"propagation {propagation!r} is not one of {', '.join(_PROPAGATIONS)}"
            )
        k = self._kind(api_version, kind)
        ns = self._namespace(k, namespace)
        self._delete(k, ns, name, self._entry(k, ns, name), propagation)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, pod_uid: str | None = None
    ) -> None:
        k = self._kind(*POD)
        entry = self._entry(k, namespace, pod_name)
        if not node_name:
            raise InvalidError.for_object("Binding", pod_name, "target.name: Required value")
        if pod_uid is not None and entry.uid != pod_uid:
            raise ConflictError.for_object(
                "pods/binding",
                pod_name,
                f"the pod's uid is {entry.uid}, not {pod_uid} (it was deleted and re-created)",
            )
        if entry.deleting:
            raise ConflictError.for_object(
                "pods/binding", pod_name, f"pod {pod_name} is being deleted and cannot be bound"
            )
        pod = entry.decode()
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            spec = pod["spec"] = {}
        bound = spec.get("nodeName")
        if bound:
            raise ConflictError.for_object(
                "pods/binding", pod_name, f'pod {pod_name} is already assigned to node "{bound}"'
            )
        spec["nodeName"] = node_name
        status = pod.get("status")
        if not isinstance(status, dict):
            status = pod["status"] = {}
        scheduled = {
            "lastProbeTime": None,
            "lastTransitionTime": format_time(self._clock.now()),
            "status": "True",
            "type": "PodScheduled",
        }
        conditions = status.get("conditions")
        if not isinstance(conditions, list):
            conditions = status["conditions"] = []
        for index, condition in enumerate(conditions):
            if condition.get("type") == "PodScheduled":
                conditions[index] = scheduled
                break
        else:
            conditions.append(scheduled)
        self._put(k, namespace, pod_name, pod, MODIFIED, entry)

    async def evict(self, namespace: str, pod_name: str) -> None:
        k = self._kind(*POD)
        entry = self._entry(k, namespace, pod_name)
        if not entry.deleting:
            phase = (entry.decode().get("status") or {}).get("phase")
            if phase not in _IGNORES_PDB:
                self._charge_disruption_budget(namespace, pod_name, entry.labels)
        self._delete(k, namespace, pod_name, entry, "Background")

    async def close(self) -> None:
        for k in self._kinds.values():
            k.history.close_all()

    # --- lookups ------------------------------------------------------------------------------

    def _kind(self, api_version: str, kind: str) -> _Kind:
        state = self._kinds.get((api_version, kind))
        if state is not None:
            return state
        try:
            info = self._resolve(api_version, kind)
        except LookupError:
            info = None
        if info is None:
            raise NotFoundError(
                f'the server could not find the requested resource: kind "{kind}" is not '
                f'registered for apiVersion "{api_version}"'
            )
        state = _Kind(
            info=info,
            key=(api_version, kind),
            resource=qualified_resource(info.plural, api_version),
            qualified_kind=qualified_kind(kind, api_version),
            objects={},
            history=History(self._history_limit),
        )
        self._kinds[(api_version, kind)] = state
        return state

    def _namespace(self, k: _Kind, namespace: Any) -> str:
        if not k.info.namespaced:
            return ""
        if namespace is None or namespace == "":
            return "default"
        if not isinstance(namespace, str):
            raise BadRequestError(f"namespace {namespace!r} must be a string")
        return namespace

    def _entry(self, k: _Kind, namespace: str, name: str) -> _Entry:
        bucket = k.objects.get(namespace)
        entry = bucket.get(name) if bucket is not None else None
        if entry is None:
            raise NotFoundError.for_object(k.resource, name)
        return entry

    def _entries(self, k: _Kind, namespace: str | None) -> Iterator[_Entry]:
        """Entries in one namespace (``None``: all), in creation order within a namespace."""
        if k.info.namespaced and namespace is not None:
            yield from k.objects.get(namespace, {}).values()
            return
        for bucket in k.objects.values():
            yield from bucket.values()

    def _locate(self, obj: Obj) -> tuple[_Kind, str, str, _Entry]:
        api_version, kind, md = _type_of(obj)
        k = self._kind(api_version, kind)
        name = md.get("name")
        if not name or not isinstance(name, str):
            raise InvalidError.for_object(k.qualified_kind, "", "metadata.name: Required value")
        namespace = self._namespace(k, md.get("namespace"))
        return k, namespace, name, self._entry(k, namespace, name)

    # --- writes -------------------------------------------------------------------------------

    def _validate(self, k: _Kind, name: str, md: dict[str, Any]) -> None:
        problems = name_problems(k.key[0], k.key[1], name) + metadata_problems(md)
        if problems:
            raise InvalidError.for_object(k.qualified_kind, name, *problems)

    def _check_preconditions(self, k: _Kind, name: str, md: dict[str, Any], entry: _Entry) -> None:
        wanted_rv = md.get("resourceVersion")
        if not wanted_rv and _custom_resource(k.key[0]):
            # The API server refuses unconditional updates of custom resources.
            raise InvalidError.for_object(
                k.qualified_kind,
                name,
                "metadata.resourceVersion: Invalid value: 0: must be specified for an update",
            )
        if wanted_rv and str(wanted_rv) != entry.rv:
            raise ConflictError.for_object(k.resource, name)
        wanted_uid = md.get("uid")
        if wanted_uid and wanted_uid != entry.uid:
            raise ConflictError.for_object(
                k.resource,
                name,
                f"the object's uid is {entry.uid}, not {wanted_uid} "
                "(it was deleted and re-created)",
            )

    def _update_main(self, k: _Kind, ns: str, name: str, entry: _Entry, obj: Obj) -> Obj:
        """Whole-object update: server-owned metadata and a status subresource are kept."""
        _, _, metadata = _type_of(obj)
        self._check_preconditions(k, name, metadata, entry)
        old = entry.decode()
        old_md = old["metadata"]
        md = dict(metadata)
        for server_field in _SERVER_FIELDS:
            if server_field in old_md:
                md[server_field] = old_md[server_field]
            else:
                md.pop(server_field, None)
        md["name"] = name
        if k.info.namespaced:
            md["namespace"] = ns
        self._validate(k, name, md)
        if entry.deleting:
            added = set(md.get("finalizers") or ()) - set(entry.finalizers)
            if added:
                raise InvalidError.for_object(
                    k.qualified_kind,
                    name,
                    "metadata.finalizers: Forbidden: no new finalizers can be added while the "
                    f"object is being deleted (tried {', '.join(sorted(added))})",
                )
        new = dict(obj)
        new["metadata"] = md
        if k.info.status_subresource:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if _spec_changed(old, new, k.info.status_subresource):
            md["generation"] = old_md.get("generation", 0) + 1
        return self._write(k, ns, name, entry, new)

    def _update_status(self, k: _Kind, ns: str, name: str, entry: _Entry, obj: Obj) -> Obj:
        """Status-subresource update: only ``status`` changes."""
        if not k.info.status_subresource:
            raise NotFoundError(
                f"{k.resource} has no status subresource; update the whole object instead"
            )
        _, _, metadata = _type_of(obj)
        self._check_preconditions(k, name, metadata, entry)
        new = entry.decode()
        if "status" in obj:
            new["status"] = obj["status"]
        else:
            new.pop("status", None)
        return self._write(k, ns, name, entry, new)

    def _write(self, k: _Kind, ns: str, name: str, entry: _Entry, new: Obj) -> Obj:
        """Commit an update unless it changes nothing (no new version, no event, as etcd).

        If the update empties the finalizers of an object being deleted, it is then removed.
        """
        new["metadata"]["resourceVersion"] = entry.rv
        if self._dump(k, name, new) == entry.raw:
            return orjson.loads(entry.raw)
        written = self._put(k, ns, name, new, MODIFIED, entry)
        if written.deleting and not written.finalizers:
            self._remove(k, ns, name, written)
        return orjson.loads(written.raw)

    def _dump(self, k: _Kind, name: str, obj: Obj) -> bytes:
        try:
            return orjson.dumps(obj, option=_SORTED)
        except TypeError:
            pass  # non-string keys (YAML ``1: x``): retry with the slower conversion
        try:
            return orjson.dumps(obj, option=_LENIENT)
        except TypeError as error:
            raise InvalidError.for_object(
                k.qualified_kind, name, f"the object is not JSON-serializable: {error}"
            ) from None

    def _put(
        self,
        k: _Kind,
        ns: str,
        name: str,
        new: Obj,
        event_type: WatchEventType,
        old: _Entry | None,
    ) -> _Entry:
        """Stamp a new resourceVersion, store, index owners, and tell watchers."""
        rv = self._rv + 1
        new["metadata"]["resourceVersion"] = str(rv)
        raw = self._dump(k, name, new)
        self._rv = rv
        entry = _Entry(new, raw)
        bucket = k.objects.get(ns)
        if bucket is None:
            bucket = k.objects[ns] = {}
        bucket[name] = entry
        if old is None:
            self._by_uid[entry.uid] = (k, ns, name)
            self._index_owners(entry.uid, (), entry.owners)
        elif old.owners != entry.owners:
            self._index_owners(entry.uid, old.owners, entry.owners)
        k.history.record(rv, event_type, ns, raw)
        return entry

    def _index_owners(self, uid: str, before: tuple[str, ...], after: tuple[str, ...]) -> None:
        for owner in before:
            if owner not in after:
                dependents = self._dependents.get(owner)
                if dependents is not None:
                    dependents.pop(uid, None)
                    if not dependents:
                        del self._dependents[owner]
        for owner in after:
            self._dependents.setdefault(owner, {})[uid] = None

    def _default_status(self, k: _Kind, new: Obj) -> None:
        """Status on create, as the API server's strategies set it.

        Pods start ``Pending`` (with a ``SchedulingGated`` condition when gated), namespaces
        ``Active``; other kinds with a status subresource start without status, except nodes,
        whose status is the node's own report.
        """
        key = k.key
        if key == POD:
            status: dict[str, Any] = {"phase": "Pending"}
            spec = new.get("spec")
            if isinstance(spec, dict) and spec.get("schedulingGates"):
                status["conditions"] = [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": format_time(self._clock.now()),
                        "message": "the pod has scheduling gates that have not been removed",
                        "reason": "SchedulingGated",
                        "status": "False",
                        "type": "PodScheduled",
                    }
                ]
            new["status"] = status
        elif key == NAMESPACE:
            new["status"] = {"phase": "Active"}
        elif k.info.status_subresource and key != NODE:
            new.pop("status", None)

    def _generate_name(self, k: _Kind, ns: str, prefix: str) -> str:
        prefix = prefix[:_MAX_GENERATE_PREFIX]
        taken = k.objects.get(ns, {})
        choices = self._rng.choices
        for _ in range(16):
            name = prefix + "".join(choices(_NAME_ALPHABET, k=5))
            if name not in taken:
                return name
        raise AlreadyExistsError(
            f'{k.resource} with generateName "{prefix}": no free name found after 16 tries; '
            "retry, or use a longer prefix"
        )

    def _new_uid(self) -> str:
        """A version-4 UUID from the store's generator (reproducible when seeded)."""
        bits = (self._rng.getrandbits(128) & _UUID_CLEAR) | _UUID_VERSION_4
        h = f"{bits:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    # --- deletion and garbage collection -----------------------------------------------------

    def _delete(self, k: _Kind, ns: str, name: str, entry: _Entry, propagation: str) -> None:
        """Delete now, or mark for deletion while finalizers (or foreground dependents) remain."""
        uid = entry.uid
        if propagation == "Orphan":
            self._orphan_dependents(uid)
        finalizers = list(entry.finalizers)
        foreground = propagation == "Foreground" and bool(self._dependents.get(uid))
        if foreground and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        if not finalizers:
            self._remove(k, ns, name, entry)
            return
        if not entry.deleting or tuple(finalizers) != entry.finalizers:
            new = entry.decode()
            md = new["metadata"]
            md["finalizers"] = finalizers
            if not entry.deleting:
                md["deletionTimestamp"] = format_time(self._clock.now())
                md["deletionGracePeriodSeconds"] = 0
                md["generation"] = md.get("generation", 0) + 1
            self._put(k, ns, name, new, MODIFIED, entry)
        if foreground:
            for dependent in list(self._dependents.get(uid, ())):
                located = self._by_uid.get(dependent)
                if located is not None:
                    dk, dns, dname = located
                    self._delete(dk, dns, dname, dk.objects[dns][dname], "Foreground")
            self._finish_foreground(uid)

    def _remove(self, k: _Kind, ns: str, name: str, entry: _Entry) -> None:
        """Drop the object for good (DELETED), then collect what depended on it."""
        bucket = k.objects[ns]
        del bucket[name]
        if not bucket:
            del k.objects[ns]
        del self._by_uid[entry.uid]
        self._rv += 1
        last = entry.decode()
        last["metadata"]["resourceVersion"] = str(self._rv)
        k.history.record(self._rv, DELETED, ns, orjson.dumps(last, option=_SORTED))
        self._index_owners(entry.uid, entry.owners, ())
        for owner in entry.owners:
            self._finish_foreground(owner)
        self._collect_dependents(entry.uid)
        if k.key == NAMESPACE:
            self._delete_namespace_contents(name)

    def _collect_dependents(self, owner_uid: str) -> None:
        """Background garbage collection of an owner that is gone.

        A dependent that still has a live owner only loses the dangling reference; one with no
        live owner left is deleted (cascading through its own dependents).
        """
        for dependent in list(self._dependents.pop(owner_uid, ())):
            located = self._by_uid.get(dependent)
            if located is None:
                continue
            dk, dns, dname = located
            entry = dk.objects[dns][dname]
            if any(owner in self._by_uid for owner in entry.owners):
                self._keep_owner_references(dk, dns, dname, entry, self._by_uid.__contains__)
            else:
                self._delete(dk, dns, dname, entry, "Background")

    def _orphan_dependents(self, owner_uid: str) -> None:
        for dependent in list(self._dependents.get(owner_uid, ())):
            located = self._by_uid.get(dependent)
            if located is not None:
                dk, dns, dname = located
                self._keep_owner_references(
                    dk, dns, dname, dk.objects[dns][dname], lambda uid: uid != owner_uid
                )

    def _keep_owner_references(
        self, k: _Kind, ns: str, name: str, entry: _Entry, keep: Callable[[str], bool]
    ) -> None:
        new = entry.decode()
        md = new["metadata"]
        refs = [ref for ref in md.get("ownerReferences") or () if keep(ref["uid"])]
        if refs:
            md["ownerReferences"] = refs
        else:
            md.pop("ownerReferences", None)
        self._write(k, ns, name, entry, new)

    def _finish_foreground(self, owner_uid: str) -> None:
        """Drop the ``foregroundDeletion`` finalizer once an owner's dependents are all gone."""
        if self._dependents.get(owner_uid):
            return
        located = self._by_uid.get(owner_uid)
        if located is None:
            return
        k, ns, name = located
        entry = k.objects[ns][name]
        if not entry.deleting or FOREGROUND_FINALIZER not in entry.finalizers:
            return
        new = entry.decode()
        new["metadata"]["finalizers"] = [f for f in entry.finalizers if f != FOREGROUND_FINALIZER]
        self._write(k, ns, name, entry, new)

    def _delete_namespace_contents(self, namespace: str) -> None:
        """What the namespace controller does: delete everything in a deleted namespace."""
        for k in list(self._kinds.values()):
            if not k.info.namespaced:
                continue
            for name in list(k.objects.get(namespace, ())):
                entry = k.objects.get(namespace, {}).get(name)
                if entry is not None:
                    self._delete(k, namespace, name, entry, "Background")

    # --- eviction -----------------------------------------------------------------------------

    def _charge_disruption_budget(
        self, namespace: str, pod_name: str, labels: dict[str, str]
    ) -> None:
        """Spend one allowed disruption of the pod's PodDisruptionBudget, or refuse with 429."""
        try:
            pdbs = self._kind(*PDB)
        except NotFoundError:
            return  # the kind table has no PodDisruptionBudget: nothing can protect the pod
        matching: list[tuple[_Entry, Obj]] = []
        for entry in pdbs.objects.get(namespace, {}).values():
            pdb = entry.decode()
            try:
                selector = selector_from_dict((pdb.get("spec") or {}).get("selector"))
            except SelectorError:
                continue  # the disruption controller ignores budgets it cannot read, too
            if selector.matches(labels):
                matching.append((entry, pdb))
        if not matching:
            return
        if len(matching) > 1:
            names = ", ".join(pdb["metadata"]["name"] for _, pdb in matching)
            raise InternalError(
                f"pod {namespace}/{pod_name} is covered by more than one PodDisruptionBudget "
                f"({names}); eviction cannot tell which to honour, so make their selectors disjoint"
            )
        entry, pdb = matching[0]
        pdb_name = pdb["metadata"]["name"]
        status = pdb.get("status")
        if not isinstance(status, dict):
            status = pdb["status"] = {}
        allowed = status.get("disruptionsAllowed") or 0
        if allowed <= 0:
            raise TooManyRequestsError(
                f"Cannot evict pod {namespace}/{pod_name}: it would violate the pod's disruption "
                f'budget "{pdb_name}" (disruptionsAllowed is 0); retry later',
                details={
                    "name": pod_name,
                    "kind": "pods/eviction",
                    "causes": [{"reason": "DisruptionBudget", "field": pdb_name}],
                },
            )
        status["disruptionsAllowed"] = allowed - 1
        disrupted = status.get("disruptedPods")
        if not isinstance(disrupted, dict):
            disrupted = status["disruptedPods"] = {}
        disrupted[pod_name] = format_time(self._clock.now())
        self._put(pdbs, namespace, pdb_name, pdb, MODIFIED, entry)


#: API groups of the custom resources this store serves (their CRDs come from core/api).
_CUSTOM_GROUP_SUFFIX = ".volcano.sh"


def _custom_resource(api_version: str) -> bool:
    group = api_version.rpartition("/")[0]
    return group.endswith(_CUSTOM_GROUP_SUFFIX)

"""A pod's owner chain for ``/pods/mutate``, from a watch-fed cache; the gang from the adapters.

Enrolment (:mod:`stromboli.core.admission.enrol`) needs to know what made a pod: a
Deployment's pod is owned by a ReplicaSet, a JobSet's by a Job, a LeaderWorkerSet's by a
StatefulSet, a Spark executor by its driver pod, and the first owner up the chain that an
adapter converts (:mod:`stromboli.integrations.registry`) decides the PodGroup. The webhook
answers within milliseconds, so nothing is read from the API server per request:

- ReplicaSets, Jobs and StatefulSets, the kinds between a pod and its workload, are listed
  once and followed by a watch, each kept as a small record (name, uid, controller, the few
  annotations enrolment reads), never the whole object; at most :data:`MAX_RECORDS` of them,
  past which new ones are not kept and are looked up as below;
- anything else (a framework object, an owning pod, a ReplicaSet whose watch event has not
  arrived yet: a controller creates pods milliseconds after their ReplicaSet) is fetched
  once with a GET, bounded (:data:`MAX_FETCHES` at a time, :data:`FETCH_TIMEOUT` each), and
  remembered for :data:`FETCH_TTL` seconds in a bounded LRU with the adapter's conversion
  already made, so the other pods of the same job cost nothing; a failed GET is remembered
  too (:data:`MISS_TTL`) and the pod is enrolled from what its owner reference says.

Lookups run on the admission worker threads while the loop applies watch events: each entry
is an immutable record replaced whole, so a reader sees an owner before or after a change,
never half of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from stromboli.core.admission.enrol import Gang, Lineage, Owner
from stromboli.core.api import constants as k
from stromboli.core.cluster.errors import ApiError, GoneError
from stromboli.core.cluster.store import ClusterStore, Obj
from stromboli.integrations.common import Conversion, ConversionError
from stromboli.integrations.registry import adapter_for, group_name_for_pod

log = logging.getLogger(__name__)

Kind = tuple[str, str]
WATCHED: Final[tuple[Kind, ...]] = (
    (k.APPS_V1, "ReplicaSet"),
    (k.K8S_BATCH_V1, "Job"),
    (k.APPS_V1, "StatefulSet"),
)
WATCHED_KINDS: Final = frozenset(kind for _, kind in WATCHED)
MAX_RECORDS: Final = 50_000
MAX_FETCHED: Final = 2_048
FETCH_TTL: Final = 30.0
MISS_TTL: Final = 5.0
FETCH_TIMEOUT: Final = 2.0
MAX_FETCHES: Final = 4
MAX_DEPTH: Final = 6
"""Owners walked up from a pod (TrainJob → JobSet → Job → pod is the longest known chain)."""
KEPT_ANNOTATIONS: Final = (
    k.QUEUE_NAME_ANNOTATION_KEY,
    k.GROUP_MIN_MEMBER_ANNOTATION,
    k.NETWORK_TOPOLOGY_MODE_KEY,
    k.NETWORK_TOPOLOGY_HIGHEST_TIER_KEY,
)
MAX_KEPT_TEXT: Final = 1024
"""Longest label or annotation value a record keeps (``last-applied-configuration`` is not
something an adapter reads, and it can be as large as the object)."""
RETRY_MIN: Final = 0.5
RETRY_MAX: Final = 60.0


class FetchNeeded(Exception):
    """A lookup on the event loop, within :func:`inline_review`, needs a GET, which the loop
    cannot wait for itself: the server answers that review on a worker thread instead."""


_INLINE: Final = contextvars.ContextVar("stromboli_inline_review", default=False)


@contextlib.contextmanager
def inline_review() -> Iterator[None]:
    """Lookups on the loop raise :class:`FetchNeeded` where they would fetch, rather than
    answer without the owner (which is what a lookup on the loop does otherwise)."""
    token = _INLINE.set(True)
    try:
        yield
    finally:
        _INLINE.reset(token)


@dataclass(frozen=True, slots=True)
class Ref:
    """An owner reference: enough to find the object and to tell it from a namesake."""

    api_version: str
    kind: str
    name: str
    uid: str


def controller_ref(obj: Mapping[str, Any]) -> Ref | None:
    """The controller owner reference of ``obj``, when it has a readable one."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            parts = [ref.get(f) for f in ("apiVersion", "kind", "name", "uid")]
            if all(isinstance(p, str) and p for p in parts):
                return Ref(*parts)  # type: ignore[arg-type]
            return None
    return None


def _short(values: Any, keep: tuple[str, ...] | None) -> dict[str, str]:
    if not isinstance(values, Mapping):
        return {}
    return {
        key: value
        for key, value in values.items()
        if isinstance(key, str)
        and isinstance(value, str)
        and len(value) <= MAX_KEPT_TEXT
        and (keep is None or key in keep or key.startswith("volcano.sh/"))
    }


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """What the cache keeps of one owner."""

    owner: Owner
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    controller: Ref | None = None
    conversion: Conversion | None = None

    def as_object(self) -> Obj:
        """The owner as an adapter reads it: its metadata, without spec or status."""
        return {
            "apiVersion": self.owner.api_version,
            "kind": self.owner.kind,
            "metadata": {
                "name": self.owner.name,
                "namespace": self.namespace,
                "uid": self.owner.uid,
                "labels": dict(self.labels),
                "annotations": dict(self.owner.annotations),
            },
        }


def record_of(obj: Mapping[str, Any], convert: bool = False) -> OwnerRecord | None:
    """The record of a listed, watched or fetched object (None when it has no name)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    uid, namespace = meta.get("uid"), meta.get("namespace")
    framework = adapter_for(api_version, kind)
    conversion = None
    if convert and framework is not None:
        try:
            conversion = framework.convert(obj)
        except ConversionError as err:  # the adapter's live handler reports it; enrol by name
            log.debug("no conversion of %s: %s", kind, err)
        except Exception:  # an adapter bug: enrol by name, and say so
            log.warning("conversion of %s %s failed", kind, meta.get("name"), exc_info=True)
    annotations = _short(meta.get("annotations"), None if framework else KEPT_ANNOTATIONS)
    return OwnerRecord(
        owner=Owner(
            str(api_version or ""),
            str(kind or ""),
            meta["name"],
            uid if isinstance(uid, str) else "",
            annotations,
        ),
        namespace=namespace if isinstance(namespace, str) else "",
        labels=_short(meta.get("labels"), None) if framework else {},
        controller=controller_ref(obj),
        conversion=conversion,
    )


class OwnerCache:
    """Owner records for enrolment (see the module docstring). Start it on the loop; call
    :meth:`lineage` from worker threads."""

    def __init__(self, store: ClusterStore, max_records: int = MAX_RECORDS) -> None:
        self.store = store
        self.max_records = max_records
        self._watched: dict[Kind, dict[tuple[str, str], OwnerRecord]] = {w: {} for w in WATCHED}
        self._fetched: OrderedDict[tuple[str, str, str], tuple[float, OwnerRecord | None]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_FETCHES)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.listed: set[Kind] = set()
        self.over_limit = 0
        """Watched objects not kept because :attr:`max_records` were held."""
        self.fetches = 0
        self.fetch_failures = 0

    # --- the watch, on the loop -----------------------------------------------------------------

    @property
    def records(self) -> int:
        return sum(len(held) for held in self._watched.values())

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._follow(kind), name=f"owners-{kind[1]}")
                for kind in WATCHED
            ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def _keep(self, kind: Kind, held: dict[tuple[str, str], OwnerRecord], obj: Obj) -> None:
        record = record_of({"apiVersion": kind[0], "kind": kind[1], **obj})
        if record is None:
            return
        key = (record.namespace, record.owner.name)
        if key not in held and self.records >= self.max_records:
            self.over_limit += 1
            return
        held[key] = record

    async def _follow(self, kind: Kind) -> None:
        delay = RETRY_MIN
        while True:
            try:
                # The first list may come from the watch cache (resourceVersion=0, one
                # response); once listed, a relist (after 410 Gone, a broken watch) is consistent.
                listed = await self.store.list(*kind, cached=kind not in self.listed)
                fresh: dict[tuple[str, str], OwnerRecord] = {}
                self._watched[kind] = fresh  # replaced whole: a relist drops the vanished
                for obj in listed.items:
                    self._keep(kind, fresh, obj)
                self.listed.add(kind)
                delay = RETRY_MIN
                async with self.store.watch(*kind, resource_version=listed.resource_version) as s:
                    async for event in s:
                        self._seen(kind, event.type, event.object)
            except asyncio.CancelledError:
                raise
            except GoneError:
                continue  # history compacted: list again at once
            except Exception as err:  # the API server away, or no RBAC yet: lookups fetch
                log.warning("watch of %ss failed (%s); again in %.1fs", kind[1], err, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    def _seen(self, kind: Kind, event_type: str, obj: Obj) -> None:
        held = self._watched[kind]
        if event_type == "DELETED":
            meta = obj.get("metadata") or {}
            held.pop((str(meta.get("namespace") or ""), str(meta.get("name") or "")), None)
        elif event_type != "BOOKMARK":
            self._keep(kind, held, obj)

    # --- lookups, on worker threads -------------------------------------------------------------

    def lookup(self, namespace: str, ref: Ref) -> OwnerRecord | None:
        """The owner ``ref`` points at: watched, remembered, or fetched (bounded)."""
        if ref.kind in WATCHED_KINDS:
            held = self._watched.get((ref.api_version, ref.kind), {}).get((namespace, ref.name))
            if held is not None and held.owner.uid == ref.uid:
                return held
        key = (namespace, ref.kind, ref.uid)
        now = time.monotonic()
        with self._lock:
            remembered = self._fetched.get(key)
            if remembered is not None:
                expires, record = remembered
                if now < expires:
                    self._fetched.move_to_end(key)
                    return record
                del self._fetched[key]
        record = self._fetch(namespace, ref)
        if record is not None and record.owner.uid != ref.uid:
            record = None  # a namesake: the owner itself is gone
        with self._lock:
            self._fetched[key] = (now + (FETCH_TTL if record else MISS_TTL), record)
            while len(self._fetched) > MAX_FETCHED:
                self._fetched.popitem(last=False)
        return record

    def _fetch(self, namespace: str, ref: Ref) -> OwnerRecord | None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return None
        if threading.get_ident() == self._loop_thread:
            if _INLINE.get():
                raise FetchNeeded(f"{ref.kind} {namespace}/{ref.name} must be read")
            return None  # never block the loop on itself
        if not self._slots.acquire(blocking=False):
            self.fetch_failures += 1
            return None  # enough lookups in flight: enrol from the reference alone
        try:
            self.fetches += 1
            coro = self.store.get(ref.api_version, ref.kind, ref.name, namespace)
            future = asyncio.run_coroutine_threadsafe(coro, loop)
            try:
                obj = future.result(FETCH_TIMEOUT)
            except TimeoutError:
                future.cancel()
                self.fetch_failures += 1
                return None
            except ApiError as err:  # gone, or not ours to read: enrol from the reference
                log.debug("owner %s %s/%s not read: %s", ref.kind, namespace, ref.name, err)
                self.fetch_failures += 1
                return None
            return record_of(obj, convert=True)
        finally:
            self._slots.release()

    def lineage(self, pod: Mapping[str, Any], namespace: str) -> Lineage:
        """The pod's controller owners, nearest first, and the gang of the first one an
        adapter converts (or of the pod itself: native spark-submit pods)."""
        owners: list[Owner] = []
        framework: OwnerRecord | None = None
        framework_ref: Ref | None = None
        seen: set[str] = set()
        ref = controller_ref(pod)
        while ref is not None and ref.uid not in seen and len(owners) < MAX_DEPTH:
            seen.add(ref.uid)
            adapter = adapter_for(ref.api_version, ref.kind)
            looked = adapter is not None or ref.kind in WATCHED_KINDS or ref.kind == "Pod"
            record = self.lookup(namespace, ref) if looked else None
            owners.append(
                record.owner if record else Owner(ref.api_version, ref.kind, ref.name, ref.uid)
            )
            if adapter is not None:
                framework, framework_ref = record, ref
                break
            ref = record.controller if record is not None else None
        return Lineage(tuple(owners), gang_of(pod, namespace, framework, framework_ref))


def gang_of(
    pod: Mapping[str, Any], namespace: str, record: OwnerRecord | None, ref: Ref | None
) -> Gang | None:
    """The adapter's PodGroup for the pod: the registry names it, the conversion (when the
    owner could be read whole) gives the pod's role and the group's queue."""
    if record is not None:
        owner: Obj | None = record.as_object()
    elif ref is not None:
        owner = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "metadata": {"name": ref.name, "namespace": namespace, "uid": ref.uid},
        }
    else:
        owner = None
    name = group_name_for_pod(pod, owner)
    conversion = record.conversion if record is not None else None
    mutation = conversion.mutation_for(pod) if conversion is not None else None
    if name is None and mutation is not None:
        name = mutation.group_name
    if not name:
        return None
    task = ""
    if mutation is not None and mutation.group_name == name:
        task = str(mutation.annotations.get(k.TASK_SPEC_KEY) or "")
    group = conversion.podgroup(name) if conversion is not None else None
    queue = (group.get("spec") or {}).get("queue") if group is not None else None
    return Gang(name, task, queue if isinstance(queue, str) else "")

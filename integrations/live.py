"""The adapters on a live cluster: framework objects get their PodGroups in the controller.

Run by ``stromboli controller`` next to the vcjob controller. The PodGroups, PriorityClasses
and Namespaces come from the same kopf operator as the other controllers' kinds (or from our own
list+watch), the pods from the controller's shared pod watch; every framework kind whose CRD
is served has a watch of its own (:mod:`.watches`), begun for the kinds discovery finds at start
(:mod:`.discovery`) and, while the process runs, for each framework CRD that becomes
``Established`` (:mod:`.crds`: the controller watches CustomResourceDefinitions); a CRD deleted
stops its kind's watch. For each framework object the registry's adapter computes the gang:

- a PodGroup that does not exist is created, owned by the framework object (``controller``,
  ``blockOwnerDeletion``), so the garbage collector deletes it with its owner;
- one of ours (labelled ``stromboli.dev/adapter``) gets ``minMember`` and ``minResources``
  patched when they change (replicas scaled); its other fields are left as first written;
- one the operator made in its Volcano mode is adopted: never written;
- an object the adapter cannot convert (an unknown replica type, a bad quantity, a missing
  template) gets one Warning event ``PodGroupError`` per version, naming the field, and no
  PodGroup; nothing else waits for it.

Pods the webhook enrolled into a framework gang without ``volcano.sh/task-spec`` (it could not
read the owner in time) get the role the conversion gives them. A ``PodGroup`` of ours that is
deleted while its owner lives is made again. Native spark-submit driver pods and
LeaderWorkerSet leader pods come from the pod watch; they are framework roots too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

from stromboli.core.admission.enrol import ENROLL_LABEL
from stromboli.core.api import constants as k
from stromboli.core.api.keys import object_key
from stromboli.core.api.quantity import QuantityError, parse_quantity
from stromboli.core.api.registry import KindInfo
from stromboli.core.clock import Clock, SystemClock
from stromboli.core.cluster.errors import AlreadyExistsError, ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventRecorder
from stromboli.core.informer import Informer, Kind
from stromboli.core.logsafe import log_safe
from stromboli.core.quarantine import MESSAGE_LIMIT, EventSink, Quarantine, reference_of
from stromboli.integrations.common import (
    Adapter,
    Context,
    Conversion,
    ConversionError,
    annotations_of,
    controller_of,
    is_ours,
    labels_of,
)
from stromboli.integrations.crds import read_crd
from stromboli.integrations.crdwatch import CrdWatch
from stromboli.integrations.discovery import served
from stromboli.integrations.jobset import lws
from stromboli.integrations.kinds import CONVERTED, FRAMEWORK_KINDS, RELATED
from stromboli.integrations.registry import SPARK_SUBMIT, adapter_for, is_spark_submit_pod
from stromboli.integrations.spark.submit import ROLE_LABEL
from stromboli.integrations.watches import KindWatches

log = logging.getLogger(__name__)

POD: Final[Kind] = ("v1", "Pod")
PODGROUP: Final[Kind] = (k.SCHEDULING_V1BETA1, "PodGroup")
PRIORITY_CLASS: Final[Kind] = (k.K8S_SCHEDULING_V1, "PriorityClass")
NAMESPACE: Final[Kind] = ("v1", "Namespace")
RAY_CLUSTER: Final[Kind] = ("ray.io/v1", "RayCluster")
LWS: Final[Kind] = (lws.API_VERSION, "LeaderWorkerSet")
TRAINJOB: Final[Kind] = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
COMPONENT: Final = "stromboli-framework-adapters"
#: Reason of the Warning event on a framework object that gets no PodGroup (Volcano's reason
#: for a job whose PodGroup cannot be made).
REASON: Final = "PodGroupError"
#: PodGroup fields kept in step with the framework object; the others stay as first written.
FOLLOWED: Final = ("minMember", "minResources")
#: Framework objects reconciled at once (each at most a create or a patch).
CONCURRENCY: Final = 16
#: Pods waiting for their role (their gang's conversion not made yet); the oldest go first.
MAX_WAITING_PODS: Final = 10_000
#: Framework objects whose last warning is remembered (to post one per version).
MAX_REPORTED: Final = 10_000

#: Followed whatever frameworks are installed.
BASE_KINDS: Final = (NAMESPACE, PODGROUP, PRIORITY_CLASS)

_RUNTIMES: Final = frozenset((i.api_version, i.kind) for i in RELATED)

#: (apiVersion, kind, namespace, name) of a framework object.
FKey = tuple[str, str, str, str]
_FALLBACK_PREFIX: Final = "podgroup-"


def _amount(text: Any) -> Fraction | None:
    try:
        return parse_quantity(text, "minResources")
    except QuantityError:
        return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def followed_changes(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch of ``spec`` that brings the followed fields of ``stored`` to those of
    ``wanted``: empty when they agree (quantities compared by value, ``1000m`` is ``1``)."""
    have = _mapping(stored.get("spec"))
    want = _mapping(wanted.get("spec"))
    changes: dict[str, Any] = {}
    if have.get("minMember") != want.get("minMember"):
        changes["minMember"] = want.get("minMember")
    old = _mapping(have.get("minResources"))
    new = _mapping(want.get("minResources"))
    patch: dict[str, Any] = {n: None for n in old if n not in new}
    for name, text in new.items():
        if name not in old or _amount(old[name]) != _amount(text):
            patch[name] = text
    if patch:
        changes["minResources"] = patch
    return changes


class FrameworkController:
    """The live handlers of every served framework kind (see the module docstring)."""

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock | None = None,
        *,
        kinds: Sequence[KindInfo] | None = None,
        events: EventSink | None = None,
        quarantine: Quarantine | None = None,
        every_namespace: bool = False,
    ) -> None:
        self.store = store
        #: Serve every namespace, enrolled or not (the simulator, where every workload given
        #: is one to schedule).
        self.every_namespace = every_namespace
        self.clock = clock or SystemClock()
        #: The framework kinds handled; None until :meth:`prepare` asks discovery.
        self.kinds: list[KindInfo] | None = list(kinds) if kinds is not None else None
        self.events: EventSink = events or EventRecorder(store, self.clock, COMPONENT)
        self.quarantine = quarantine or Quarantine(COMPONENT)
        self.informer = Informer(store, list(BASE_KINDS), self.handle, quarantine=self.quarantine)
        #: One watch per framework kind followed (they come and go with their CRDs).
        self.watches = KindWatches(store, self.handle, self.quarantine)
        #: Why each framework CRD that is established is not followed (logged once each).
        self._crd_problems: dict[str, str] = {}
        self._served: set[Kind] = set()
        self._enrolled: set[str] = set()
        self._groups: dict[str, dict[str, dict]] = {}
        self._priorities: dict[str, int] = {}
        self._objects: dict[Kind, dict[str, dict[str, dict]]] = {}
        self._leaders: dict[tuple[str, str], dict[str, dict]] = {}
        self._drivers: dict[tuple[str, str], dict] = {}
        self._conversions: dict[FKey, Conversion] = {}
        self._group_owner: dict[tuple[str, str], FKey] = {}
        self._owned_groups: dict[FKey, set[tuple[str, str]]] = {}
        self._waiting_pods: dict[tuple[str, str], dict] = {}
        self._reported: dict[FKey, tuple[str, str, str]] = {}
        self._dirty: dict[FKey, None] = {}
        self._wake = asyncio.Event()
        self.created = 0
        self.updated = 0
        self.warnings = 0
        self.pods_labelled = 0

    # --- setting up ---------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Find the served framework kinds (one watch each, begun by :meth:`run` or the
        first :meth:`pump`) and build the informer of the other kinds."""
        if self.kinds is None:
            self.kinds = await served(self.store, FRAMEWORK_KINDS)
        served_kinds = {(i.api_version, i.kind) for i in self.kinds}
        if ("kubeflow.org/v2beta1", "MPIJob") in served_kinds:
            # Two versions of one CRD list the same objects: the MPI operator's wins.
            served_kinds.discard(("kubeflow.org/v1", "MPIJob"))
        ordered = [
            (i.api_version, i.kind)
            for i in FRAMEWORK_KINDS
            if (i.api_version, i.kind) in served_kinds
        ]
        names = ", ".join(kind for _, kind in ordered) or "none"
        log.info("framework adapters on for: %s", names)
        self.informer = Informer(
            self.store, list(BASE_KINDS), self.handle, quarantine=self.quarantine
        )
        for kind in ordered:
            self.follow(kind)

    # --- framework kinds coming and going -------------------------------------------------------

    def follow(self, kind: Kind) -> None:
        """Start following a framework kind: its objects are listed, then watched."""
        if kind in self._served:
            return
        self._served.add(kind)
        self.watches.add(kind)

    def unfollow(self, kind: Kind) -> None:
        """Stop following a framework kind (its CRD is gone): its watch ends and what was
        known of its objects is forgotten. Their PodGroups are left to the garbage collector:
        deleting a CRD deletes its objects first, and the groups they own go with them."""
        if kind not in self._served:
            return
        self._served.discard(kind)
        self.watches.remove(kind)
        for ns, named in self._objects.pop(kind, {}).items():
            for name in named:
                self._forget((*kind, ns, name))

    def _crd_seen(self, event_type: str, crd: dict) -> None:
        """A CRD event: a framework CRD established starts its kind's watch, one deleted
        (or no longer readable) stops it; other CRDs are ignored."""
        reading = read_crd(crd)
        if reading is None:
            return
        if event_type != "DELETED" and reading.follow is None and not reading.problem:
            return  # not established yet: nothing to decide
        wanted = None if event_type == "DELETED" else reading.follow
        why = (
            "was deleted"
            if event_type == "DELETED"
            else f"stores it as {wanted.api_version}"
            if wanted is not None
            else "cannot be read"
        )
        for info in reading.versions:
            kind = (info.api_version, info.kind)
            if kind in self._served and info != wanted:
                log.info(
                    "framework adapter off for %s (%s): its CRD %s %s",
                    info.kind,
                    info.api_version,
                    reading.name,
                    why,
                )
                self.unfollow(kind)
        if wanted is not None and (wanted.api_version, wanted.kind) not in self._served:
            log.info(
                "framework adapter on for %s (%s): its CRD %s is established",
                wanted.kind,
                wanted.api_version,
                reading.name,
            )
            self.follow((wanted.api_version, wanted.kind))
        problem = "" if event_type == "DELETED" else reading.problem
        if problem and self._crd_problems.get(reading.name) != problem:
            log.warning("%s", log_safe(problem, MESSAGE_LIMIT))
        if problem:
            self._crd_problems[reading.name] = problem
        else:
            self._crd_problems.pop(reading.name, None)

    async def follow_crds(self) -> None:
        """Watch CustomResourceDefinitions until cancelled (:mod:`.crdwatch`: a framework CRD
        is noticed as soon as it is established). Without the grant to list them, framework
        CRDs installed later wait for a restart, as said once."""
        await CrdWatch(self.store, self._crd_seen).run()

    @property
    def served_kinds(self) -> frozenset[Kind]:
        return frozenset(self._served)

    def objects(self) -> list[tuple[FKey, dict]]:
        """Every framework object followed now, by key (the simulator's operators read them)."""
        return [
            ((*kind, ns, name), obj)
            for kind, by_ns in self._objects.items()
            if kind in self._served
            for ns, named in by_ns.items()
            for name, obj in named.items()
        ]

    def conversion_of(self, key: FKey) -> Conversion | None:
        """The last conversion made of the object (None before one, or after it failed)."""
        return self._conversions.get(key)

    def podgroup(self, namespace: str, name: str) -> dict | None:
        return self._groups.get(namespace, {}).get(name)

    def mutation_for(self, namespace: str, group: str, pod: Mapping[str, Any]) -> Any:
        """The mutation for ``pod`` of the framework object that owns gang ``group`` (a
        TrainJob's, for its JobSet's pods); None when unknown."""
        owner = self._group_owner.get((namespace, group))
        conversion = self._conversions.get(owner) if owner is not None else None
        change = conversion.mutation_for(pod) if conversion is not None else None
        return change if change is not None and change.group_name == group else None

    # --- events -------------------------------------------------------------------------------

    def handle(self, kind: Kind, event_type: str, obj: dict) -> None:
        """An event of a followed kind (the informer calls it)."""
        if kind == PODGROUP:
            self._podgroup_seen(event_type, obj)
        elif kind == NAMESPACE:
            self._namespace_seen(event_type, obj)
        elif kind == PRIORITY_CLASS:
            name = (obj.get("metadata") or {}).get("name")
            value = obj.get("value")
            if event_type == "DELETED" or not isinstance(value, int):
                self._priorities.pop(str(name), None)
            else:
                self._priorities[str(name)] = value
        else:
            self._framework_seen(kind, event_type, obj)

    def _mark(self, key: FKey) -> None:
        self._dirty[key] = None
        self._wake.set()

    def enrolled(self, namespace: str) -> bool:
        """Framework objects get PodGroups from us where their pods are enrolled (elsewhere a
        group nobody joins would hold its queue's resources from ``Inqueue`` on)."""
        return self.every_namespace or namespace in self._enrolled

    def _namespace_seen(self, event_type: str, namespace: dict) -> None:
        name = str((namespace.get("metadata") or {}).get("name") or "")
        now = event_type != "DELETED" and labels_of(namespace).get(ENROLL_LABEL) == "true"
        if now == (name in self._enrolled):
            return
        if now:
            self._enrolled.add(name)
            for kind, held in self._objects.items():  # enrolled since: their gangs are due
                for obj_name in held.get(name, {}):
                    self._mark((*kind, name, obj_name))
            for ns, driver in self._drivers:
                if ns == name:
                    self._mark((*POD, ns, driver))
        else:
            self._enrolled.discard(name)

    def _podgroup_seen(self, event_type: str, group: dict) -> None:
        ns, name = object_key(group)
        if event_type == "DELETED":
            held = self._groups.get(ns)
            if held is not None:
                held.pop(name, None)
                if not held:
                    del self._groups[ns]
            owner = self._group_owner.get((ns, name))
            if owner is not None and is_ours(group):
                self._mark(owner)  # made again while its owner lives (the GC deletes both)
            return
        self._groups.setdefault(ns, {})[name] = group

    def _framework_seen(self, kind: Kind, event_type: str, obj: dict) -> None:
        obj.setdefault("apiVersion", kind[0])
        obj.setdefault("kind", kind[1])
        ns, name = object_key(obj)
        key: FKey = (*kind, ns, name)
        held = self._objects.setdefault(kind, {})
        if event_type == "DELETED":
            named = held.get(ns)
            if named is not None:
                named.pop(name, None)
                if not named:
                    del held[ns]
            self._forget(key)
        else:
            held.setdefault(ns, {})[name] = obj
            if kind in self._served:
                self._mark(key)
        ref = controller_of(obj)
        if ref is not None:  # a RayJob's cluster, a TrainJob's JobSet: the owner's gang moves
            owner_kind = (str(ref.get("apiVersion")), str(ref.get("kind")))
            if owner_kind in self._served:
                self._mark((*owner_kind, ns, str(ref.get("name"))))
        if kind in _RUNTIMES:
            for job_ns, jobs in self._objects.get(TRAINJOB, {}).items():
                if kind[1] == "ClusterTrainingRuntime" or job_ns == ns:
                    for job in jobs:
                        self._mark((*TRAINJOB, job_ns, job))

    def _forget(self, key: FKey) -> None:
        """A deleted object leaves nothing behind (a long-running process must not grow)."""
        self._conversions.pop(key, None)
        self._reported.pop(key, None)
        self._dirty.pop(key, None)
        for group in self._owned_groups.pop(key, ()):
            if self._group_owner.get(group) == key:
                del self._group_owner[group]
        if key[:2] == LWS:
            self._leaders.pop((key[2], key[3]), None)

    def _own(self, group: tuple[str, str], key: FKey, *, replace: bool = True) -> None:
        if not replace and group in self._group_owner:
            return
        self._group_owner[group] = key
        self._owned_groups.setdefault(key, set()).add(group)

    def seen(self, kind: Kind, event_type: str, pod: dict) -> None:
        """A pod event from the controller's shared pod watch."""
        if kind != POD:
            return
        ns, name = object_key(pod)
        labels = labels_of(pod)
        if is_spark_submit_pod(pod) and labels.get(ROLE_LABEL) == "driver":
            key: FKey = (*POD, ns, name)
            if event_type == "DELETED":
                self._drivers.pop((ns, name), None)
                self._forget(key)
            else:
                known = self._drivers.get((ns, name)) is not None
                self._drivers[(ns, name)] = pod
                if not known:
                    self._mark(key)  # its gang is made once; the pod's later events change none
        leader_of = labels.get(lws.NAME_LABEL)
        if isinstance(leader_of, str) and leader_of and labels.get(lws.WORKER_INDEX_LABEL) == "0":
            # Kept while LeaderWorkerSet is not followed too: its CRD may be followed later.
            leaders = self._leaders.setdefault((ns, leader_of), {})
            fresh = name not in leaders
            if event_type == "DELETED":
                leaders.pop(name, None)
                if not leaders:
                    del self._leaders[(ns, leader_of)]
            else:
                leaders[name] = pod
            if fresh or event_type == "DELETED":
                self._mark((*LWS, ns, leader_of))
        uid = str((pod.get("metadata") or {}).get("uid") or name)
        if event_type == "DELETED":
            self._waiting_pods.pop((ns, uid), None)
            return
        annotations = annotations_of(pod)
        group = annotations.get(k.GROUP_NAME_ANNOTATION)
        if (
            isinstance(group, str)
            and group
            and not group.startswith(_FALLBACK_PREFIX)
            and k.TASK_SPEC_KEY not in annotations
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            self._waiting_pods.pop((ns, uid), None)  # re-inserted last: the newest kept longest
            self._waiting_pods[(ns, uid)] = pod
            if len(self._waiting_pods) > MAX_WAITING_PODS:
                del self._waiting_pods[next(iter(self._waiting_pods))]
            if (ns, group) in self._group_owner:
                self._wake.set()

    # --- reconciling --------------------------------------------------------------------------

    def _object(self, key: FKey) -> dict | None:
        api_version, kind, ns, name = key
        if (api_version, kind) == POD:
            return self._drivers.get((ns, name))
        return self._objects.get((api_version, kind), {}).get(ns, {}).get(name)

    def related(self, key: FKey) -> list[Mapping[str, Any]]:
        api_version, kind, ns, name = key
        if kind in ("RayJob", "RayService"):
            return list(self._objects.get(RAY_CLUSTER, {}).get(ns, {}).values())
        if (api_version, kind) == TRAINJOB:
            related: list[Mapping[str, Any]] = []
            for info in RELATED:
                held = self._objects.get((info.api_version, info.kind), {})
                related += held.get(ns if info.namespaced else "", {}).values()
            return related
        if (api_version, kind) == LWS:
            return list(self._leaders.get((ns, name), {}).values())
        return []

    async def reconcile(self, key: FKey) -> Conversion | None:
        """Convert one framework object and write what its gang needs; never raises for
        anything the object holds."""
        obj = self._object(key)
        if obj is None:
            return None
        api_version, kind, ns, _ = key
        if not self.enrolled(ns):
            return None
        adapter: Adapter | None = (
            SPARK_SUBMIT if (api_version, kind) == POD else adapter_for(api_version, kind)
        )
        if adapter is None:
            return None
        context = Context(
            existing=self._groups.get(ns, {}),
            priority_classes=self._priorities,
            related=self.related(key),
        )
        try:
            conversion = adapter.convert(obj, context)
        except ConversionError as err:
            self._conversions.pop(key, None)
            await self._warn(key, obj, str(err))
            return None
        except Exception as err:  # an adapter bug: this object waits, the others go on
            log.warning("converting %s %s/%s failed", kind, ns, key[3], exc_info=True)
            self._conversions.pop(key, None)
            self.quarantine.reject(obj, err, kind)
            return None
        self._conversions[key] = conversion
        for change in conversion.mutations:
            self._own((ns, change.group_name), key, replace=False)
        for name in conversion.adopted:
            self._own((ns, name), key)
        for group in conversion.podgroups:
            self._own((ns, group["metadata"]["name"]), key)
            await self._write(key, obj, group)
        return conversion

    async def _write(self, key: FKey, obj: dict, group: dict) -> None:
        ns, name = object_key(group)
        stored = self._groups.get(ns, {}).get(name)
        try:
            if stored is None:
                created = await self.store.create(group)
                self._groups.setdefault(ns, {})[name] = created
                self.created += 1
                log.info("PodGroup %s/%s created for %s %s", ns, name, key[1], key[3])
                return
            changes = followed_changes(stored, group)
            if not changes:
                return
            patched = await self.store.patch(
                *PODGROUP, name, {"spec": changes}, namespace=ns, patch_type="merge"
            )
            self._groups.setdefault(ns, {})[name] = patched
            self.updated += 1
            log.info("PodGroup %s/%s follows %s %s: %s", ns, name, key[1], key[3], changes)
        except AlreadyExistsError:
            # Made since our cache last heard (an operator in Volcano mode, racing us): read
            # it and decide again, adopting or following it.
            try:
                self._groups.setdefault(ns, {})[name] = await self.store.get(*PODGROUP, name, ns)
            except ApiError as err:
                log.info("PodGroup %s/%s not read back: %s", ns, name, err)
            self._mark(key)
        except NotFoundError:
            self._groups.get(ns, {}).pop(name, None)
            self._mark(key)
        except ApiError as err:  # refused (a queue policy, validation): the owner is told
            await self._warn(key, obj, f"PodGroup {name}: {err}")

    async def _warn(self, key: FKey, obj: dict, message: str) -> None:
        meta = obj.get("metadata") or {}
        version = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""), message)
        if self._reported.get(key) == version:
            return
        self._reported.pop(key, None)
        self._reported[key] = version
        if len(self._reported) > MAX_REPORTED:
            del self._reported[next(iter(self._reported))]
        self.warnings += 1
        text = log_safe(f"no PodGroup: {message}", MESSAGE_LIMIT)
        log.warning("%s %s/%s: %s", key[1], log_safe(key[2], 64), log_safe(key[3], 256), text)
        reference = {n: v for n, v in reference_of(obj).items() if n != "resourceVersion"}
        await self.events.record(reference, "Warning", REASON, text)

    async def _label_waiting_pods(self) -> None:
        """Give the pods waiting for a role the one their gang's conversion names."""
        for slot, pod in list(self._waiting_pods.items()):
            ns, name = object_key(pod)
            group = str(annotations_of(pod).get(k.GROUP_NAME_ANNOTATION))
            owner = self._group_owner.get((ns, group))
            conversion = self._conversions.get(owner) if owner is not None else None
            if conversion is None:
                continue
            del self._waiting_pods[slot]
            change = conversion.mutation_for(pod)
            if change is None or change.group_name != group:
                continue  # not a role of this gang: nothing to say
            role = change.annotations[k.TASK_SPEC_KEY]
            patch = {"metadata": {"annotations": {k.TASK_SPEC_KEY: role}}}
            try:
                await self.store.patch(*POD, name, patch, namespace=ns, patch_type="merge")
                self.pods_labelled += 1
            except NotFoundError:
                pass  # deleted meanwhile
            except ApiError as err:
                log.info("pod %s/%s keeps no task-spec: %s", ns, name, err)

    async def step(self) -> int:
        """Reconcile every object waiting now; returns how many."""
        keys = list(self._dirty)
        self._dirty.clear()
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(key: FKey) -> None:
            async with gate:
                await self.reconcile(key)

        await asyncio.gather(*(one(key) for key in keys))
        await self._label_waiting_pods()
        await self.quarantine.publish(self.events)
        return len(keys)

    async def pump(self) -> int:
        """Apply queued watch events, then reconcile (for callers that step the store)."""
        await self.informer.pump()
        await self.watches.pump()
        return await self.step()

    async def run(self, own_watch: bool = True, follow_crds: bool = True) -> None:
        """Reconcile as events come; ``own_watch=False`` when a kopf driver feeds the informer
        (the framework kinds are watched here either way); ``follow_crds``: watch CRDs to
        follow framework kinds installed or removed meanwhile. :meth:`prepare` must have run."""
        await self.informer.start()
        follow = asyncio.create_task(self.informer.run()) if own_watch else None
        self.watches.start_all()
        crds = asyncio.create_task(self.follow_crds(), name="CRD watch") if follow_crds else None
        try:
            while True:
                await self.step()
                self._wake.clear()
                if not self._dirty:
                    await self._wake.wait()
                if follow is not None and follow.done():
                    follow.result()
                    return
        finally:
            for task in (follow, crds):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            await self.watches.close()
            await self.informer.stop()


__all__ = ["CONVERTED", "FrameworkController", "followed_changes"]

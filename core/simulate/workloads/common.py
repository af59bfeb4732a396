"""What the emulated workload controllers share: owner references, template hashes, pod states
and the reconcile loop over one kind and the pods (or jobs) it owns.

The names and labels are kube-controller-manager's, so that selectors, ``kubectl get -l`` and
report labels written for a real cluster fit the simulator's objects too. The hash values are
our own (a 32-bit FNV-1a of the template as canonical JSON, spelled in the alphabet Kubernetes
uses for generated names); only their form matches.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from stromboli.core.api import constants as k
from stromboli.core.api.keys import Key, object_key
from stromboli.core.clock import Clock
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.cluster.writes import put_status
from stromboli.core.controller.reconciler import Reconciler, is_newer
from stromboli.core.events import EventRecorder

log = logging.getLogger(__name__)
COMPONENT: Final = "kube-controller-manager"
POD: Final = ("v1", "Pod")
POD_TEMPLATE_HASH_LABEL: Final = "pod-template-hash"
CONTROLLER_REVISION_HASH_LABEL: Final = "controller-revision-hash"
STATEFULSET_POD_NAME_LABEL: Final = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"
JOB_CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
CRONJOB_SCHEDULED_TIMESTAMP: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
DEPLOYMENT_REVISION: Final = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS: Final = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS: Final = "deployment.kubernetes.io/max-replicas"
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
DEFAULT_MAX_PODS: Final = 1000
"""Pods each workload may create in one run. A Deployment whose pods end (a runtime
annotation) is refilled for ever on a real cluster; the cap bounds the run, and the simulator
says when it was reached."""

#: The alphabet of Kubernetes' generated names (no vowels, no look-alike characters).
_ALPHANUMS: Final = "bcdfghjklmnpqrstvwxz2456789"

CreatePod = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Creates a pod as the API server would: admission, store, and the PodGroup controller's
enrolment; raises ``ValueError`` (admission) or ``ApiError`` (store) on refusal."""


def template_hash(template: Any, collision_count: int = 0) -> str:
    """A short, stable hash of a pod template (``pod-template-hash``,
    ``controller-revision-hash``): same template, same hash."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"), default=str)
    data = (text + str(collision_count)).encode()
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in str(value))


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The controller ownerReference a workload controller puts on what it creates."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid") or "")
    return None


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_active(pod: Mapping[str, Any]) -> bool:
    """Neither finished nor being deleted: what a controller counts towards its replicas."""
    return phase(pod) not in TERMINAL_PHASES and not pod["metadata"].get("deletionTimestamp")


def is_ready(pod: Mapping[str, Any]) -> bool:
    if not is_active(pod) or phase(pod) != "Running":
        return False
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def replicas(spec: Mapping[str, Any], default: int = 1) -> int:
    """``spec.replicas`` (the API server's default when unset); never negative."""
    value = spec.get("replicas")
    return max(int(value), 0) if isinstance(value, int) and not isinstance(value, bool) else default


def pod_from_template(
    owner: Mapping[str, Any],
    template: Mapping[str, Any],
    *,
    name: str | None = None,
    generate_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod made from ``owner``'s template, owned by it, in its namespace. The owner's
    ``scheduling.volcano.sh/group-min-member`` is copied on, as Volcano's webhook copies it
    from a pod's workload owner, so that the group the pods share is a gang."""
    tmeta = template.get("metadata") or {}
    inherited = {
        key: value
        for key, value in (owner["metadata"].get("annotations") or {}).items()
        if key == k.GROUP_MIN_MEMBER_ANNOTATION
    }
    meta: dict[str, Any] = {
        "namespace": owner["metadata"].get("namespace") or "default",
        "labels": {**(tmeta.get("labels") or {}), **(labels or {})},
        "annotations": {**inherited, **(tmeta.get("annotations") or {}), **(annotations or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    if name is not None:
        meta["name"] = name
    else:
        meta["generateName"] = generate_name
    for field in ("labels", "annotations"):
        if not meta[field]:
            del meta[field]
    spec = copy.deepcopy(template.get("spec") or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class OwnerController(Reconciler[Key]):
    """Reconciles one owner kind from a cache of it and of the children it owns.

    Subclasses name ``owner_kind`` and ``child_kind`` and implement ``_sync``; children are
    found by their controller ownerReference's uid, as kube-controller-manager's controllers
    adopt by owner. ``notes`` collects what the reader of the run should know (a cap hit).
    """

    owner_kind: tuple[str, str]
    child_kind: tuple[str, str] = POD

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        recorder: EventRecorder,
        pod_factory: CreatePod,
        max_pods: int = DEFAULT_MAX_PODS,
        *,
        watch_children: bool = True,
    ) -> None:
        # Pod children may be fed by a watch shared with other controllers (``seen``), which
        # spares one decode of every pod event per controller.
        kinds = [self.owner_kind, self.child_kind] if watch_children else [self.owner_kind]
        super().__init__(store, clock, kinds, recorder, COMPONENT)
        self.pod_factory = pod_factory
        self.max_pods = max_pods
        #: Pods created per owner uid, and the owners that reached ``max_pods``.
        self._made: dict[str, int] = {}
        self._capped: set[str] = set()
        self.owners: dict[Key, dict[str, Any]] = {}
        self.children: dict[str, dict[Key, dict[str, Any]]] = {}
        self._owner_of_uid: dict[str, Key] = {}
        #: Monotonic time at which an owner must be looked at again (a backoff, a deadline).
        self._due: dict[Key, float] = {}
        self.notes: list[str] = []

    def seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        """An event of another watch (the shared pod watch)."""
        self._seen(kind, event_type, obj)

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if kind == self.owner_kind:
            if event_type == "DELETED":
                gone = self.owners.pop(key, None)
                if gone is not None:
                    self._owner_of_uid.pop(gone["metadata"].get("uid", ""), None)
                self._due.pop(key, None)
                return
            if is_newer(obj, self.owners.get(key)):
                self.owners[key] = obj
                self._owner_of_uid[obj["metadata"].get("uid", "")] = key
                self._mark(key)
            return
        uid = controller_uid(obj)
        if uid is None:
            return
        owned = self.children.setdefault(uid, {})
        if event_type == "DELETED":
            owned.pop(key, None)
        elif is_newer(obj, owned.get(key)):
            owned[key] = obj
        owner = self._owner_of_uid.get(uid)
        if owner is not None:
            self._mark(owner)

    def owned(self, owner: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The children of ``owner``, by name."""
        uid = owner["metadata"].get("uid", "")
        return sorted(self.children.get(uid, {}).values(), key=lambda o: o["metadata"]["name"])

    def next_wakeup(self) -> float | None:
        return min(self._due.values()) if self._due else None

    def wake_at(self, key: Key, monotonic: float) -> None:
        self._due[key] = min(self._due.get(key, monotonic), monotonic)

    async def _collect_due(self) -> None:
        now = self.clock.monotonic()
        for key, due in list(self._due.items()):
            if due <= now:
                del self._due[key]
                self._mark(key)

    async def event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        ref = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": meta["name"],
            "namespace": meta.get("namespace") or "default",
            "uid": meta.get("uid", ""),
        }
        await self.recorder.record(ref, kind, reason, message)

    async def delete_child(self, child: Mapping[str, Any]) -> bool:
        meta = child["metadata"]
        try:
            await self.store.delete(
                child["apiVersion"], child["kind"], meta["name"], meta.get("namespace")
            )
        except NotFoundError:
            return False
        self.writes += 1
        return True

    def at_cap(self, owner: Mapping[str, Any]) -> bool:
        """Whether ``owner`` has created all the pods it may (:attr:`max_pods`); the first time
        it has, :attr:`notes` says so."""
        uid = owner["metadata"].get("uid", "")
        if self._made.get(uid, 0) < self.max_pods:
            return False
        if uid not in self._capped:
            self._capped.add(uid)
            self.notes.append(
                f"{owner['kind']} {object_key(owner)[0]}/{owner['metadata']['name']}: "
                f"stopped creating pods after {self.max_pods} (the simulator's limit; "
                "change it with --max-workload-pods)"
            )
        return True

    def pods_left(self, owner: Mapping[str, Any]) -> int:
        """How many more pods ``owner`` may create."""
        return max(self.max_pods - self._made.get(owner["metadata"].get("uid", ""), 0), 0)

    async def create_pod(
        self, owner: Mapping[str, Any], pod: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Create ``pod`` for ``owner`` through :attr:`pod_factory`; a refusal becomes the
        owner's ``FailedCreate`` Warning event (as kube-controller-manager reports it), and an
        owner past :attr:`max_pods` creates no more (said once in :attr:`notes`)."""
        if self.at_cap(owner):
            return None
        uid = owner["metadata"].get("uid", "")
        try:
            created = await self.pod_factory(pod)
        except (ValueError, ApiError) as err:
            await self.event(owner, "Warning", "FailedCreate", f"Error creating: {err}")
            return None
        self._made[uid] = self._made.get(uid, 0) + 1
        self.writes += 1
        key = object_key(created)
        self.children.setdefault(uid, {})[key] = created
        await self.event(
            owner, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
        )
        return created

    async def write_status(self, obj: dict[str, Any], status: dict[str, Any]) -> None:
        """Write ``status`` unless it is what the object already has."""
        try:
            written = await put_status(
                self.store,
                obj,
                lambda current: None if (current.get("status") or {}) == status else status,
            )
        except ApiError as err:
            log.warning("%s %s: status not written: %s", self.noun, object_key(obj), err)
            return
        if written is None:
            return
        self.writes += 1
        key = object_key(written)
        if is_newer(written, self.owners.get(key)):
            self.owners[key] = written


def omit_zeros(status: dict[str, Any], keep: Iterable[str] = ()) -> dict[str, Any]:
    """``status`` as the API server serialises it: zero counts left out (``omitempty``)."""
    kept = set(keep)
    return {key: value for key, value in status.items() if value != 0 or key in kept}


def names_of(objects: Iterable[Mapping[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in objects}

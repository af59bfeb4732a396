"""The framework operators, emulated on the simulator's store: "what happens if I submit this
RayJob?" without a cluster.

The adapters' live handlers (:class:`~stromboli.integrations.live.FrameworkController`, every
namespace served) make each framework object's PodGroup exactly as on a cluster; then each
operator's pods are made as its code makes them (:mod:`.frameworks`): names, labels, owner,
the role's template, with the group and role the conversion gives, and at the moment the
operator would (the training operator waits for its PodGroup to be ``Inqueue``; Spark's
executors wait for the driver to run; Argo runs a workflow's steps in order). The pods then pass
the simulator's admission like any other. Pods are made once; a failed pod is not replaced.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from stromboli.core.api.constants import GROUP_NAME_ANNOTATION
from stromboli.core.clock import Clock
from stromboli.core.cluster.errors import AlreadyExistsError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventRecorder
from stromboli.core.simulate.operators.frameworks import PLANNERS
from stromboli.integrations.common import Conversion, annotations_of, apply_mutation, controller_of
from stromboli.integrations.kinds import CONVERTED, FRAMEWORK_KINDS
from stromboli.integrations.live import POD, FKey, FrameworkController
from stromboli.integrations.registry import group_name_for_pod

__all__ = ["EMULATED", "OperatorEmulation"]

CreatePod = Callable[[dict], Awaitable[dict]]
#: As the workload controllers' ``--max-workload-pods`` default.
DEFAULT_MAX_PODS = 1000
COMPONENT = "stromboli-operator-emulation"
#: Framework kinds whose pods the simulator makes.
EMULATED = frozenset(PLANNERS)
_CONVERTED = frozenset((info.api_version, info.kind) for info in CONVERTED)


class OperatorEmulation:
    """The adapters and the emulated operators, stepped with the simulator's controllers."""

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        create_pod: CreatePod,
        *,
        max_pods: int = DEFAULT_MAX_PODS,
    ) -> None:
        self.store = store
        #: Pods one framework object may have made (the workload controllers' bound).
        self.max_pods = max_pods
        self.create_pod = create_pod
        self.recorder = EventRecorder(store, clock, COMPONENT)
        self.adapters = FrameworkController(
            store, clock, kinds=FRAMEWORK_KINDS, every_namespace=True
        )
        self.notes: list[str] = []
        self._noted: set[str] = set()
        self._made: set[tuple[str, str, str]] = set()
        self.pods_made = 0
        self._started = False

    async def start(self) -> None:
        if self._started:
            return
        await self.adapters.prepare()
        await self.adapters.informer.start()
        self._started = True

    async def step(self) -> int:
        """One round: PodGroups, then the pods due; returns the objects written (started first
        if need be, as a reconciler's ``step`` is, for harnesses that step without running)."""
        await self.start()
        before = self.adapters.created + self.adapters.updated + self.adapters.pods_labelled
        await self.adapters.pump()
        written = self.adapters.created + self.adapters.updated + self.adapters.pods_labelled
        written -= before
        namespaces: dict[str, list[dict[str, Any]]] = {}
        for key, obj in self.adapters.objects():
            api_version, kind, ns, _ = key
            planner = PLANNERS.get((api_version, kind))
            if (api_version, kind) not in _CONVERTED:
                continue  # read by others (Trainer's runtimes), nothing of its own
            if planner is None:
                self._note(
                    kind,
                    f"{kind} ({api_version}): its operator is not emulated; the adapter's "
                    "PodGroup is made, no pods",
                )
                continue
            conversion = self.adapters.conversion_of(key)
            if conversion is None:
                continue  # not convertible: its Warning event says why
            if ns not in namespaces:
                namespaces[ns] = (await self.store.list(*POD, ns)).items
            owned = _owned_by(obj, namespaces[ns])
            groups = [g["metadata"]["name"] for g in conversion.podgroups]
            group = self.adapters.podgroup(ns, (groups or list(conversion.adopted) or [""])[0])
            written += await self._operate(key, obj, owned, group, conversion, namespaces[ns])
        return written

    async def _operate(
        self,
        key: FKey,
        obj: dict[str, Any],
        owned: list[dict[str, Any]],
        group: dict[str, Any] | None,
        conversion: Conversion,
        listed: list[dict[str, Any]],
    ) -> int:
        """Make what the object's operator would by now; at most ``max_pods`` pods per object
        (a hostile ``replicas: 2147483647`` makes a note, not two billion pods)."""
        api_version, kind, ns, name = key
        planner = PLANNERS[(api_version, kind)]
        have = {p["metadata"]["name"] for p in owned}
        written = pods = 0
        try:
            for item in planner(obj, owned, group, conversion, self.adapters.related(key)):
                if item.get("kind") != "Pod":  # a gang or a child object the operator makes
                    written += await self._make(item)
                    continue
                pods += 1
                if pods > self.max_pods:
                    self._note(
                        f"cap/{kind}/{ns}/{name}",
                        f"{kind} {ns}/{name}: stopped at {self.max_pods} pods "
                        "(--max-workload-pods)",
                    )
                    break
                if item["metadata"]["name"] in have:
                    continue
                created = await self.create_pod(self._enrolled(item, obj))
                listed.append(created)
                self.adapters.seen(POD, "ADDED", created)
                self.pods_made += 1
                written += 1
        except ValueError as err:  # the adapter accepted it, the operator would not
            self._note(f"{kind}/{ns}/{name}", f"{kind} {ns}/{name}: no more pods: {err}")
        return written

    def _enrolled(self, pod: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
        """A pod its own object's conversion left without a gang (a TrainJob's JobSet's) gets
        the one its owner chain names, as the webhook's enrolment gives it."""
        if GROUP_NAME_ANNOTATION in annotations_of(pod):
            return pod
        ns = str(pod["metadata"].get("namespace") or "default")
        group = group_name_for_pod(pod, owner)
        change = self.adapters.mutation_for(ns, group, pod) if group else None
        return apply_mutation(pod, change) if change is not None else pod

    async def _make(self, child: dict[str, Any]) -> int:
        """Create an operator's object (a step group's PodGroup, a TrainJob's JobSet) once."""
        meta = child["metadata"]
        key = (str(child.get("kind")), str(meta.get("namespace")), str(meta["name"]))
        if key in self._made or (
            key[0] == "PodGroup" and self.adapters.podgroup(key[1], key[2]) is not None
        ):
            return 0
        self._made.add(key)
        try:
            await self.store.create(child)
        except AlreadyExistsError:
            return 0
        return 1

    def next_wakeup(self) -> float | None:
        return None  # the operators act on changes only

    def _note(self, key: str, text: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(text)


def _owned_by(obj: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The object's pods, and theirs (Spark executors are owned by the driver pod)."""
    owners = {str((obj.get("metadata") or {}).get("uid") or "")}
    found: list[dict[str, Any]] = []
    for _ in range(2):
        for pod in pods:
            ref = controller_of(pod)
            if ref is not None and ref.get("uid") in owners and pod not in found:
                found.append(pod)
                owners.add(str(pod["metadata"].get("uid") or ""))
    return found

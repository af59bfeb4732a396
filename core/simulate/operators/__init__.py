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

from stromboli.core.clock import Clock
from stromboli.core.cluster.errors import AlreadyExistsError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.events import EventRecorder
from stromboli.core.simulate.operators.frameworks import PLANNERS
from stromboli.integrations.common import controller_of
from stromboli.integrations.kinds import FRAMEWORK_KINDS
from stromboli.integrations.live import POD, FrameworkController

__all__ = ["EMULATED", "OperatorEmulation"]

CreatePod = Callable[[dict], Awaitable[dict]]
COMPONENT = "stromboli-operator-emulation"
#: Framework kinds whose pods the simulator makes.
EMULATED = frozenset(PLANNERS)


class OperatorEmulation:
    """The adapters and the emulated operators, stepped with the simulator's controllers."""

    def __init__(self, store: ClusterStore, clock: Clock, create_pod: CreatePod) -> None:
        self.store = store
        self.create_pod = create_pod
        self.recorder = EventRecorder(store, clock, COMPONENT)
        self.adapters = FrameworkController(
            store, clock, kinds=FRAMEWORK_KINDS, every_namespace=True
        )
        self.notes: list[str] = []
        self._noted: set[str] = set()
        self._made_groups: set[tuple[str, str]] = set()
        self.pods_made = 0

    async def start(self) -> None:
        await self.adapters.prepare()
        await self.adapters.informer.start()

    async def step(self) -> int:
        """One round: PodGroups, then the pods due; returns the objects written."""
        before = self.adapters.created + self.adapters.updated + self.adapters.pods_labelled
        await self.adapters.pump()
        written = self.adapters.created + self.adapters.updated + self.adapters.pods_labelled
        written -= before
        namespaces: dict[str, list[dict[str, Any]]] = {}
        for key, obj in self.adapters.objects():
            api_version, kind, ns, name = key
            planner = PLANNERS.get((api_version, kind))
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
            try:
                wanted = planner(obj, owned, group, conversion)
            except ValueError as err:  # the adapter accepted it, the operator would not
                self._note(f"{kind}/{ns}/{name}", f"{kind} {ns}/{name}: no pods: {err}")
                continue
            have = {p["metadata"]["name"] for p in owned}
            for pod in wanted:
                if pod.get("kind") == "PodGroup":  # a gang an operator makes as it goes
                    written += await self._podgroup(pod)
                    continue
                if pod["metadata"]["name"] in have:
                    continue
                created = await self.create_pod(pod)
                namespaces[ns].append(created)
                self.adapters.seen(POD, "ADDED", created)
                self.pods_made += 1
                written += 1
        return written

    async def _podgroup(self, group: dict[str, Any]) -> int:
        ns, name = group["metadata"]["namespace"], group["metadata"]["name"]
        if self.adapters.podgroup(ns, name) is not None or (ns, name) in self._made_groups:
            return 0
        self._made_groups.add((ns, name))
        try:
            await self.store.create(group)
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

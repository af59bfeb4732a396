"""The devices of a session's nodes, card by card, and what each task holds of them.

Built at session open from the nodes (``volcano.sh/gpu-number``/``gpu-memory`` resources, the
``volcano.sh/node-vgpu-register`` annotation) and from the device ids written on the pods
already on them (``volcano.sh/gpu-index``, ``volcano.sh/vgpu-ids-new``), so it is the same
after a scheduler restart. Placements of the session are added and removed as tasks are
allocated and undone, so later tasks of the cycle see them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.node import NodeInfo, NodeTable
from stromboli.core.scheduler.util.devices import gpushare, vgpu
from stromboli.core.scheduler.util.devices.mig import DEFAULT_GEOMETRIES, ModelGeometries
from stromboli.core.scheduler.util.devices.request import (
    GPU_MEMORY,
    GPU_NUMBER,
    DeviceError,
    DeviceRequest,
    device_request,
    type_allowed,
)
from stromboli.core.scheduler.util.devices.vgpu import BINPACK, SPREAD

log = logging.getLogger(__name__)

#: The node label NVIDIA's GPU feature discovery sets to the card model.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Registrations already parsed, by their text (nodes rarely change theirs); bounded.
#: Parsed registrations by (text, MIG geometries): the geometries shape the cards' MIG state.
_REGISTERED: dict[tuple[str, tuple[ModelGeometries, ...]], list[vgpu.Card] | str] = {}
_REGISTERED_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class DeviceOptions:
    gpu_sharing: bool = False
    gpu_number: bool = False
    vgpu: bool = False
    policy: str = BINPACK
    #: ``deviceshare.GPUExclusiveRules``: label maps; pods matching one never share a card
    #: with other pods matching the same one.
    exclusive_rules: tuple[Mapping[str, str], ...] = ()
    geometries: tuple[ModelGeometries, ...] = DEFAULT_GEOMETRIES


@dataclass(slots=True)
class NodeDevices:
    share: list[gpushare.ShareCard] = field(default_factory=list)
    cards: list[vgpu.Card] = field(default_factory=list)

    def fullness(self) -> float:
        shares = [c.used_memory / c.memory for c in self.share if c.memory]
        shares += [c.share for c in self.cards]
        return float(sum(shares) / len(shares)) if shares else 0.0


@dataclass(frozen=True, slots=True)
class Plan:
    """Where a task's devices go on one node: legacy card ids and vGPU grants."""

    share_ids: tuple[int, ...] = ()
    assignment: vgpu.Assignment = ()


@dataclass(frozen=True, slots=True)
class Held:
    position: int
    request: DeviceRequest
    holder: vgpu.Holder
    plan: Plan


def _copy_cards(cards: list[vgpu.Card]) -> list[vgpu.Card]:
    out = []
    for card in cards:
        copy = vgpu.Card(
            card.uuid,
            card.index,
            card.type,
            card.memory,
            card.cores,
            card.split,
            card.numa,
            card.mode,
            card.healthy,
        )
        if card.mig is not None:
            copy.mig = type(card.mig)(card.mig.groups)
        out.append(copy)
    return out


def registered_cards(text: str, known: tuple[ModelGeometries, ...]) -> list[vgpu.Card] | str:
    """Fresh (unused) cards of a registration, or the reason it cannot be read."""
    key = (text, known)
    parsed = _REGISTERED.get(key)
    if parsed is None:
        try:
            parsed = vgpu.cards_from_register(text, known)
        except DeviceError as err:
            parsed = str(err)
        if len(_REGISTERED) >= _REGISTERED_LIMIT:
            _REGISTERED.clear()
        _REGISTERED[key] = parsed
    return parsed if isinstance(parsed, str) else _copy_cards(parsed)


class DeviceInventory:
    def __init__(self, nodes: NodeTable, options: DeviceOptions) -> None:
        self.table = nodes
        self.options = options
        self.devices: list[NodeDevices | None] = [None] * len(nodes)
        #: Per node: 1 where it has devices this plugin tracks.
        self.has_devices = np.zeros(len(nodes), dtype=bool)
        #: Per node: how full its cards are (0 to 1), for scoring.
        self.fullness = np.zeros(len(nodes))
        self.held: dict[str, Held] = {}
        self._requests: dict[str, DeviceRequest | str] = {}
        #: Node registration errors, by node name (for the plugin to report).
        self.node_errors: dict[str, str] = {}
        #: Per node: bumped whenever a task takes or gives back devices there, so verdicts
        #: kept per request are checked again only where something changed.
        self.versions = np.zeros(len(nodes), dtype=np.int64)
        #: Replaces the policy's card order when set (the ``fragmentation`` plugin's choice);
        #: called with the node's position.
        self.card_order: Callable[[int], vgpu.CardOrder | None] | None = None
        for info in nodes.nodes:
            self._add_node(info)
        for info in nodes.nodes:
            if self.devices[info.position] is not None:
                for task in list(info.tasks.values()):
                    self.adopt(task, info.position)

    # -- nodes ---------------------------------------------------------------------------

    def _add_node(self, info: NodeInfo) -> None:
        devices = NodeDevices()
        options = self.options
        if options.gpu_sharing or options.gpu_number:
            amounts = info.allocatable.amounts
            devices.share = gpushare.share_cards(
                amounts.get(GPU_NUMBER, 0.0),
                amounts.get(GPU_MEMORY, 0.0),
                ((info.node.get("metadata") or {}).get("annotations") or {}).get(
                    k.GPU_UNHEALTHY_IDS_KEY
                ),
            )
        if options.vgpu:
            text = ((info.node.get("metadata") or {}).get("annotations") or {}).get(
                k.NODE_VGPU_REGISTER_KEY
            )
            if isinstance(text, str) and text:
                cards = registered_cards(text, options.geometries)
                if isinstance(cards, str):
                    self.node_errors[info.name] = (
                        f"node {info.name}: annotation {k.NODE_VGPU_REGISTER_KEY}: {cards}"
                    )
                else:
                    devices.cards = cards
        if devices.share or devices.cards:
            self.devices[info.position] = devices
            self.has_devices[info.position] = True

    def _refresh(self, position: int) -> None:
        self.versions[position] += 1
        devices = self.devices[position]
        self.fullness[position] = devices.fullness() if devices is not None else 0.0

    # -- tasks ---------------------------------------------------------------------------

    def request(self, task: TaskInfo) -> DeviceRequest | str:
        """The task's device request (read once per session), or why it cannot be read."""
        request = self._requests.get(task.uid)
        if request is None:
            try:
                request = device_request(task.pod)
            except DeviceError as err:
                request = str(err)
            self._requests[task.uid] = request
        return request

    def holder(self, task: TaskInfo) -> vgpu.Holder:
        labels = (task.pod.get("metadata") or {}).get("labels") or {}
        rules = frozenset(
            i
            for i, rule in enumerate(self.options.exclusive_rules)
            if rule and all(labels.get(key) == value for key, value in rule.items())
        )
        return vgpu.Holder(task.uid, task.job_id, rules)

    def tracked(self, request: DeviceRequest) -> bool:
        """Whether this inventory places any part of ``request`` card by card."""
        options = self.options
        share = (request.gpu_memory and options.gpu_sharing) or (
            request.gpu_number and options.gpu_number
        )
        return bool(share or (request.wants_vgpu and options.vgpu))

    def plan(
        self, task: TaskInfo, request: DeviceRequest, position: int, ordered: bool = True
    ) -> Plan | str:
        """Where the task's devices would go on the node at ``position``, or why they
        would not fit (``ordered`` False: whether they fit is all that is asked, so
        ``card_order`` is not consulted)."""
        devices = self.devices[position]
        options = self.options
        share_ids: list[int] = []
        if (request.gpu_number and options.gpu_number) or (
            request.gpu_memory and options.gpu_sharing
        ):
            if devices is None or not devices.share:
                return "no enough gpu number" if request.gpu_number else "no enough gpu memory"
            chosen = gpushare.fit_share(devices.share, request, options.policy == SPREAD)
            if isinstance(chosen, str):
                return chosen
            share_ids = chosen
        assignment: vgpu.Assignment = ()
        if request.wants_vgpu and options.vgpu:
            if devices is None or not devices.cards:
                return "no enough vgpu resources"
            order = self.card_order(position) if ordered and self.card_order else None
            fitted = vgpu.fit(devices.cards, request, self.holder(task), options.policy, order)
            if isinstance(fitted, str):
                return fitted
            assignment = fitted
        return Plan(tuple(share_ids), assignment)

    def take(self, task: TaskInfo, request: DeviceRequest, position: int, plan: Plan) -> None:
        """Record that the task holds ``plan`` on the node at ``position``."""
        if task.uid in self.held:
            self.release(task.uid)
        devices = self.devices[position]
        if devices is None:
            return
        holder = self.holder(task)
        gpushare.apply_share(devices.share, list(plan.share_ids), request, task.uid, +1)
        by_uuid = {card.uuid: card for card in devices.cards}
        kept: list[tuple[vgpu.Grant, ...]] = []
        for grants in plan.assignment:
            kept_grants = []
            for grant in grants:
                card = by_uuid.get(grant.uuid)
                if card is not None and vgpu.apply(card, grant, holder, +1):
                    kept_grants.append(grant)
                elif card is not None:
                    log.warning(
                        "pod %s holds MIG instance %s, which card %s cannot hold with its "
                        "other instances; not counted",
                        task.key,
                        grant.device_id,
                        grant.uuid,
                    )
            kept.append(tuple(kept_grants))
        self.held[task.uid] = Held(position, request, holder, Plan(plan.share_ids, tuple(kept)))
        self._refresh(position)

    def release(self, uid: str) -> None:
        held = self.held.pop(uid, None)
        if held is None:
            return
        devices = self.devices[held.position]
        if devices is None:
            return
        gpushare.apply_share(devices.share, list(held.plan.share_ids), held.request, uid, -1)
        by_uuid = {card.uuid: card for card in devices.cards}
        for grants in held.plan.assignment:
            for grant in grants:
                card = by_uuid.get(grant.uuid)
                if card is not None:
                    vgpu.apply(card, grant, held.holder, -1)
        self._refresh(held.position)

    def adopt(self, task: TaskInfo, position: int) -> bool:
        """Count what a bound pod holds, read from the device ids written on it; False when
        it is not bound or carries none."""
        pod = task.pod
        if not (pod.get("spec") or {}).get("nodeName"):
            return False
        request = self.request(task)
        if isinstance(request, str) or not self.tracked(request):
            return False
        notes = (pod.get("metadata") or {}).get("annotations") or {}
        try:
            share_ids: Sequence[int] = ()
            index = notes.get(k.GPU_INDEX_KEY)
            if request.wants_share and isinstance(index, str) and index:
                share_ids = gpushare.parse_index(index)
            assignment: vgpu.Assignment = ()
            ids = notes.get(k.VGPU_IDS_NEW_KEY)
            if request.wants_vgpu and isinstance(ids, str) and ids:
                assignment = vgpu.decode(ids)
        except DeviceError as err:
            log.warning("pod %s: device ids not counted: %s", task.key, err)
            return False
        if not share_ids and not assignment:
            return False
        self.take(task, request, position, Plan(tuple(share_ids), assignment))
        return True

    def whole_gpu_type_ok(self, request: DeviceRequest) -> np.ndarray:
        """Nodes whose ``nvidia.com/gpu.product`` label passes the type filters (for pods
        that ask for whole ``nvidia.com/gpu``, which stay a plain resource)."""
        return np.array(
            [
                type_allowed(info.labels.get(GPU_PRODUCT_LABEL, ""), request)
                if info.labels.get(GPU_PRODUCT_LABEL) or request.use_types
                else True
                for info in self.table.nodes
            ],
            dtype=bool,
        )

"""HAMi's vGPU model: cards a node registers, how a container's vGPUs are placed on them, and
the text that carries an assignment on the pod.

A node's device plugin registers its cards in the node annotation
``volcano.sh/node-vgpu-register``, a JSON list of ``{id, index, count, devmem, devcore, type,
numa, mode, health}``: ``count`` pods at most share a card, ``devmem`` MiB and ``devcore`` %
of SMs are shared out. An assignment is written per app container as ``id,type,memory,cores:``
per vGPU, containers joined by ``;``; a MIG instance's id is ``<uuid>[<group>-<position>]``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from stromboli.core.scheduler.util.devices.mig import MigState, ModelGeometries, groups_for
from stromboli.core.scheduler.util.devices.request import (
    MAX_AMOUNT,
    DeviceError,
    DeviceRequest,
    VgpuAsk,
    type_allowed,
    uuid_allowed,
)

log = logging.getLogger(__name__)

HAMI_CORE = "hami-core"
MIG = "mig"
MPS = "mps"
#: Most cards read from one registration, and the longest annotation parsed.
MAX_CARDS = 128
MAX_TEXT = 64 * 1024
BINPACK = "binpack"
SPREAD = "spread"


@dataclass(frozen=True, slots=True)
class Grant:
    """One vGPU of a container: the card (and MIG instance), memory and cores given."""

    uuid: str
    type: str
    memory: int
    cores: int
    mig_group: str = ""
    mig_position: int = -1

    @property
    def device_id(self) -> str:
        if self.mig_position < 0:
            return self.uuid
        return f"{self.uuid}[{self.mig_group}-{self.mig_position}]"


#: Per app container, the vGPUs it was given.
Assignment = tuple[tuple[Grant, ...], ...]


@dataclass(slots=True)
class Card:
    """One registered GPU and what is given out of it."""

    uuid: str
    index: int
    type: str
    memory: int
    cores: int
    split: int
    numa: int = 0
    mode: str = HAMI_CORE
    healthy: bool = True
    used_count: int = 0
    used_memory: int = 0
    used_cores: int = 0
    #: Pods holding a share, by task uid → their job id, exclusivity rules and vGPU count.
    holders: dict[str, tuple[str, frozenset[int], int]] = field(default_factory=dict)
    mig: MigState | None = None

    @property
    def share(self) -> float:
        """How full the card is, by memory (0 to 1)."""
        return self.used_memory / self.memory if self.memory else 1.0


def cards_from_register(text: str, known: tuple[ModelGeometries, ...]) -> list[Card]:
    """The cards of a ``volcano.sh/node-vgpu-register`` value; a malformed one is a
    :class:`DeviceError` saying what is wrong."""
    if len(text) > MAX_TEXT:
        raise DeviceError(f"registration is {len(text)} characters, more than {MAX_TEXT}")
    try:
        entries = orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise DeviceError(f"registration is not JSON: {err}") from None
    if not isinstance(entries, list):
        raise DeviceError("registration is not a JSON list of devices")
    if len(entries) > MAX_CARDS:
        raise DeviceError(f"registration lists {len(entries)} devices, more than {MAX_CARDS}")
    cards: list[Card] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            raise DeviceError(f"device [{i}] has no string id")

        def number(key: str, default: int, i: int = i, entry: dict = entry) -> int:
            value = entry.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int):
                raise DeviceError(f"device [{i}].{key} is {value!r}, not an integer")
            if not 0 <= value <= MAX_AMOUNT:
                raise DeviceError(f"device [{i}].{key} is {value}, outside 0..{MAX_AMOUNT}")
            return value

        uuid = entry["id"]
        if uuid in seen:
            raise DeviceError(f"device id {uuid!r} is registered twice")
        seen.add(uuid)
        mode = str(entry.get("mode") or HAMI_CORE)
        card = Card(
            uuid=uuid,
            index=number("index", i),
            type=str(entry.get("type") or ""),
            memory=number("devmem", 0),
            cores=number("devcore", 100),
            split=number("count", 10),
            numa=number("numa", 0),
            mode=mode,
            healthy=entry.get("health", True) is not False,
        )
        if mode == MIG:
            card.mig = MigState(groups_for(card.type, known))
        cards.append(card)
    return cards


def encode(assignment: Assignment) -> str:
    return ";".join(
        "".join(f"{g.device_id},{g.type},{g.memory},{g.cores}:" for g in grants)
        for grants in assignment
    )


def decode(text: str) -> Assignment:
    """The assignment in a ``volcano.sh/vgpu-ids-new`` value; :class:`DeviceError` when it
    cannot be read."""
    if len(text) > MAX_TEXT:
        raise DeviceError(f"assignment is {len(text)} characters, more than {MAX_TEXT}")
    containers: list[tuple[Grant, ...]] = []
    for part in text.split(";"):
        grants: list[Grant] = []
        for item in part.split(":"):
            if not item.strip():
                continue
            fields = item.split(",")
            if len(fields) != 4:
                raise DeviceError(f"device {item!r} is not id,type,memory,cores")
            device, kind, memory, cores = (f.strip() for f in fields)
            if not (memory.isascii() and memory.isdigit() and cores.isascii() and cores.isdigit()):
                raise DeviceError(f"device {item!r}: memory and cores must be whole numbers")
            if len(memory) > 15 or len(cores) > 4:
                raise DeviceError(f"device {item!r}: memory or cores out of range")
            group, position = "", -1
            if device.endswith("]") and "[" in device:
                device, _, instance = device[:-1].partition("[")
                group, _, at = instance.rpartition("-")
                if not (group and at.isascii() and at.isdigit() and len(at) < 4):
                    raise DeviceError(f"device {item!r}: MIG instance is not [<group>-<position>]")
                position = int(at)
            grants.append(Grant(device, kind, int(memory), int(cores), group, position))
        containers.append(tuple(grants))
    return tuple(containers)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who asks: the task, its job, and the exclusivity rules its labels match."""

    uid: str
    job: str
    rules: frozenset[int] = frozenset()


def _usable(card: Card, request: DeviceRequest, holder: Holder) -> bool:
    if not card.healthy or (request.mode and request.mode != card.mode):
        return False
    if not type_allowed(card.type, request) or not uuid_allowed(card.uuid, request):
        return False
    if holder.uid in card.holders:
        return True  # another container of the same pod: its own share does not exclude it
    if card.used_count >= card.split:
        return False
    for job, rules, _ in card.holders.values():
        if request.spread_podgroup and job == holder.job:
            return False
        if holder.rules & rules:
            return False
    return True


def _memory_of(ask: VgpuAsk, card: Card) -> int:
    return ask.memory if ask.memory else card.memory * ask.percentage // 100


def _grant(card: Card, ask: VgpuAsk) -> Grant | None:
    """What ``card`` would give one vGPU of ``ask`` now, or None."""
    memory = _memory_of(ask, card)
    if card.mig is not None:
        chosen = card.mig.choose(memory)
        if chosen is None:
            return None
        group, position, size = chosen
        return Grant(card.uuid, card.type, size, ask.cores, group, position)
    if card.memory - card.used_memory < memory:
        return None
    if card.cores - card.used_cores < ask.cores or (card.used_cores >= card.cores and card.cores):
        return None
    if ask.cores >= 100 and card.used_count:
        return None  # all of a card's SMs: only on an idle card
    return Grant(card.uuid, card.type, memory, ask.cores)


def _order(cards: list[Card], policy: str) -> list[Card]:
    if policy == SPREAD:
        return sorted(cards, key=lambda c: (c.used_count, c.share, c.index))
    return sorted(cards, key=lambda c: (-c.used_count, -c.share, c.index))


#: Orders the usable cards for one vGPU of ``ask`` (best first), replacing the policy's order.
CardOrder = Callable[[list[Card], VgpuAsk], list[Card]]


def fit(
    cards: list[Card],
    request: DeviceRequest,
    holder: Holder,
    policy: str = BINPACK,
    order: CardOrder | None = None,
) -> Assignment | str:
    """Place every container's vGPUs on ``cards`` (binpack: fullest usable card first;
    spread: emptiest; or ``order``'s choice, such as the ``fragmentation`` plugin's), or say
    why they do not fit. Each vGPU goes on the first card in that order that holds it (a MIG
    card gives its smallest free instance that does): card first, as Volcano chooses, so a
    smaller instance on a later card is not preferred. The cards are left as they were."""
    taken: list[tuple[Card, Grant]] = []
    out: list[tuple[Grant, ...]] = []
    try:
        for ask in request.vgpu:
            if ask is None:
                out.append(())
                continue
            grants: list[Grant] = []
            used: set[str] = set()
            for _ in range(ask.number):
                usable = [c for c in cards if _usable(c, request, holder)]
                chosen = None
                ranked = order(usable, ask) if order is not None else _order(usable, policy)
                for card in ranked:
                    if card.uuid in used and card.mig is None:
                        continue  # a container's vGPUs sit on distinct cards
                    grant = _grant(card, ask)
                    if grant is not None:
                        chosen = (card, grant)
                        break
                if chosen is None:
                    return why_not(cards, request, holder, ask, used)
                apply(chosen[0], chosen[1], holder, +1)
                taken.append(chosen)
                used.add(chosen[0].uuid)
                grants.append(chosen[1])
            out.append(tuple(grants))
        return tuple(out)
    finally:
        for card, grant in reversed(taken):
            apply(card, grant, holder, -1)


#: Volcano's reason for a node whose vGPUs do not hold a pod; the details after it say which
#: part of the request no card meets (``stromboli explain`` shows them per node).
NO_VGPU = "no enough vgpu resources"
WRONG_TYPE = f"{NO_VGPU}: no card of the requested gpu type or uuid"
WRONG_MODE = f"{NO_VGPU}: no card in the requested vgpu-mode"
CARDS_IN_USE = f"{NO_VGPU}: every allowed card is shared by as many pods as it may be"
NO_MIG_INSTANCE = f"{NO_VGPU}: no MIG geometry of the card has a free instance that large"
NO_MEMORY = f"{NO_VGPU}: no card with enough free memory"
NO_CORES = f"{NO_VGPU}: no card with enough free cores"


def why_not(
    cards: list[Card], request: DeviceRequest, holder: Holder, ask: VgpuAsk, used: set[str]
) -> str:
    """Why no card gives one more vGPU of ``ask`` (``used``: cards this container already
    has one on): the first unmet part, checked as a user reads the request."""
    healthy = [c for c in cards if c.healthy]
    typed = [c for c in healthy if type_allowed(c.type, request) and uuid_allowed(c.uuid, request)]
    if not typed:
        return WRONG_TYPE if healthy else NO_VGPU
    moded = [c for c in typed if not request.mode or request.mode == c.mode]
    if not moded:
        return WRONG_MODE
    usable = [c for c in moded if _usable(c, request, holder) and (c.uuid not in used or c.mig)]
    if not usable:
        return CARDS_IN_USE if len(moded) > len(used) else NO_VGPU
    if all(c.mig is not None for c in usable):
        return NO_MIG_INSTANCE
    plain = [c for c in usable if c.mig is None]
    if not any(c.memory - c.used_memory >= _memory_of(ask, c) for c in plain):
        return NO_MEMORY
    return NO_CORES


def apply(card: Card, grant: Grant, holder: Holder, sign: int) -> bool:
    """Add (``sign`` +1) or remove (-1) one vGPU on ``card``; False when an added MIG instance
    cannot be taken (another group or position in use), in which case nothing changed."""
    if card.mig is not None and grant.mig_position >= 0:
        if sign > 0:
            if card.mig.take(grant.mig_group, grant.mig_position) < 0:
                return False
        else:
            card.mig.give_back(grant.mig_group, grant.mig_position)
    job, rules, held = card.holders.get(holder.uid, (holder.job, holder.rules, 0))
    held += sign
    if held > 0:
        if holder.uid not in card.holders:
            card.used_count += 1
        card.holders[holder.uid] = (job, rules, held)
    elif card.holders.pop(holder.uid, None) is not None:
        card.used_count -= 1
    card.used_memory += sign * grant.memory
    if card.mig is None:
        card.used_cores += sign * grant.cores
    return True

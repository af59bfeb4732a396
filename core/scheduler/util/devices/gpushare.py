"""Volcano's legacy GPU share: a node's ``volcano.sh/gpu-number`` cards split its
``volcano.sh/gpu-memory`` evenly; a pod takes part of one card's memory (``gpu-memory``) or
whole idle cards (``gpu-number``), and the card ids are written in ``volcano.sh/gpu-index``.

Cards listed in the node annotation ``volcano.sh/gpu-unhealthy-ids`` are never given out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.util.devices.request import DeviceError, DeviceRequest

#: Most cards one node is read with.
MAX_SHARE_CARDS = 128


@dataclass(slots=True)
class ShareCard:
    id: int
    memory: int
    healthy: bool = True
    used_memory: int = 0
    #: Task uid → memory it holds on this card.
    holders: dict[str, int] = field(default_factory=dict)

    @property
    def idle(self) -> int:
        return self.memory - self.used_memory


def share_cards(number: float, memory: float, unhealthy: str | None) -> list[ShareCard]:
    """The cards of a node with ``number`` cards and ``memory`` MiB in all."""
    count = int(min(max(number, 0), MAX_SHARE_CARDS))
    if not count:
        return []
    bad = set()
    for word in (unhealthy or "").split(","):
        word = word.strip()
        if word.isascii() and word.isdigit() and len(word) < 5:
            bad.add(int(word))
    each = int(memory) // count
    return [ShareCard(i, each, i not in bad) for i in range(count)]


def parse_index(text: str) -> list[int]:
    """The card ids of a ``volcano.sh/gpu-index`` value."""
    ids: list[int] = []
    for word in text.split(","):
        word = word.strip()
        if not (word.isascii() and word.isdigit() and len(word) < 5):
            raise DeviceError(f"gpu-index {text[:80]!r}: {word[:20]!r} is not a card id")
        ids.append(int(word))
    return ids


def fit_share(cards: list[ShareCard], request: DeviceRequest, spread: bool) -> list[int] | str:
    """Card ids for the pod, or why none fit: ``gpu-number`` needs that many wholly idle
    healthy cards; ``gpu-memory`` one healthy card with that much idle memory (binpack: the
    least idle that holds it; spread: the most idle)."""
    healthy = [c for c in cards if c.healthy]
    if request.gpu_number:
        free = [c.id for c in healthy if not c.used_memory and c.memory]
        if len(free) < request.gpu_number:
            return "no enough gpu number"
        return free[: request.gpu_number]
    holding = [c for c in healthy if c.idle >= request.gpu_memory]
    if not holding:
        return "no enough gpu memory"
    key = (lambda c: (-c.idle, c.id)) if spread else (lambda c: (c.idle, c.id))
    return [min(holding, key=key).id]


def apply_share(
    cards: list[ShareCard], ids: list[int], request: DeviceRequest, uid: str, sign: int
) -> None:
    """Add (+1) or remove (-1) a pod's use of cards ``ids`` (unknown ids are skipped)."""
    by_id = {c.id: c for c in cards}
    for card_id in ids:
        card = by_id.get(card_id)
        if card is None:
            continue
        if sign > 0:
            amount = card.memory if request.gpu_number else request.gpu_memory
            card.holders[uid] = card.holders.get(uid, 0) + amount
            card.used_memory += amount
        else:
            card.used_memory -= card.holders.pop(uid, 0)

"""GPU fragmentation of a node for the workload expected to come, in the spirit of FGD
(Weng et al., *Beware of Fragmentation*, USENIX ATC 2023).

A node's free GPU capacity is a *fragment* for a pod shape when that shape cannot use it: all
of it when the shape does not fit on the node at all (too little cpu or memory, too few cards
that hold it, no card of an allowed model) or asks for no GPU, otherwise the free part of every
card too small (or of a model not allowed) for one of its GPUs. A node's fragmentation is the
expected fragment over the *mix* of shapes — the shapes seen so far, each weighted, as in FGD's
target workload, by how often it was seen, or by the GPU demand it brought (how often × the GPUs
it asks for). Placing a pod changes the fragmentation of one node; the placement
that increases it least keeps the most GPU capacity usable by the pods likely to come.

Amounts are in thousandths of a card (``milli``), so sums stay exact: a card's free part is the
smaller of its free memory and free cores, in milli; a shape's need on a card is the larger of
its memory and cores asks, in milli of that card (whole cards need 1000). A shape without GPUs
adds the same to every placement (all free capacity) but the pod's own use: it steers nothing
by itself, as in the paper's artifact, where counting the cpu it might lack instead made shared
GPUs strand (openb gpushare100: 85.0% allocated against 86.8%).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

#: A need no card meets (a card of a model the shape may not use).
NEVER = np.int32(1 << 30)
FULL = 1000


@dataclass(frozen=True, slots=True)
class PodShape:
    """What fragmentation depends on in a pod: cpu (millicores) and memory (bytes) it asks
    for, how many cards, and what it asks of each card."""

    cpu: float
    memory: float
    #: Cards it needs (0: none).
    gpus: int = 0
    #: Per card: memory in MiB (0: by percentage), memory percentage, cores percentage.
    gpu_memory: int = 0
    gpu_percentage: int = 0
    gpu_cores: int = 0
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()

    def need(self, card_memory: np.ndarray, card_types: np.ndarray) -> np.ndarray:
        """Milli of each card one GPU of this shape takes (``NEVER`` where it may not use
        the card); cards of memory 0 are absent."""
        absent = card_memory <= 0
        if not self.gpus:
            return np.where(absent, NEVER, 0).astype(np.int32)
        need = np.full(card_memory.shape, max(self.gpu_percentage, self.gpu_cores) * 10)
        if self.gpu_memory:
            by_memory = -(-self.gpu_memory * FULL // np.maximum(card_memory, 1))
            need = np.maximum(need, by_memory)
        need = np.minimum(need, FULL).astype(np.int32)
        allowed = ~absent
        if self.use_types or self.nouse_types:
            allowed &= _types_allowed(card_types, self.use_types, self.nouse_types)
        return np.where(allowed, np.maximum(need, 1), NEVER).astype(np.int32)

    @property
    def demand(self) -> int:
        """GPU demand of one pod of this shape, in hundredths of a card: its cards × the
        larger of its memory and cores percentages (a whole card where it asks memory in MiB);
        a pod without GPUs counts as one card, so that it is not weighed out of the mix."""
        if not self.gpus:
            return 100
        share = max(self.gpu_percentage, self.gpu_cores)
        return self.gpus * (min(share, 100) if share > 0 else 100)


def _types_allowed(
    card_types: np.ndarray, use: tuple[str, ...], nouse: tuple[str, ...]
) -> np.ndarray:
    """HAMi's type filter over an array of card types (substring, without case)."""
    flat = [str(t).lower() for t in card_types.ravel()]
    use_l = [u.lower() for u in use]
    nouse_l = [u.lower() for u in nouse]
    ok = [
        (not use_l or any(u in t for u in use_l)) and not any(u in t for u in nouse_l) for t in flat
    ]
    return np.array(ok, dtype=bool).reshape(card_types.shape)


#: How the mix weighs a shape: by the GPU demand its pods brought, or by their count.
BY_DEMAND = "demand"
BY_COUNT = "count"


class WorkloadMix:
    """The shapes seen so far and how often; the *expected mix* is the ``limit`` most frequent,
    weighted by count (``by`` = ``count``, FGD's popularity) or by the GPU demand they brought
    (``demand``: a shape that cannot use a free card loses allocation in proportion to the GPUs
    its pods ask for, so an 8-GPU pod weighs as eight whole-GPU pods). It is re-derived when
    the count has doubled since (and for the first pods), so scores computed under one mix can
    be kept until it changes (``epoch``)."""

    def __init__(self, limit: int = 32, by: str = BY_COUNT) -> None:
        self.limit = max(1, limit)
        self.by = by
        self.counts: Counter[PodShape] = Counter()
        self.total = 0
        self.epoch = 0
        self._derived_at = 0
        self.shapes: tuple[PodShape, ...] = ()
        self.weights = np.zeros(0)

    def observe(self, shape: PodShape) -> None:
        self.counts[shape] += 1
        self.total += 1
        if self.total >= 2 * self._derived_at or not self.shapes:
            self._derive()

    def _derive(self) -> None:
        common = self.counts.most_common(self.limit)
        self.shapes = tuple(shape for shape, _ in common)
        #: Whole numbers, not shares: expected fragments summed in whole numbers are exact, so
        #: nodes that are alike tie exactly whatever batch they are scored in.
        by_demand = self.by == BY_DEMAND
        self.weights = np.array(
            [count * (shape.demand if by_demand else 1) for shape, count in common], dtype=float
        )
        self._derived_at = self.total
        self.epoch += 1


@dataclass(slots=True)
class MixArrays:
    """The mix laid out for vectorised use over a session's nodes: per shape (rows) its
    weight, cpu, memory, card count and need on every node's cards."""

    weights: np.ndarray
    cpu: np.ndarray
    memory: np.ndarray
    gpus: np.ndarray
    #: (shapes, nodes, cards) milli of each card one GPU of the shape takes.
    need: np.ndarray


def mix_arrays(mix: WorkloadMix, card_memory: np.ndarray, card_types: np.ndarray) -> MixArrays:
    shapes = mix.shapes
    need = (
        np.stack([s.need(card_memory, card_types) for s in shapes])
        if shapes
        else np.zeros((0, *card_memory.shape), dtype=np.int32)
    )
    return MixArrays(
        weights=np.asarray(mix.weights, dtype=float),
        cpu=np.array([s.cpu for s in shapes], dtype=float),
        memory=np.array([s.memory for s in shapes], dtype=float),
        gpus=np.array([s.gpus for s in shapes], dtype=np.int64),
        need=need,
    )


def expected_fragments(
    free: np.ndarray, cpu: np.ndarray, memory: np.ndarray, need: np.ndarray, mix: MixArrays
) -> np.ndarray:
    """Expected fragment (milli of a card) of each row: ``free`` (rows, cards) free milli per
    card, ``cpu``/``memory`` (rows) idle, ``need`` (shapes, rows, cards) the mix's need on
    those rows' cards."""
    if not mix.weights.size:
        return np.zeros(free.shape[0])
    usable = free[None, :, :] >= need
    count = usable.sum(axis=2)
    fits = (
        (cpu[None, :] >= mix.cpu[:, None])
        & (memory[None, :] >= mix.memory[:, None])
        & (count >= mix.gpus[:, None])
        & (mix.gpus[:, None] > 0)
    )
    total = free.sum(axis=1)
    unusable = np.where(usable, 0, free[None, :, :]).sum(axis=2)
    per_shape = np.where(fits, unusable, total[None, :]).astype(float)
    return np.asarray(mix.weights @ per_shape, dtype=float) / float(mix.weights.sum())


def placements(free: np.ndarray, need: np.ndarray, gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """Where one pod can go on each row's cards, and the free milli after each choice.

    Returns (choices, after): ``choices`` (rows, options) the card index taken by option
    (-1: the option does not exist), ``after`` (rows, options, cards). A pod without GPUs has
    one option that takes no card; a pod of one GPU one option per card that holds it; a pod
    of several GPUs one option: the tightest cards that hold it (best fit, then card order).
    """
    rows, cards = free.shape
    if gpus == 0:
        return np.full((rows, 1), -2), free[:, None, :].copy()
    holds = free >= need
    if gpus == 1:
        choices = np.where(holds, np.arange(cards)[None, :], -1)
        after = np.repeat(free[:, None, :], cards, axis=1)
        idx = np.arange(cards)
        after[:, idx, idx] -= np.where(holds, need, 0)
        return choices, after
    leftover = np.where(holds, free - need, NEVER)
    order = np.argsort(leftover, axis=1, kind="stable")[:, :gpus]
    enough = holds.sum(axis=1) >= gpus
    after = free.copy()
    taken = np.take_along_axis(need, order, axis=1)
    rows_idx = np.arange(rows)[:, None]
    after[rows_idx, order] -= np.where(enough[:, None], taken, 0)
    choices = np.where(enough, order[:, 0], -1)[:, None]
    return choices, after[:, None, :]

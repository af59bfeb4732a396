"""Node labels, taints and images of one session as numpy columns.

Filters and scores over thousands of nodes must not loop over nodes in Python per pod. Each
label key a pod refers to becomes, once per session, an integer column (one value number per
node, 0 where the label is missing); a label test is then one table lookup over all nodes.
Nodes with the same taints share a taint signature, so toleration checks run per signature.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from stromboli.core.scheduler.api.node import NodeTable

#: One taint as (key, value, effect).
Taint = tuple[str, str, str]


@dataclass(slots=True)
class LabelColumn:
    """Values of one label key over all nodes.

    ``slots[i]`` is 0 when node ``i`` lacks the label, else the 1-based number of its value in
    ``vocab``; arrays indexed by slot (size ``len(vocab) + 1``) hold per-domain figures.
    """

    slots: np.ndarray
    vocab: dict[str, int]

    @property
    def size(self) -> int:
        """Length of a per-slot array (slot 0 is "no label")."""
        return len(self.vocab) + 1

    def present(self) -> np.ndarray:
        return self.slots > 0

    def mask_in(self, values: tuple[str, ...] | frozenset[str]) -> np.ndarray:
        """Nodes whose value is one of ``values``."""
        table = np.zeros(self.size, dtype=bool)
        for value in values:
            slot = self.vocab.get(value)
            if slot:
                table[slot] = True
        return table[self.slots]

    def spread(self, slots: np.ndarray) -> np.ndarray:
        """Nodes in the same domain as any of ``slots`` (slot 0 ignored)."""
        table = np.zeros(self.size, dtype=bool)
        table[slots] = True
        table[0] = False
        return table[self.slots]


@dataclass(slots=True)
class TaintTable:
    """Distinct taint lists; ``ids[i]`` is node ``i``'s, and id 0 is "no taints"."""

    ids: np.ndarray
    signatures: list[tuple[Taint, ...]]


@dataclass(slots=True)
class ImageState:
    """An image present on some nodes, with kube's "spread" of it."""

    positions: np.ndarray
    size: float


class NodeIndex:
    """Lazily built per-session columns over ``table``'s nodes."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.size = len(table)
        self._columns: dict[str, LabelColumn] = {}
        self._numbers: dict[str, np.ndarray] = {}
        self._unschedulable: np.ndarray | None = None
        self._taints: TaintTable | None = None
        self._images: dict[str, ImageState] | None = None

    def column(self, key: str) -> LabelColumn:
        column = self._columns.get(key)
        if column is None:
            vocab: dict[str, int] = {}
            slots = np.zeros(self.size, dtype=np.int32)
            for i, node in enumerate(self.table.nodes):
                value = node.labels.get(key)
                if value is not None:
                    slot = vocab.get(value)
                    if slot is None:
                        slot = vocab[value] = len(vocab) + 1
                    slots[i] = slot
            column = self._columns[key] = LabelColumn(slots, vocab)
        return column

    def numbers(self, key: str) -> np.ndarray:
        """Label ``key`` read as an integer per node; NaN where missing or not a number."""
        numbers = self._numbers.get(key)
        if numbers is None:
            column = self.column(key)
            by_slot = np.full(column.size, np.nan)
            for value, slot in column.vocab.items():
                with contextlib.suppress(ValueError):
                    by_slot[slot] = int(value)
            numbers = self._numbers[key] = by_slot[column.slots]
        return numbers

    def names(self, names: frozenset[str]) -> np.ndarray:
        """Nodes named in ``names``."""
        mask = np.zeros(self.size, dtype=bool)
        position = self.table.position
        for name in names:
            i = position.get(name)
            if i is not None:
                mask[i] = True
        return mask

    @property
    def unschedulable(self) -> np.ndarray:
        if self._unschedulable is None:
            self._unschedulable = np.fromiter(
                (node.unschedulable for node in self.table.nodes), dtype=bool, count=self.size
            )
        return self._unschedulable

    @property
    def taints(self) -> TaintTable:
        if self._taints is None:
            known: dict[tuple[Taint, ...], int] = {(): 0}
            ids = np.zeros(self.size, dtype=np.int32)
            for i, node in enumerate(self.table.nodes):
                if node.taints:
                    signature = tuple(
                        (t.get("key") or "", t.get("value") or "", t.get("effect") or "")
                        for t in node.taints
                    )
                    ids[i] = known.setdefault(signature, len(known))
            self._taints = TaintTable(ids, list(known))
        return self._taints

    @property
    def images(self) -> dict[str, ImageState]:
        """Images reported in node status, by every name they are known under."""
        if self._images is None:
            found: dict[str, tuple[list[int], float]] = {}
            for i, node in enumerate(self.table.nodes):
                for image in (node.node.get("status") or {}).get("images") or ():
                    size = float(image.get("sizeBytes") or 0)
                    for name in image.get("names") or ():
                        entry = found.setdefault(name, ([], size))
                        entry[0].append(i)
            self._images = {
                name: ImageState(np.array(positions, dtype=np.int64), size)
                for name, (positions, size) in found.items()
            }
        return self._images

"""Node labels, taints and images as numpy columns, kept while the nodes stay the same.

Filters and scores over thousands of nodes must not loop over nodes in Python per pod. Each
label key a pod refers to becomes an integer column (one value number per node, 0 where the
label is missing); a label test is then one table lookup over all nodes. Nodes with the same
taints share a taint signature, so toleration checks run per signature.

Node facts that matter here (names, labels, taints, cordons, images) rarely change between
cycles, so the index, with everything memoised on it such as per-shape masks, is reused by the
next session while they stay the same. The scheduler cache hands every session the same label
dicts and node objects until a node changes, so the check is an identity test per node; a node
whose object changed (a status heartbeat, say) is compared field by field, and only a real
change of those facts rebuilds the index.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from operator import attrgetter, is_
from typing import TypeVar, cast

import numpy as np

from stromboli.core.scheduler.api.node import NodeTable

T = TypeVar("T")
#: Most memoised entries (per-shape masks and the like) one index keeps.
MEMO_LIMIT = 4096
_FACTS = (attrgetter("labels"), attrgetter("taints"), attrgetter("node"))

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
    """Lazily built columns over ``table``'s nodes; obtain with :func:`node_index`."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.size = len(table)
        #: The node objects the index was built from (labels, taints, raw node), to recognise
        #: an unchanged cluster; refreshed when an equal node arrives as a new object.
        self.facts = [list(map(get, table.nodes)) for get in _FACTS]
        self.node_names = [node.name for node in table.nodes]
        self.cordoned = [node.unschedulable for node in table.nodes]
        self._memo: dict[Hashable, object] = {}
        self._columns: dict[str, LabelColumn] = {}
        self._numbers: dict[str, np.ndarray] = {}
        self._unschedulable: np.ndarray | None = None
        self._taints: TaintTable | None = None
        self._images: dict[str, ImageState] | None = None

    def describes(self, table: NodeTable) -> bool:
        """Whether ``table``'s nodes have the facts this index was built from."""
        nodes = table.nodes
        if len(nodes) != self.size or [n.unschedulable for n in nodes] != self.cordoned:
            return False
        if all(
            all(map(is_, map(get, nodes), facts))
            for get, facts in zip(_FACTS, self.facts, strict=True)
        ):
            return True
        labels, taints, raws = self.facts
        for i, node in enumerate(nodes):
            if node.labels is labels[i] and node.taints is taints[i] and node.node is raws[i]:
                continue
            if (
                node.name != self.node_names[i]
                or node.labels != labels[i]
                or node.taints != taints[i]
                or _images(node.node) != _images(raws[i])
            ):
                return False
            labels[i], taints[i], raws[i] = node.labels, node.taints, node.node
        return True

    def memo(self, key: Hashable, build: Callable[[], T]) -> T:
        """A value derived from node facts only (and ``key``), built once per index."""
        value = self._memo.get(key)
        if value is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            value = self._memo[key] = build()
        return cast(T, value)  # what build() made for this key

    def column(self, key: str) -> LabelColumn:
        column = self._columns.get(key)
        if column is None:
            vocab: dict[str, int] = {}
            numbered = [
                0 if (value := labels.get(key)) is None else vocab.setdefault(value, len(vocab) + 1)
                for labels in self.facts[0]
            ]
            slots = np.array(numbered, dtype=np.int32)
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
            self._unschedulable = np.array(self.cordoned, dtype=bool)
        return self._unschedulable

    @property
    def taints(self) -> TaintTable:
        if self._taints is None:
            known: dict[tuple[Taint, ...], int] = {(): 0}
            ids = np.zeros(self.size, dtype=np.int32)
            for i, node_taints in enumerate(self.facts[1]):
                if node_taints:
                    signature = tuple(
                        (t.get("key") or "", t.get("value") or "", t.get("effect") or "")
                        for t in node_taints
                    )
                    ids[i] = known.setdefault(signature, len(known))
            self._taints = TaintTable(ids, list(known))
        return self._taints

    @property
    def images(self) -> dict[str, ImageState]:
        """Images reported in node status, by every name they are known under."""
        if self._images is None:
            found: dict[str, tuple[list[int], float]] = {}
            for i, raw in enumerate(self.facts[2]):
                for image in _images(raw):
                    size = float(image.get("sizeBytes") or 0)
                    for name in image.get("names") or ():
                        entry = found.setdefault(name, ([], size))
                        entry[0].append(i)
            self._images = {
                name: ImageState(np.array(positions, dtype=np.int64), size)
                for name, (positions, size) in found.items()
            }
        return self._images


def _images(node: dict) -> list[dict]:
    return (node.get("status") or {}).get("images") or []


_last: NodeIndex | None = None


def node_index(table: NodeTable) -> NodeIndex:
    """The index of ``table``'s nodes: the previous session's when no node changed."""
    global _last
    index = _last
    if index is None or not index.describes(table):
        index = _last = NodeIndex(table)
    else:
        index.table = table
    return index

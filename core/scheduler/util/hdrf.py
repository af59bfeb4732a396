"""Hierarchical dominant resource fairness: the queue tree of ``drf`` with ``enableHierarchy``.

Queues name their place in a tree with two annotations, ``volcano.sh/hierarchy`` (a path such
as ``root/eng/dev``) and ``volcano.sh/hierarchy-weights`` (one weight per level, ``1/2/8``).
Jobs hang under their queue's node. A node's share is built from its children as in the hDRF
paper: the children that still want more (not *saturated*) are scaled to the smallest dominant
share among them, saturated children count with what they hold, and the node's share is the
dominant share of that sum. So a department is as rich as its poorest busy team times the number
of busy teams, and a team whose demand is already met does not make its department look richer
than what it actually holds. Queues are ordered by walking both paths from the root and
comparing the first differing level by share divided by weight, demanding nodes before
saturated ones.

The tree is updated along one path when a job's allocation changes; it is recomputed whole only
when a resource becomes fully used in the cluster or stops being so, since that changes which
jobs count as saturated everywhere.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.resource import EPSILON, PODS, Resource
from stromboli.core.scheduler.util.share import dominant_share

log = logging.getLogger(__name__)

ROOT = k.ROOT_QUEUE


class HierarchyError(ValueError):
    """Queue hierarchy annotations that cannot be read; the message names queue and field."""


@dataclass(frozen=True, slots=True)
class QueuePath:
    """Where a queue sits below the root: node names and their weights, root excluded."""

    names: tuple[str, ...]
    weights: tuple[float, ...]

    def __str__(self) -> str:
        return "/".join((ROOT, *self.names))


def _weight(queue: str, text: str, weights: str) -> float:
    field_name = f"metadata.annotations[{k.HIERARCHY_WEIGHTS_KEY}]"
    try:
        value = float(text)
    except ValueError:
        raise HierarchyError(
            f"queue {queue}: {field_name}: {text!r} in {weights!r} is not a number"
        ) from None
    if not math.isfinite(value) or value <= 0:
        raise HierarchyError(
            f"queue {queue}: {field_name}: {text!r} in {weights!r} must be a number above 0"
        )
    # Volcano counts a weight below 1 as 1.
    return max(value, 1.0)


def parse_hierarchy(queue: str, annotations: Mapping[str, str]) -> QueuePath:
    """The place of ``queue`` in the tree from its annotations.

    A queue without either annotation sits right under the root, named after itself, with
    weight 1. A path that does not start at ``root`` is taken as below it (the admission
    webhook writes the ``root/`` prefix on create). The root's own weight means nothing.
    """
    hierarchy = annotations.get(k.HIERARCHY_KEY) or ""
    weights = annotations.get(k.HIERARCHY_WEIGHTS_KEY) or ""
    if not hierarchy and not weights:
        return QueuePath((queue,), (1.0,))
    where = f"queue {queue}: metadata.annotations"
    if not hierarchy or not weights:
        given, missing = (
            (k.HIERARCHY_KEY, k.HIERARCHY_WEIGHTS_KEY)
            if hierarchy
            else (k.HIERARCHY_WEIGHTS_KEY, k.HIERARCHY_KEY)
        )
        raise HierarchyError(f"{where}: {given} is set but {missing} is not; set both or neither")
    names = hierarchy.split("/")
    levels = weights.split("/")
    if len(names) != len(levels):
        raise HierarchyError(
            f"{where}: {k.HIERARCHY_KEY} {hierarchy!r} has {len(names)} levels but "
            f"{k.HIERARCHY_WEIGHTS_KEY} {weights!r} has {len(levels)}"
        )
    if any(not name for name in names):
        raise HierarchyError(f"{where}: {k.HIERARCHY_KEY} {hierarchy!r} has an empty level")
    values = tuple(_weight(queue, text, weights) for text in levels)
    if names[0] == ROOT:
        return QueuePath(tuple(names[1:]), values[1:])
    return QueuePath(tuple(names), values)


@dataclass(slots=True, eq=False)
class HNode:
    """A node of the tree: an inner node (a level of some queue's path) or a job's leaf."""

    name: str
    weight: float = 1.0
    parent: HNode | None = None
    children: dict[str, HNode] | None = field(default_factory=dict)
    #: For a leaf, the job's allocation; for an inner node, its children's scaled sum.
    allocated: Resource = field(default_factory=Resource)
    #: A leaf's whole request (every task); unused on inner nodes.
    request: Resource = field(default_factory=Resource)
    share: float = 0.0
    saturated: bool = False

    @property
    def is_leaf(self) -> bool:
        return self.children is None

    @property
    def weighted_share(self) -> float:
        return self.share / self.weight


#: Stands for a level no job has reached: nothing held, still demanding.
_ABSENT = HNode("", children={})


class HierarchyTree:
    """The hDRF tree of one session, keyed by job uid at the leaves."""

    def __init__(self, total: Resource) -> None:
        self.total = total
        self.root = HNode(ROOT)
        self.leaves: dict[str, HNode] = {}
        self.total_allocated = Resource()
        self.full: frozenset[str] = frozenset()

    # -- building ---------------------------------------------------------------------------

    def add_job(self, uid: str, path: QueuePath, allocated: Resource, request: Resource) -> None:
        """Hang a job under its queue's node, creating the levels on the way.

        A level's weight comes from the first queue that names it; a later queue that gives
        the same level another weight is logged and overruled.
        """
        node = self.root
        for name, weight in zip(path.names, path.weights, strict=True):
            assert node.children is not None
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = HNode(name, weight, node)
            elif child.weight != weight:
                log.warning(
                    "drf: hierarchy level %s already has weight %g; ignoring weight %g",
                    "/".join(_path_of(child)),
                    child.weight,
                    weight,
                )
            node = child
        assert node.children is not None
        leaf = HNode(
            uid, 1.0, node, children=None, allocated=allocated.clone(), request=request.clone()
        )
        node.children[uid] = leaf
        self.leaves[uid] = leaf
        self.total_allocated.add(allocated)

    def refresh(self) -> None:
        """Recompute saturation and shares of every node, bottom up."""
        self.full = self._full_resources()
        self._refresh_subtree(self.root)

    # -- changes ----------------------------------------------------------------------------

    def set_allocated(self, uid: str, allocated: Resource) -> None:
        """A job's allocation changed: update its path to the root (or everything, when the
        set of fully used resources changed with it)."""
        leaf = self.leaves[uid]
        self.total_allocated.sub(leaf.allocated).add(allocated)
        leaf.allocated = allocated.clone()
        full = self._full_resources()
        if full != self.full:
            self.full = full
            self._refresh_subtree(self.root)
            return
        node: HNode | None = leaf
        while node is not None:
            self._refresh_node(node)
            node = node.parent

    # -- order ------------------------------------------------------------------------------

    def compare(self, left: QueuePath, right: QueuePath) -> float:
        """Negative when ``left``'s queue goes first, positive when ``right``'s does.

        Both paths are walked from the root; at the first level where the two nodes differ, a
        demanding node goes before a saturated one, then the smaller share per weight first.
        """
        lnode = rnode = self.root
        for lname, rname in zip(left.names, right.names, strict=False):
            lnode = self._child(lnode, lname)
            rnode = self._child(rnode, rname)
            if lnode.saturated != rnode.saturated:
                return 1.0 if lnode.saturated else -1.0
            diff = lnode.weighted_share - rnode.weighted_share
            if diff:
                return diff
        return 0.0

    def node(self, path: QueuePath) -> HNode | None:
        """The node of a queue path, or None when no job has reached it."""
        node = self.root
        for name in path.names:
            found = self._child(node, name)
            if found is _ABSENT:
                return None
            node = found
        return node

    # -- arithmetic -------------------------------------------------------------------------

    @staticmethod
    def _child(node: HNode, name: str) -> HNode:
        if node.children is None:
            return _ABSENT
        return node.children.get(name, _ABSENT)

    def _full_resources(self) -> frozenset[str]:
        """Cluster resources with nothing left to hand out."""
        return frozenset(
            name
            for name, capacity in self.total.amounts.items()
            if name != PODS and self.total_allocated.get(name) >= capacity - EPSILON
        )

    def _refresh_subtree(self, node: HNode) -> None:
        if node.children:
            for child in node.children.values():
                self._refresh_subtree(child)
        self._refresh_node(node)

    def _refresh_node(self, node: HNode) -> None:
        if node.children is None:
            node.share = dominant_share(node.allocated, self.total)
            node.saturated = self._leaf_saturated(node)
            return
        holding = [c for c in node.children.values() if c.share > 0]
        smallest = min([1.0, *(c.share for c in holding if not c.saturated)])
        # Plain dict arithmetic: this runs for every level above a job at each allocation.
        amounts: dict[str, float] = {}
        for child in holding:
            ratio = 1.0 if child.saturated else smallest / child.share
            for name, value in child.allocated.amounts.items():
                amounts[name] = amounts.get(name, 0.0) + value * ratio
        node.allocated = Resource(amounts)
        node.share = dominant_share(node.allocated, self.total)
        node.saturated = all(c.saturated for c in node.children.values())

    def _leaf_saturated(self, leaf: HNode) -> bool:
        """A job wants no more: it holds all it asks for of some resource, or it holds and asks
        for a resource the cluster has none left of."""
        for name, held in leaf.allocated.amounts.items():
            if name == PODS or held < EPSILON:
                continue
            wanted = leaf.request.get(name)
            if wanted < EPSILON:
                continue
            if held >= wanted - EPSILON or name in self.full:
                return True
        return False

    def walk(self) -> Iterator[HNode]:
        """Every node, parents before children."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            if node.children:
                stack.extend(node.children.values())


def _path_of(node: HNode) -> list[str]:
    names: list[str] = []
    current: HNode | None = node
    while current is not None:
        names.append(current.name)
        current = current.parent
    return names[::-1]

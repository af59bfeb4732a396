"""The HyperNode tree of a session, and where a job's network topology lets it go.

HyperNodes (``topology.volcano.sh/v1alpha1``) group nodes by network tier: a tier-1 HyperNode
is a rack of nodes, a tier-2 one a spine over racks, and so on (lower tier, more bandwidth).
Members are nodes or HyperNodes, chosen by ``exactMatch``, ``regexMatch`` or (nodes only)
``labelMatch``. As in Volcano, a virtual root ``<cluster-top-hypernode>`` one tier above the
highest holds every parentless HyperNode and every node, so a job always has a domain.

The tree is rebuilt from stored objects, which admission checked but which may still be wrong
(written around the webhook, or members that match nothing), so building never loops and never
fails: a HyperNode member whose tier is not below its parent's is not an edge (that rule alone
rules out cycles), a HyperNode claimed by several parents keeps the lowest-tier one (then the
first by name), and each refusal is kept in :attr:`HyperNodeTree.problems` naming the object and
field. Node sets are computed tier by tier from the lowest, never by recursion.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import regex

from stromboli.core.api import constants as k
from stromboli.core.cluster.selectors import IN, Selector, SelectorError, selector_from_dict
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.status import ALLOCATED_STATUS, TaskStatus
from stromboli.core.scheduler.framework.session import Session

ROOT = k.CLUSTER_TOP_HYPERNODE
#: Longest ``regexMatch`` pattern used: a stored pattern is matched against every node name.
MAX_PATTERN_LENGTH = 1024
#: Time one ``regexMatch`` may take over all the names it is matched against.
MATCH_SECONDS = 0.1
MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"


@dataclass(slots=True, eq=False)
class HyperNodeInfo:
    """One HyperNode as the scheduler sees it: its tier and every node under it."""

    name: str
    tier: int
    tier_name: str = ""
    parent: str = ""
    children: list[str] = field(default_factory=list)
    #: Nodes directly listed as members.
    members: set[str] = field(default_factory=set)
    #: Every node under this HyperNode, through its children too.
    nodes: frozenset[str] = frozenset()


class HyperNodeTree:
    """HyperNodes with parents, children and node sets, plus the virtual root."""

    def __init__(self) -> None:
        self.hypernodes: dict[str, HyperNodeInfo] = {}
        #: Node name → the lowest-tier HyperNode holding it (the root when none does).
        self.leaf_of: dict[str, str] = {}
        #: ``spec.tierName`` → tier.
        self.tier_names: dict[str, int] = {}
        #: What was wrong with stored HyperNodes, one line each, naming object and field.
        self.problems: list[str] = []
        self._masks: dict[tuple[str, int], np.ndarray] = {}
        self._at_tier: dict[int, list[HyperNodeInfo]] = {}
        self._tiers: list[int] | None = None

    @property
    def root(self) -> HyperNodeInfo:
        return self.hypernodes[ROOT]

    @property
    def root_tier(self) -> int:
        return self.root.tier

    def tiers(self) -> list[int]:
        """Every tier in use, lowest first (the root's last); computed once (the tree does not
        change after it is built)."""
        if self._tiers is None:
            self._tiers = sorted({info.tier for info in self.hypernodes.values()})
        return list(self._tiers)

    def at_tier(self, tier: int) -> list[HyperNodeInfo]:
        """HyperNodes of ``tier`` that hold nodes, by name (computed once per tier)."""
        found = self._at_tier.get(tier)
        if found is None:
            found = self._at_tier[tier] = sorted(
                (i for i in self.hypernodes.values() if i.tier == tier and i.nodes),
                key=lambda i: i.name,
            )
        return list(found)

    def ancestors(self, name: str) -> list[HyperNodeInfo]:
        """``name`` and its ancestors up to the root, lowest first (bounded by the tree size)."""
        chain: list[HyperNodeInfo] = []
        current = self.hypernodes.get(name)
        while current is not None and len(chain) <= len(self.hypernodes):
            chain.append(current)
            current = self.hypernodes.get(current.parent) if current.parent else None
        return chain

    def lca(self, nodes: Iterable[str]) -> HyperNodeInfo | None:
        """The lowest HyperNode that holds every one of ``nodes`` (None for no nodes)."""
        wanted = set(nodes)
        if not wanted:
            return None
        first = next(iter(wanted))
        for info in self.ancestors(self.leaf_of.get(first, ROOT)):
            if wanted <= info.nodes:
                return info
        return self.root

    def join(self, hypernode: str, node: str) -> str:
        """The lowest HyperNode holding both ``hypernode``'s nodes and ``node``."""
        for info in self.ancestors(hypernode):
            if node in info.nodes:
                return info.name
        return ROOT

    def mask(self, name: str, positions: Mapping[str, int], count: int) -> np.ndarray:
        """Which rows of a node table (``positions``: node → row) lie under ``name``."""
        key = (name, count)
        cached = self._masks.get(key)
        if cached is None:
            cached = np.zeros(count, dtype=bool)
            rows = [positions[n] for n in self.hypernodes[name].nodes if n in positions]
            cached[rows] = True
            self._masks[key] = cached
        return cached


def _tier(obj: Mapping[str, Any], name: str, problems: list[str]) -> int | None:
    tier = (obj.get("spec") or {}).get("tier")
    if isinstance(tier, bool) or not isinstance(tier, int) or tier < 0:
        problems.append(f"HyperNode {name}: spec.tier {tier!r} is not a whole number >= 0; ignored")
        return None
    return tier


def _pattern(text: Any, where: str, problems: list[str]) -> regex.Pattern[str] | None:
    if not isinstance(text, str) or not text or len(text) > MAX_PATTERN_LENGTH:
        problems.append(f"{where}: pattern must be 1-{MAX_PATTERN_LENGTH} characters; ignored")
        return None
    try:
        return regex.compile(text)
    except regex.error as err:
        problems.append(f"{where}: pattern {text[:80]!r} does not compile ({err}); ignored")
        return None


def _searched(
    pattern: regex.Pattern[str], candidates: Sequence[str], where: str, problems: list[str]
) -> list[str]:
    """The candidates ``pattern`` finds, within :data:`MATCH_SECONDS` for them all: a
    pattern that backtracks without end (``(a|a)+$``) selects nothing rather than stall
    every scheduling cycle."""
    deadline = time.monotonic() + MATCH_SECONDS
    chosen: list[str] = []
    try:
        for candidate in candidates:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if pattern.search(candidate, timeout=left):
                chosen.append(candidate)
    except TimeoutError:
        problems.append(
            f"{where}: pattern {pattern.pattern[:80]!r} took over {MATCH_SECONDS}s; ignored"
        )
        return []
    return chosen


class LabelIndex:
    """Node names by (label key, value), built on first use: a ``labelMatch`` with an equality
    looks only at the nodes carrying that label, not at every node (racks × nodes matches)."""

    def __init__(self, names: Sequence[str], labels: Mapping[str, Mapping[str, str]]) -> None:
        self.names, self.labels = names, labels
        self._by_pair: dict[tuple[str, str], list[str]] | None = None

    def candidates(self, selector: Selector) -> Sequence[str]:
        """Names in order that may match ``selector`` (a superset of those that do)."""
        pairs = [
            (r.key, next(iter(r.values)))
            for r in selector.requirements
            if r.operator == IN and len(r.values) == 1
        ]
        if not pairs:
            return self.names
        if self._by_pair is None:
            self._by_pair = {}
            for name in self.names:
                for pair in (self.labels.get(name) or {}).items():
                    self._by_pair.setdefault(pair, []).append(name)
        return min((self._by_pair.get(pair, []) for pair in pairs), key=len)


def _select(
    selector: Mapping[str, Any],
    candidates: Sequence[str],
    labels: Mapping[str, Mapping[str, str]] | None,
    where: str,
    problems: list[str],
    index: LabelIndex | None = None,
) -> list[str]:
    """Names among ``candidates`` that one member selector picks (Volcano's regex match is a
    search, not anchored)."""
    if "exactMatch" in selector:
        name = (selector.get("exactMatch") or {}).get("name")
        return [name] if isinstance(name, str) and name in candidates else []
    if "regexMatch" in selector:
        pattern = _pattern((selector.get("regexMatch") or {}).get("pattern"), where, problems)
        return [] if pattern is None else _searched(pattern, candidates, where, problems)
    if "labelMatch" in selector:
        if labels is None:
            problems.append(f"{where}: labelMatch selects nodes only; ignored")
            return []
        try:
            chosen = selector_from_dict(selector.get("labelMatch") or {})
        except SelectorError as err:
            problems.append(f"{where}.labelMatch: {err}; ignored")
            return []
        narrowed = candidates if index is None else index.candidates(chosen)
        return [c for c in narrowed if chosen.matches(labels.get(c) or {})]
    problems.append(f"{where}: no exactMatch, regexMatch or labelMatch; ignored")
    return []


def build_tree(
    hypernodes: Mapping[str, Mapping[str, Any]], node_labels: Mapping[str, Mapping[str, str]]
) -> HyperNodeTree:
    """The tree of ``hypernodes`` (name → stored object) over the nodes ``node_labels`` names."""
    tree = HyperNodeTree()
    problems = tree.problems
    node_names = sorted(node_labels)
    index = LabelIndex(node_names, node_labels)
    infos: dict[str, HyperNodeInfo] = {}
    for name in sorted(hypernodes):
        if name == ROOT:
            problems.append(f"HyperNode {name}: the name is the virtual root's; ignored")
            continue
        obj = hypernodes[name]
        tier = _tier(obj, name, problems)
        if tier is None:
            continue
        tier_name = (obj.get("spec") or {}).get("tierName") or ""
        infos[name] = HyperNodeInfo(name, tier, tier_name if isinstance(tier_name, str) else "")
    names = sorted(infos)
    claims: dict[str, list[str]] = {}
    for name, info in infos.items():
        members = (hypernodes[name].get("spec") or {}).get("members") or ()
        for i, member in enumerate(members if isinstance(members, list) else ()):
            where = f"HyperNode {name}: spec.members[{i}]"
            if not isinstance(member, Mapping):
                problems.append(f"{where} is not an object; ignored")
                continue
            selector = member.get("selector") or {}
            kind = member.get("type")
            if kind == MEMBER_NODE:
                info.members.update(
                    _select(selector, node_names, node_labels, where, problems, index)
                )
            elif kind == MEMBER_HYPERNODE:
                for child in _select(selector, names, None, where, problems):
                    if infos[child].tier >= info.tier:
                        problems.append(
                            f"{where}: HyperNode {child} (tier {infos[child].tier}) is not below "
                            f"tier {info.tier}; not a child"
                        )
                        continue
                    claims.setdefault(child, []).append(name)
            else:
                problems.append(f"{where}.type {kind!r} is neither Node nor HyperNode; ignored")
    for child, parents in claims.items():
        parent = min(parents, key=lambda p: (infos[p].tier, p))
        if len(parents) > 1:
            problems.append(
                f"HyperNode {child}: member of {', '.join(sorted(parents))}; kept under {parent}"
            )
        infos[child].parent = parent
        infos[parent].children.append(child)
    # Children have lower tiers than their parents, so one pass from the lowest tier sees
    # every child's node set before its parent's.
    for info in sorted(infos.values(), key=lambda i: i.tier):
        under = set(info.members)
        for child in info.children:
            under |= infos[child].nodes
        info.nodes = frozenset(under)
    top = max((i.tier for i in infos.values()), default=0) + 1
    root = HyperNodeInfo(ROOT, top, nodes=frozenset(node_names))
    for info in infos.values():
        if not info.parent:
            info.parent = ROOT
            root.children.append(info.name)
        if info.tier_name:
            tree.tier_names.setdefault(info.tier_name, info.tier)
    infos[ROOT] = root
    tree.hypernodes = infos
    for info in sorted(infos.values(), key=lambda i: (i.tier, i.name), reverse=True):
        for node in info.nodes:
            tree.leaf_of[node] = info.name
    return tree


_trees: weakref.WeakKeyDictionary[Session, HyperNodeTree] = weakref.WeakKeyDictionary()


def session_tree(ssn: Session) -> HyperNodeTree:
    """The session's tree, built once per session from its snapshot."""
    tree = _trees.get(ssn)
    if tree is None:
        labels = {node.name: node.labels for node in ssn.nodes.nodes}
        tree = _trees[ssn] = build_tree(ssn.snapshot.hypernodes, labels)
    return tree


# -- a job's constraint ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobTopology:
    """A job's ``networkTopology`` resolved against the tree."""

    mode: str
    #: Highest tier the job may span; the root's tier when there is no boundary (soft mode,
    #: an unknown ``highestTierName``, or no tier given).
    highest_tier: int

    @property
    def hard(self) -> bool:
        return self.mode == k.NetworkTopologyMode.HARD


def network_topology(job: JobInfo) -> Mapping[str, Any] | None:
    spec = (job.podgroup.get("spec") or {}).get("networkTopology")
    return spec if isinstance(spec, Mapping) and spec else None


def job_topology(job: JobInfo, tree: HyperNodeTree) -> JobTopology | None:
    """The job's constraint, or None when its PodGroup has no ``networkTopology``.

    Soft mode is hard mode with the root's tier as the boundary (Volcano converts it so in
    session): such a job may use every node but tries the lowest tiers first.
    """
    spec = network_topology(job)
    return None if spec is None else resolve_topology(spec, tree)


def resolve_topology(spec: Mapping[str, Any], tree: HyperNodeTree) -> JobTopology:
    """A ``networkTopology`` (of a PodGroup, or of one of its sub-group policies) against the
    tree."""
    mode = spec.get("mode") or k.NetworkTopologyMode.HARD
    if mode != k.NetworkTopologyMode.HARD:
        return JobTopology(k.NetworkTopologyMode.SOFT, tree.root_tier)
    tier = spec.get("highestTierAllowed")
    name = spec.get("highestTierName")
    if isinstance(tier, int) and not isinstance(tier, bool) and tier >= 0:
        return JobTopology(mode, min(tier, tree.root_tier))
    if isinstance(name, str) and name in tree.tier_names:
        return JobTopology(mode, tree.tier_names[name])
    return JobTopology(mode, tree.root_tier)


_PLACED = ALLOCATED_STATUS | TaskStatus.PIPELINED | TaskStatus.RELEASING


def job_anchor(job: JobInfo, tree: HyperNodeTree) -> str | None:
    """The HyperNode the job is already in: the lowest one holding its placed tasks' nodes
    and the one its PodGroup's ``volcano.sh/job-allocated-hypernode`` annotation names (so a
    restarted pod returns to its job's HyperNode). None for a job placed nowhere yet."""
    nodes = {t.node_name for t in job.tasks_with(_PLACED) if t.node_name}
    annotations = (job.podgroup.get("metadata") or {}).get("annotations") or {}
    recorded = annotations.get(k.JOB_ALLOCATED_HYPERNODE_KEY)
    if isinstance(recorded, str) and recorded in tree.hypernodes:
        for info in tree.ancestors(recorded):
            if nodes <= info.nodes:
                return info.name
    found = tree.lca(nodes)
    return None if found is None else found.name


def record_allocated_hypernode(ssn: Session, job: JobInfo) -> None:
    """Note on the job's PodGroup, as ``volcano.sh/job-allocated-hypernode``, the lowest
    HyperNode holding its placed tasks, so that a pod restarted after its job's others are
    gone (or a scheduler restarted) still returns there. The virtual root is never written:
    it says nothing a job without the annotation would not do."""
    tree = session_tree(ssn)
    nodes = {t.node_name for t in job.tasks_with(_PLACED) if t.node_name}
    found = tree.lca(nodes)
    if found is None or found.name == ROOT:
        return
    annotations = (job.podgroup.get("metadata") or {}).get("annotations") or {}
    if annotations.get(k.JOB_ALLOCATED_HYPERNODE_KEY) != found.name:
        notes = ssn.outcome.podgroup_annotations.setdefault(job.uid, {})
        notes[k.JOB_ALLOCATED_HYPERNODE_KEY] = found.name


def gradients(topology: JobTopology, tree: HyperNodeTree, anchor: str | None) -> list[list[str]]:
    """Where to try the job, tier by tier from the lowest: lists of HyperNode names.

    A job already in a HyperNode may only grow within it or its ancestors; any other job may
    use every HyperNode of an allowed tier. Tiers above ``highest_tier`` are never offered.
    """
    if anchor is not None:
        return [
            [info.name]
            for info in tree.ancestors(anchor)
            if info.tier <= topology.highest_tier and info.nodes
        ]
    return [
        [info.name for info in tree.at_tier(tier)]
        for tier in tree.tiers()
        if tier <= topology.highest_tier and tree.at_tier(tier)
    ]

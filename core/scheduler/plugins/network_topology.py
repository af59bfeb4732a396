"""The ``network-topology-aware`` plugin: score HyperNodes and nodes for jobs that have a
``networkTopology``, so that a gang lands where its pods talk fastest.

Where a job may go at all (tiers from the lowest, never above the tier its hard mode allows)
is the tree's rule, ``util/hypernodes.gradients``, which allocate applies for every job with a
``networkTopology`` whether or not this plugin is enabled: a hard constraint cannot depend on a
scoring switch. This plugin decides among the HyperNodes of one tier where the gang, or one of
its partitions (``subGroupPolicy`` with a ``networkTopology``), fits:

- ``hyper_node_order``: HyperNode binpacking. With the job's trial placement counted, score =
  Σ_r w_r·used_r/allocatable_r ÷ Σ_r w_r × 100 × ``weight`` over the HyperNode's nodes (cpu,
  memory and the ``hypernode.binpack.resources`` listed; a resource the HyperNode lacks adds
  nothing), so fuller HyperNodes are filled first and whole ones stay free for large gangs.
- ``batch_node_order``: a node scores higher the lower the tier of the HyperNode it shares
  with the job's tasks already placed (100 × ``weight`` in the same lowest HyperNode, 0 when
  only the root joins them), which keeps a soft job's pods together as it grows.

Arguments as Volcano's: ``weight`` (1), ``hypernode.binpack.cpu`` / ``.memory`` (1),
``hypernode.binpack.resources`` and ``hypernode.binpack.resources.<name>`` (1). Accepted for
compatibility and without effect yet: ``hypernode.binpack.normal-pod.enable`` and
``.fading`` (HyperNode binpacking of jobs without a topology) and
``hypernode.gradient.evict.max-hypernodes`` (gang preemption's domains).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.resource import CPU, EPSILON, MEMORY
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import EventHandler, Session
from stromboli.core.scheduler.util.hypernodes import (
    HyperNodeTree,
    job_anchor,
    network_topology,
    session_tree,
)
from stromboli.core.scheduler.util.subgroups import has_subgroup_topology

WEIGHT = "weight"
CPU_WEIGHT = "hypernode.binpack.cpu"
MEMORY_WEIGHT = "hypernode.binpack.memory"
RESOURCES = "hypernode.binpack.resources"
RESOURCE_PREFIX = "hypernode.binpack.resources."
NORMAL_POD_ENABLE = "hypernode.binpack.normal-pod.enable"
NORMAL_POD_FADING = "hypernode.binpack.normal-pod.fading"
EVICT_MAX_HYPERNODES = "hypernode.gradient.evict.max-hypernodes"
MAX_SCORE = 100.0


class NetworkTopologyPlugin(Plugin):
    name = "network-topology-aware"
    known_arguments: ClassVar[dict[str, object]] = {
        WEIGHT: 1,
        CPU_WEIGHT: 1,
        MEMORY_WEIGHT: 1,
        RESOURCES: "",
        NORMAL_POD_ENABLE: True,
        NORMAL_POD_FADING: 0.8,
        EVICT_MAX_HYPERNODES: 8,
    }
    argument_prefixes: ClassVar[tuple[str, ...]] = (RESOURCE_PREFIX,)

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.weight = self.arguments.get_int(WEIGHT, 1)
        self.weights = self._resource_weights()
        self.tree: HyperNodeTree | None = None
        #: Job uid → the lowest HyperNode holding its placed tasks (None: none placed).
        self._anchors: dict[str, str | None] = {}
        #: Anchor → per node row, the tier score of the HyperNode the node shares with it.
        self._joins: dict[str, np.ndarray] = {}
        if self.weight == 0 or not any(
            network_topology(j) or has_subgroup_topology(j) for j in ssn.jobs.values()
        ):
            return  # nothing to score: keep the hot path free of this plugin
        ssn.register(ExtensionPoint.HYPER_NODE_ORDER, self.name, self.hyper_node_order)
        ssn.register(ExtensionPoint.BATCH_NODE_ORDER, self.name, self.batch_node_order)
        ssn.add_event_handler(EventHandler(allocate=self._placed, deallocate=self._removed))

    def _resource_weights(self) -> dict[str, int]:
        weights = {
            CPU: self.arguments.get_int(CPU_WEIGHT, 1),
            MEMORY: self.arguments.get_int(MEMORY_WEIGHT, 1),
        }
        for name in self.arguments.get_str(RESOURCES, "").split(","):
            name = name.strip()
            if name:
                weights[name] = self.arguments.get_int(RESOURCE_PREFIX + name, 1)
        return {name: max(w, 0) for name, w in weights.items()}

    def _tree(self) -> HyperNodeTree:
        if self.tree is None:
            self.tree = session_tree(self.ssn)
        return self.tree

    # -- HyperNode binpacking ---------------------------------------------------------------

    def hyper_node_order(self, job: JobInfo, hypernode: str, positions: np.ndarray) -> float:
        table = self.ssn.nodes
        total = sum(self.weights.values())
        if not total or not positions.size:
            return 0.0
        used = table.used.take(positions, axis=0).sum(axis=0)
        allocatable = table.allocatable.take(positions, axis=0).sum(axis=0)
        score = 0.0
        for name, weight in self.weights.items():
            column = table.index.columns.get(name)
            if column is None or weight == 0 or allocatable[column] <= EPSILON:
                continue
            score += weight * min(used[column] / allocatable[column], 1.0)
        return score / total * MAX_SCORE * self.weight

    def hyper_node_order_bound(
        self,
        job: JobInfo,
        used: np.ndarray,
        allocatable: np.ndarray,
        low: np.ndarray,
        high: np.ndarray,
    ) -> np.ndarray:
        """Per HyperNode (rows of the summed ``used`` and ``allocatable``), the most
        ``hyper_node_order`` can score after a trial placement of ``job`` that adds between
        ``low`` and ``high`` to the use: allocate tries HyperNodes best bound first and stops
        once a ready one beats every bound left, instead of trying each."""
        total = sum(self.weights.values())
        bounds = np.zeros(used.shape[0])
        if not total:
            return bounds
        # The score grows with use for a positive weight, so its most is at the most use.
        added = high if self.weight > 0 else low
        columns = self.ssn.nodes.index.columns
        for name, weight in self.weights.items():
            column = columns.get(name)
            if column is None or weight == 0:
                continue
            room = allocatable[:, column]
            present = room > EPSILON
            ratio = np.minimum(
                (used[:, column] + added[column]) / np.where(present, room, 1.0), 1.0
            )
            bounds += np.where(present, weight * ratio, 0.0)
        return bounds / total * MAX_SCORE * self.weight

    # -- keeping a job's pods together ------------------------------------------------------

    def batch_node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        scores = np.zeros(positions.shape[0])
        job = self.ssn.jobs.get(task.job_id)
        if job is None or network_topology(job) is None:
            return scores
        tree = self._tree()
        if task.job_id not in self._anchors:
            self._anchors[task.job_id] = job_anchor(job, tree)
        anchor = self._anchors[task.job_id]
        if anchor is None:
            return scores
        return self._join_scores(anchor)[positions] * MAX_SCORE * self.weight

    def _join_scores(self, anchor: str) -> np.ndarray:
        """Per node row, how low the HyperNode it shares with ``anchor`` is (1 for ``anchor``
        itself, 0 for the root), computed once per anchor: the anchor's ancestors, highest
        first, each marking its nodes (a lower one overwrites its parent's mark)."""
        scores = self._joins.get(anchor)
        if scores is None:
            tree = self._tree()
            table = self.ssn.nodes
            top = tree.root_tier
            span = max(top - min(tree.tiers()), 1)
            scores = np.zeros(len(table))
            for info in reversed(tree.ancestors(anchor)):
                scores[tree.mask(info.name, table.position, len(table))] = (top - info.tier) / span
            self._joins[anchor] = scores
        return scores

    def _placed(self, task: TaskInfo) -> None:
        if task.job_id in self._anchors and task.node_name:
            anchor = self._anchors[task.job_id]
            tree = self._tree()
            self._anchors[task.job_id] = (
                tree.leaf_of.get(task.node_name)
                if anchor is None
                else tree.join(anchor, task.node_name)
            )

    def _removed(self, task: TaskInfo) -> None:
        self._anchors.pop(task.job_id, None)  # recomputed from the job when next needed

"""The ``nodeorder`` plugin: kube-scheduler's score plugins, each times a Volcano weight.

As in Volcano, the scores that stand alone per node (least/most requested, balanced
allocation, node affinity) are registered on ``node_order``, and the ones kube normalises
across the candidate nodes (inter-pod affinity, taint toleration, topology spread) on
``batch_node_order``. The session keeps ``node_order`` scores per pod shape while a node's use
is unchanged, so image locality, which depends on container images that are not part of a
shape, is computed with the batch scores instead (the total is the same).

Every score is on kube's 0..100 scale with kube's integer truncation, except node affinity,
which Volcano adds unnormalised (the sum of matching preferred weights).
All of it is computed for the candidate positions at once; what depends only on the pod shape
and node facts is kept per shape while the nodes stay the same (see ``NodeIndex.memo``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.kube import nodeaffinity, podaffinity, spread, taints
from stromboli.core.scheduler.util.kube.nodeindex import NodeIndex
from stromboli.core.scheduler.util.kube.podspec import spec_of
from stromboli.core.scheduler.util.kube.state import SessionState

MAX_NODE_SCORE = 100.0
#: kube-scheduler's request assumed for a pod that requests no cpu / no memory when scoring.
DEFAULT_MILLI_CPU = 100.0
DEFAULT_MEMORY = 200.0 * 1024 * 1024
DEFAULTS = np.array([[DEFAULT_MILLI_CPU], [DEFAULT_MEMORY]])
_MB = 1024.0 * 1024.0
#: kube's ImageLocality thresholds: below 23 MB nothing counts, 1000 MB per container is full.
IMAGE_MIN = 23 * _MB
IMAGE_MAX_PER_CONTAINER = 1000 * _MB

LEAST_REQUESTED = "leastrequested.weight"
MOST_REQUESTED = "mostrequested.weight"
NODE_AFFINITY = "nodeaffinity.weight"
POD_AFFINITY = "podaffinity.weight"
BALANCED_RESOURCE = "balancedresource.weight"
TAINT_TOLERATION = "tainttoleration.weight"
IMAGE_LOCALITY = "imagelocality.weight"
POD_TOPOLOGY_SPREAD = "podtopologyspread.weight"
#: Volcano's argument keys and default weights.
WEIGHTS: dict[str, int] = {
    LEAST_REQUESTED: 1,
    MOST_REQUESTED: 0,
    NODE_AFFINITY: 2,
    POD_AFFINITY: 2,
    BALANCED_RESOURCE: 1,
    TAINT_TOLERATION: 3,
    IMAGE_LOCALITY: 1,
    POD_TOPOLOGY_SPREAD: 2,
}
RESOURCE_SCORES = (LEAST_REQUESTED, MOST_REQUESTED, BALANCED_RESOURCE)
PER_NODE = (*RESOURCE_SCORES, NODE_AFFINITY)
NORMALISED = (POD_AFFINITY, TAINT_TOLERATION, POD_TOPOLOGY_SPREAD, IMAGE_LOCALITY)
#: Up to this many stale nodes are scored in plain Python (most searches: the one to five nodes
#: whose use changed since the shape was last scored), where numpy's per-call cost dominates.
FEW_NODES = 16
#: Floats at or beyond this magnitude are whole numbers already.
_WHOLE = float(2**52)
#: Soft-taint counts of a shape that no node's taints affect (every node then scores 100).
_NO_COUNTS = np.zeros(0)


@dataclass(slots=True)
class Capacity:
    """Allocatable cpu and memory of every node (rows cpu, memory; a column per node), prepared
    once per session for the resource scores.

    kube leaves out a resource the node does not have: ``safe`` holds 1 there so divisions stay
    finite; ``shares`` holds, per node, how many of the two it has (at least 1) and the factor
    of the two-resource standard deviation (½, or 0 when it has fewer than two). Rows of
    resources and columns of nodes keep the numpy loops long and contiguous.
    """

    amount: np.ndarray
    safe: np.ndarray
    shares: np.ndarray

    @classmethod
    def of(cls, allocatable: np.ndarray) -> Capacity:
        amount = np.ascontiguousarray(allocatable[:, :2].T)
        count = (amount > 0).sum(axis=0).astype(float)
        shares = np.stack([np.maximum(count, 1.0), np.where(count == 2, 0.5, 0.0)])
        return cls(amount=amount, safe=np.where(amount > 0, amount, 1.0), shares=shares)


def least_requested(
    requested: np.ndarray, capacity: np.ndarray, safe: np.ndarray, shares: np.ndarray
) -> np.ndarray:
    """Mean over cpu and memory of floor(100 × free / capacity), floored; a resource that
    overflows scores 0, one the node lacks is left out of the mean."""
    per = capacity - requested
    per *= MAX_NODE_SCORE
    per /= safe
    np.floor(per, out=per)
    np.maximum(per, 0.0, out=per)
    return _mean(per, shares)


def most_requested(
    requested: np.ndarray, capacity: np.ndarray, safe: np.ndarray, shares: np.ndarray
) -> np.ndarray:
    """Mean over cpu and memory of floor(100 × min(requested, capacity) / capacity)."""
    per = np.minimum(requested, capacity)
    per *= MAX_NODE_SCORE
    per /= safe
    np.floor(per, out=per)
    return _mean(per, shares)


def _mean(per: np.ndarray, shares: np.ndarray) -> np.ndarray:
    mean = per[0] + per[1]
    mean /= shares[0]
    return np.floor(mean, out=mean)


def balanced_allocation(fractions: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """floor(100 × (1 − standard deviation of the cpu and memory fractions)), fractions capped
    at 1; for two resources the deviation is half their difference. Overwrites ``fractions``."""
    np.minimum(fractions, 1.0, out=fractions)
    spread = fractions[0] - fractions[1]
    np.abs(spread, out=spread)
    spread *= shares[1]
    np.subtract(1.0, spread, out=spread)
    spread *= MAX_NODE_SCORE
    return np.floor(spread, out=spread)


def normalized_image(name: str) -> str:
    """kube compares images with an implicit ``:latest`` tag."""
    if name.rfind(":") <= name.rfind("/"):
        return f"{name}:latest"
    return name


def pod_images(pod: dict) -> tuple[str, ...]:
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    return tuple(normalized_image(c["image"]) for c in containers if c.get("image"))


def image_locality(index: NodeIndex, images: tuple[str, ...]) -> np.ndarray:
    """kube's ImageLocality per node: the sizes of the pod's images present there, each scaled
    by the share of nodes holding it, mapped from [23 MB, 1000 MB × containers] to 0..100."""
    if not images:
        return np.zeros(index.size)
    sums = np.zeros(index.size)
    known = index.images
    for name in images:
        state = known.get(name)
        if state is not None:
            sums[state.positions] += np.floor(state.size * state.positions.size / index.size)
    high = IMAGE_MAX_PER_CONTAINER * len(images)
    clipped = np.clip(sums, IMAGE_MIN, high)
    return np.floor(MAX_NODE_SCORE * (clipped - IMAGE_MIN) / (high - IMAGE_MIN))


def resource_scores_array(
    weights: tuple[int, int, int],
    request: np.ndarray,
    used: np.ndarray,
    capacity: np.ndarray,
    safe: np.ndarray,
    shares: np.ndarray,
) -> np.ndarray:
    """Weighted least requested, most requested and balanced allocation of many nodes at
    once: ``request`` a cpu, memory column; ``used`` (overwritten) and the others rows cpu,
    memory with a column per node, as in :class:`Capacity`."""
    least_w, most_w, balanced_w = weights
    total = np.zeros(used.shape[1])
    if least_w or most_w:
        # kube scores a pod that requests nothing as if it asked for a small default.
        requested = used + np.where(request > 0, request, DEFAULTS)
        if least_w:
            least = least_requested(requested, capacity, safe, shares)
            least *= least_w
            total += least
        if most_w:
            most = most_requested(requested, capacity, safe, shares)
            most *= most_w
            total += most
    if balanced_w:
        used += request
        used /= safe
        balanced = balanced_allocation(used, shares)
        balanced *= balanced_w
        total += balanced
    return total


def _floor(x: float) -> float:
    """``np.floor`` of one float: zeros keep their sign, NaN and infinities stay."""
    if x == 0.0 or not -_WHOLE < x < _WHOLE:  # NaN fails the comparison too
        return x
    return float(math.floor(x))


def _maximum(a: float, b: float) -> float:
    """``np.maximum``: NaN wins, and of equal values (such as 0.0 and -0.0) the second."""
    return a if a > b or a != a else b


def _minimum(a: float, b: float) -> float:
    """``np.minimum``: NaN wins, and of equal values the second."""
    return a if a < b or a != a else b


def resource_scores_few(
    weights: tuple[int, int, int],
    request: tuple[float, float],
    used: list[list[float]],
    capacity: list[list[float]],
    safe: list[list[float]],
    shares: list[list[float]],
) -> list[float]:
    """Weighted least requested, most requested and balanced allocation of a few nodes, the
    very float operations of the array functions above in the same order (so the same bits),
    one node at a time: for a handful of nodes, each numpy call costs more than its work.
    ``used`` holds a [cpu, memory] pair per node; the others are rows cpu, memory as in
    :class:`Capacity`."""
    least_w, most_w, balanced_w = weights
    req_cpu, req_mem = request
    ask_cpu = req_cpu if req_cpu > 0 else DEFAULT_MILLI_CPU
    ask_mem = req_mem if req_mem > 0 else DEFAULT_MEMORY
    out: list[float] = []
    for i, (used_cpu, used_mem) in enumerate(used):
        cap_cpu, cap_mem = capacity[0][i], capacity[1][i]
        safe_cpu, safe_mem = safe[0][i], safe[1][i]
        count, factor = shares[0][i], shares[1][i]
        total = 0.0
        if least_w or most_w:
            rq_cpu, rq_mem = used_cpu + ask_cpu, used_mem + ask_mem
            if least_w:
                a = _maximum(_floor((cap_cpu - rq_cpu) * MAX_NODE_SCORE / safe_cpu), 0.0)
                b = _maximum(_floor((cap_mem - rq_mem) * MAX_NODE_SCORE / safe_mem), 0.0)
                total += _floor((a + b) / count) * least_w
            if most_w:
                a = _floor(_minimum(rq_cpu, cap_cpu) * MAX_NODE_SCORE / safe_cpu)
                b = _floor(_minimum(rq_mem, cap_mem) * MAX_NODE_SCORE / safe_mem)
                total += _floor((a + b) / count) * most_w
        if balanced_w:
            a = _minimum((used_cpu + req_cpu) / safe_cpu, 1.0)
            b = _minimum((used_mem + req_mem) / safe_mem, 1.0)
            spread = abs(a - b) * factor
            total += _floor((1.0 - spread) * MAX_NODE_SCORE) * balanced_w
        out.append(total)
    return out


class NodeOrderPlugin(Plugin):
    name = "nodeorder"
    known_arguments: ClassVar[dict[str, object]] = dict(WEIGHTS)

    def on_session_open(self, ssn: Session) -> None:
        weight = {key: self.arguments.get_int(key, default) for key, default in WEIGHTS.items()}
        self.weight = weight
        self.state = SessionState.of(ssn)
        self.table = ssn.nodes
        self.capacity = self.state.nodes.memo(
            ("capacity",), lambda: Capacity.of(ssn.nodes.allocatable)
        )
        self._resource_weights = any(weight[k] for k in RESOURCE_SCORES)
        self._weights = (weight[LEAST_REQUESTED], weight[MOST_REQUESTED], weight[BALANCED_RESOURCE])
        self._images_by_task: dict[str, np.ndarray] = {}
        if any(weight[k] for k in PER_NODE):
            ssn.register(ExtensionPoint.NODE_ORDER, self.name, self.node_order)
        if any(weight[k] for k in NORMALISED):
            ssn.register(ExtensionPoint.BATCH_NODE_ORDER, self.name, self.batch_node_order)

    # -- per-node scores ---------------------------------------------------------------------------

    def node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        weight = self.weight
        affinity = weight[NODE_AFFINITY] and spec_of(task).preferred_terms
        if not positions.size or not (self._resource_weights or affinity):
            return np.zeros(positions.shape[0])
        if not affinity:
            # Alone, the resource scores are the total: ``0.0 + x`` is ``x`` (a sum that
            # starts at 0.0 is never -0.0), so the zeros they would be added to are left out.
            return self._resource_scores(task, positions)
        total = np.zeros(positions.shape[0])
        if self._resource_weights:
            total += self._resource_scores(task, positions)
        spec = spec_of(task)
        masks = self.state.static(task, spec)
        if masks.preferred is None:
            masks.preferred = nodeaffinity.preferred_scores(self.state.nodes, spec)
        total += weight[NODE_AFFINITY] * masks.preferred[positions]
        return total

    def _resource_scores(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        """Least/most requested and balanced allocation over cpu and memory, weighted."""
        table = self.table
        cap = self.capacity
        if positions.shape[0] <= FEW_NODES:
            vector = table.task_vector(task)
            amount, safe, shares = self._capacity_lists
            rows = positions.tolist()
            used = table.used  # a row slice each: cheaper than one mixed fancy index
            return np.array(
                resource_scores_few(
                    self._weights,
                    (float(vector[0]), float(vector[1])),
                    [used[i, :2].tolist() for i in rows],
                    [[amount[0][i] for i in rows], [amount[1][i] for i in rows]],
                    [[safe[0][i] for i in rows], [safe[1][i] for i in rows]],
                    [[shares[0][i] for i in rows], [shares[1][i] for i in rows]],
                )
            )
        request = table.task_vector(task)[:2, None]
        return resource_scores_array(
            self._weights,
            request,
            np.ascontiguousarray(table.used.take(positions, axis=0)[:, :2].T),
            cap.amount.take(positions, axis=1),
            cap.safe.take(positions, axis=1),
            cap.shares.take(positions, axis=1),
        )

    @functools.cached_property
    def _capacity_lists(self) -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
        """The capacity rows as Python floats, for the few-node path (made on first use)."""
        cap = self.capacity
        return cap.amount.tolist(), cap.safe.tolist(), cap.shares.tolist()

    def _image_scores(self, task: TaskInfo) -> np.ndarray:
        scores = self._images_by_task.get(task.uid)
        if scores is None:
            scores = self._images_by_task[task.uid] = self._image_scores_of(pod_images(task.pod))
        return scores

    def _image_scores_of(self, images: tuple[str, ...]) -> np.ndarray:
        index = self.state.nodes
        return index.memo(("images", images), lambda: image_locality(index, images))

    # -- normalised scores -----------------------------------------------------------------------

    def batch_node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        weight = self.weight
        total = None
        if not positions.size:
            return np.zeros(0)
        state = self.state
        spec = spec_of(task)
        if weight[TAINT_TOLERATION]:
            masks = state.static(task, spec)
            if masks.soft_taints is None:
                counts = taints.intolerable_soft_counts(state.nodes, spec)
                masks.soft_taints = counts if counts.any() else _NO_COUNTS
            if masks.soft_taints is _NO_COUNTS:
                # The first term, so the zeros it would be added to are left out (0.0 + x is
                # x for a whole weight's multiple of 100).
                total = np.full(positions.shape[0], weight[TAINT_TOLERATION] * MAX_NODE_SCORE)
            else:
                total = np.zeros(positions.shape[0])
                counts = masks.soft_taints[positions]
                high = counts.max()
                if high > 0:
                    scores = MAX_NODE_SCORE - np.floor(counts * MAX_NODE_SCORE / high)
                else:
                    scores = np.full(positions.shape[0], MAX_NODE_SCORE)
                total += weight[TAINT_TOLERATION] * scores
        if total is None:
            total = np.zeros(positions.shape[0])
        if weight[POD_AFFINITY] and (
            spec.affinity_preferred or spec.anti_preferred or state.pods.scoring_shapes
        ):
            raw = podaffinity.raw_scores(state.nodes, state.pods, task.shape, spec, positions)
            if raw is not None:
                total += weight[POD_AFFINITY] * podaffinity.normalise(raw)
        if weight[POD_TOPOLOGY_SPREAD] and spec.spread_soft:
            masks = state.static(task, spec)
            total += weight[POD_TOPOLOGY_SPREAD] * spread.scores(
                state.nodes, state.pods, spec, positions, masks
            )
        if weight[IMAGE_LOCALITY] and state.nodes.images:
            total += weight[IMAGE_LOCALITY] * self._image_scores(task)[positions]
        return total

"""A small reference FGD placer for the openb benchmark, written from the paper's definition
(Weng et al., *Beware of Fragmentation*, USENIX ATC 2023, §4) to replay the same arrival
sequences as the real scheduler outside it, so that the two can be compared pod for pod.

The model is the paper's: a node has cpu, memory and per-card free GPU in milli; the
*target workload* is the trace's pod shapes (cpu, GPU milli per card, cards, allowed models;
pods without GPUs included) by popularity, the most popular covering 95% of the pods; a
node's fragmentation for one shape is all its free GPU when the shape cannot run there (too
little cpu, too few cards that hold it, no allowed model, or it asks for no GPU) and
otherwise the free part of every card too small for one of its GPUs; the node's
fragmentation is the popularity-weighted sum. A pod goes where it increases that least: a
shared pod tries each card that holds it, a pod of whole cards takes free cards.

``scores`` says how the increase ranks nodes, as ``how/ties``: ``how`` is ``int``, the
artifact's score (``int(100 × sigmoid(−Δ/1000))``), ``exact`` (the increase itself) or
``q<step>`` (the increase in whole steps of ``step`` milli); ``ties`` is ``random`` (as
kube-scheduler's host selection), ``fit`` (the node with the least free GPU) or ``first``.
A shared pod's card is the first with the best score. On openb's default trace, seeds 42-51
of this benchmark's sequences, ``int/random`` allocated 89.6% and ``exact/fit`` 94.0% at seed
42, ``int/fit`` 95.09% on average over seeds 42-51 and ``q80/fit`` 95.22% over 42-46: how
ties go matters more than fine differences of the increase (``fragmentation.resolution``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FULL = 1000
COVER = 0.95


@dataclass(frozen=True, slots=True)
class Shape:
    cpu: int
    milli: int
    gpus: int
    spec: str


def shape_of(cpu_milli: int, num_gpu: int, gpu_milli: int, gpu_spec: str) -> Shape:
    """The paper's pod resource: cpu, milli of one card (1000 for whole cards), cards."""
    if num_gpu <= 0:
        return Shape(cpu_milli, 0, 0, "")
    milli = gpu_milli if num_gpu == 1 and 0 < gpu_milli < FULL else FULL
    return Shape(cpu_milli, milli, num_gpu, gpu_spec)


def target_workload(pods: Sequence, cover: float = COVER) -> list[tuple[Shape, float]]:
    """The most popular shapes of ``pods`` covering ``cover`` of them, each with its count
    (whole numbers: fragments summed in them are exact, so alike nodes tie exactly)."""
    counts = Counter(shape_of(p.cpu_milli, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in pods)
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    kept, total, need = [], 0, cover * len(pods)
    for shape, count in ranked:
        if total >= need:
            break
        kept.append((shape, count))
        total += count
    return [(s, float(c)) for s, c in kept]


def _allowed(spec: str, model: str) -> bool:
    return not spec or model in [m for m in spec.split("|") if m]


class ReferenceFGD:
    """Cluster state and the FGD choice for one replay."""

    def __init__(
        self, nodes: Sequence, workload: list[tuple[Shape, float]], scores: str, seed: int
    ) -> None:
        self.scores, _, ties = scores.partition("/")
        self.ties = ties or ("random" if self.scores == "int" else "fit")
        self.rng = random.Random(seed)
        width = max(n.gpus for n in nodes)
        count = len(nodes)
        self.models = [n.model for n in nodes]
        self.cpu = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.left = np.zeros((count, width), dtype=np.int64)
        for i, n in enumerate(nodes):
            self.left[i, : n.gpus] = FULL
        self.t_cpu = np.array([s.cpu for s, _ in workload], dtype=np.int64)
        self.t_milli = np.array([s.milli for s, _ in workload], dtype=np.int64)
        self.t_gpus = np.array([s.gpus for s, _ in workload], dtype=np.int64)
        counts = np.array([p for _, p in workload])
        #: Popularity; fragments are kept in counts × milli and scaled only for ``int``.
        self.t_p = counts
        self.scale = 1.0 / counts.sum() if counts.size else 1.0
        self.t_access = np.array(
            [[_allowed(s.spec, m) for m in self.models] for s, _ in workload], dtype=bool
        ).reshape(len(workload), count)
        self.version = np.zeros(count, dtype=np.int64)
        self.before = self.fragments(self.left, self.cpu, np.arange(count))
        self._cache: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def fragments(self, left: np.ndarray, cpu: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Expected fragment (milli) of states ``left`` (K, cards) with ``cpu`` idle on the
        nodes ``rows``."""
        total = left.sum(axis=1)
        ok = left[:, None, :] >= self.t_milli[None, :, None]
        count = ok.sum(axis=2)
        usable = (left[:, None, :] * ok).sum(axis=2)
        q3 = (
            self.t_access[:, rows].T
            & (count >= self.t_gpus[None, :])
            & (cpu[:, None] >= self.t_cpu[None, :])
            & (self.t_milli[None, :] > 0)
        )
        per = np.where(q3, total[:, None] - usable, total[:, None])
        return per.astype(float) @ self.t_p

    def _score_rows(self, pod: Shape, mem: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(score, card) of each node of ``rows`` for ``pod`` (-inf where it cannot go)."""
        left = self.left[rows]
        cpu = self.cpu[rows] - pod.cpu
        fits = (cpu >= 0) & (self.mem[rows] >= mem)
        if pod.gpus:
            access = np.array([_allowed(pod.spec, self.models[r]) for r in rows], dtype=bool)
            holds = left >= pod.milli
            fits &= access & (holds.sum(axis=1) >= pod.gpus)
        width = left.shape[1]
        if pod.gpus == 1 and pod.milli < FULL:
            after = np.repeat(left[:, None, :], width, axis=1)
            idx = np.arange(width)
            after[:, idx, idx] -= pod.milli
            valid = holds
            k = rows.shape[0]
            frag = self.fragments(
                np.maximum(after, 0).reshape(k * width, width),
                np.repeat(cpu, width),
                np.repeat(rows, width),
            ).reshape(k, width)
        else:
            after = left.copy()
            if pod.gpus:
                # whole cards: the first free ones (all free cards are alike)
                free = left >= FULL
                order = np.argsort(~free, axis=1, kind="stable")[:, : pod.gpus]
                np.put_along_axis(after, order, 0, axis=1)
                after = np.where(fits[:, None], after, left)
            frag = self.fragments(after, cpu, rows)[:, None]
            valid = np.ones((rows.shape[0], 1), dtype=bool)
        delta = self.before[rows][:, None] - frag  # > 0: less fragmented
        if self.scores == "int":
            value = np.floor(100.0 / (1.0 + np.exp(-delta * self.scale / 1000.0)))
        elif self.scores.startswith("q"):
            value = np.floor(delta * self.scale / float(self.scores[1:]))
        else:
            value = delta
        value = np.where(valid & fits[:, None], value, -np.inf)
        card = value.argmax(axis=1)
        return value[np.arange(rows.shape[0]), card], card

    def place(self, cpu: int, mem: int, num_gpu: int, gpu_milli: int, spec: str) -> bool:
        pod = shape_of(cpu, num_gpu, gpu_milli, spec)
        key = (pod, mem)
        cached = self._cache.get(key)
        count = self.cpu.shape[0]
        if cached is None:
            cached = (
                np.full(count, -np.inf),
                np.zeros(count, dtype=np.int64),
                np.full(count, -1, dtype=np.int64),
            )
            self._cache[key] = cached
        score, card, seen = cached
        stale = np.flatnonzero(seen != self.version)
        if stale.shape[0]:
            score[stale], card[stale] = self._score_rows(pod, mem, stale)
            seen[stale] = self.version[stale]
        best = score.max()
        if not np.isfinite(best):
            return False
        ties = np.flatnonzero(score == best)
        if self.ties == "random":
            node = int(ties[self.rng.randrange(ties.shape[0])])
        elif self.ties == "first":
            node = int(ties[0])
        else:
            fullness = self.left[ties].sum(axis=1)
            node = int(ties[np.argmin(fullness)])
        self.cpu[node] -= pod.cpu
        self.mem[node] -= mem
        if pod.gpus == 1 and pod.milli < FULL:
            self.left[node, card[node]] -= pod.milli
        elif pod.gpus:
            free = np.flatnonzero(self.left[node] >= FULL)[: pod.gpus]
            self.left[node, free] = 0
        self.version[node] += 1
        rows = np.array([node])
        self.before[node] = self.fragments(self.left[rows], self.cpu[rows], rows)[0]
        return True


def replay_reference(
    nodes: Sequence, trace: Sequence, sequence: Sequence, scores: str = "int", seed: int = 0
) -> list[bool]:
    """Which arrivals of ``sequence`` the reference FGD places, its target workload taken
    from ``trace`` (the pods before tuning, as the paper's artifact does)."""
    fgd = ReferenceFGD(nodes, target_workload(trace), scores, seed)
    return [
        fgd.place(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in sequence
    ]

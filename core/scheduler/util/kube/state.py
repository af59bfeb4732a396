"""Per-session placement state shared by the ``predicates`` and ``nodeorder`` plugins.

Both plugins need the same node columns, the same per-shape node masks and the same view of
placed pods; building them once per session and keeping them current through the session's
allocate/deallocate events (as Volcano's predicates plugin keeps its node infos) is what keeps
a predicate call in the tens of microseconds.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.session import EventHandler, Session
from stromboli.core.scheduler.util.kube import nodeaffinity, taints, unschedulable
from stromboli.core.scheduler.util.kube.nodeindex import node_index
from stromboli.core.scheduler.util.kube.podcount import PodRoom
from stromboli.core.scheduler.util.kube.podindex import PodIndex
from stromboli.core.scheduler.util.kube.podspec import PodSpecInfo, spec_of
from stromboli.core.scheduler.util.kube.ports import PortIndex


@dataclass(slots=True)
class StaticMasks:
    """What depends only on a pod shape and node facts, hence holds while no node changes."""

    unschedulable: np.ndarray
    #: Nodes passing nodeSelector and required node affinity.
    affinity_ok: np.ndarray
    #: (nodes, reason) per untolerated NoSchedule/NoExecute taint.
    taint_failures: list[tuple[np.ndarray, str]]
    #: Nodes without an untolerated NoSchedule/NoExecute taint.
    taints_ok: np.ndarray
    #: Lazily computed: preferred node affinity and soft-taint score inputs, and the nodes
    #: counted by each spread constraint (keyed by (hard, index of the constraint)).
    preferred: np.ndarray | None = None
    soft_taints: np.ndarray | None = None
    spread_eligible: dict[tuple[bool, int], Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Placed:
    """Placed-pod views, built together in one pass over the nodes' pods."""

    pods: PodIndex
    ports: PortIndex
    room: PodRoom


class SessionState:
    """Node columns and placed pods of one session; obtain with :meth:`of`."""

    _by_session: ClassVar[weakref.WeakKeyDictionary[Session, SessionState]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, ssn: Session) -> None:
        self.table = ssn.nodes
        self.nodes = node_index(ssn.nodes)
        self._placed: _Placed | None = None
        #: Tasks evicted before the placed-pod views were built (they no longer count).
        self._evicted: set[str] = set()

    @classmethod
    def of(cls, ssn: Session) -> SessionState:
        """The session's state, created (and subscribed to its events) on first use.

        Call it from ``on_session_open`` so that no allocation of the session is missed.
        """
        state = cls._by_session.get(ssn)
        if state is None:
            state = cls._by_session[ssn] = cls(ssn)
            handler = EventHandler(allocate=state._on_allocate, deallocate=state._on_deallocate)
            ssn.add_event_handler(handler)
        return state

    # -- static masks ----------------------------------------------------------------------------

    def static(self, task: TaskInfo, spec: PodSpecInfo) -> StaticMasks:
        """The shape's static masks (kept with the node index, so across sessions too)."""
        return self.nodes.memo(("static", task.shape), lambda: self._static(spec))

    def _static(self, spec: PodSpecInfo) -> StaticMasks:
        index = self.nodes
        failures = taints.hard_failures(index, spec)
        taints_ok = np.ones(index.size, dtype=bool)
        for mask, _ in failures:
            taints_ok &= ~mask
        return StaticMasks(
            unschedulable=unschedulable.failures(index, spec),
            affinity_ok=(
                nodeaffinity.required_mask(index, spec)
                if spec.has_node_constraints
                else np.ones(index.size, dtype=bool)
            ),
            taint_failures=failures,
            taints_ok=taints_ok,
        )

    # -- placed pods -----------------------------------------------------------------------------

    def placed(self) -> _Placed:
        if self._placed is None:
            self._placed = self._build()
        return self._placed

    @property
    def pods(self) -> PodIndex:
        return self.placed().pods

    @property
    def ports(self) -> PortIndex:
        return self.placed().ports

    @property
    def room(self) -> PodRoom:
        return self.placed().room

    def _build(self) -> _Placed:
        table = self.table
        size = len(table)
        pods = PodIndex()
        ports = PortIndex(size)
        counts = np.zeros(size)
        evicted = self._evicted
        for position, node in enumerate(table.nodes):
            placed = 0
            for task in node.tasks.values():
                if evicted and task.uid in evicted:
                    continue
                spec = spec_of(task)
                pods.add(task.shape, spec, position)
                if spec.ports:
                    ports.change(spec.ports, position, 1)
                placed += 1
            counts[position] = placed
        room = PodRoom(table.allocatable[:, 2].copy(), counts)
        return _Placed(pods, ports, room)

    def _change(self, task: TaskInfo, delta: int) -> None:
        position = self.table.position.get(task.node_name)
        if position is None or self._placed is None:
            return
        spec = spec_of(task)
        placed = self._placed
        if delta > 0:
            placed.pods.add(task.shape, spec, position)
        else:
            placed.pods.remove(task.shape, position)
        if spec.ports:
            placed.ports.change(spec.ports, position, delta)
        placed.room.change(position, delta)

    def _on_allocate(self, task: TaskInfo) -> None:
        if self._placed is None:
            self._evicted.discard(task.uid)
        else:
            self._change(task, 1)

    def _on_deallocate(self, task: TaskInfo) -> None:
        if self._placed is None:
            # An eviction leaves the pod on its node as Releasing, so the views must skip it
            # when they are built; an undone allocation takes the pod off its node anyway.
            if task.status == TaskStatus.RELEASING:
                self._evicted.add(task.uid)
        else:
            self._change(task, -1)

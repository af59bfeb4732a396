"""Nodes of a snapshot: static facts per node, resource use in shared numpy arrays.

Per-node amounts live in ``NodeTable`` arrays (rows = nodes, columns = resources of the
snapshot's ``ResourceIndex``) so that fit and score are computed for all nodes at once.
Accounting follows Volcano: ``idle = allocatable - used``; a releasing pod still uses its node
but its resources count as future idle; a pipelined pod reserves future idle only.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field, fields

import numpy as np

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.resource import Resource, ResourceIndex
from stromboli.core.scheduler.api.status import ON_NODE_STATUS, TaskStatus, members

_ON_NODE = members(ON_NODE_STATUS)
#: Request rows a table remembers by request object; forgotten all at once past this many.
REQUEST_VECTORS = 4096
#: Entries the change log keeps before it starts afresh (a long-lived cache table would grow it
#: for good; a session's table rarely reaches it).
CHANGE_LOG = 1 << 16


@dataclass(slots=True, eq=False)
class NodeInfo:
    """Facts about one node that do not change within a cycle, plus its pods."""

    name: str
    position: int
    node: dict
    labels: dict[str, str]
    taints: list[dict]
    unschedulable: bool
    allocatable: Resource
    #: Pods on the node by uid (running, bound, binding, allocated, pipelined, releasing).
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    #: Host ports in use: set of (protocol, hostIP, port).
    used_ports: set[tuple[str, str, int]] = field(default_factory=set)

    def clone(self) -> NodeInfo:
        # One constructor call from a C attrgetter: several times faster than copy.copy on a
        # slotted dataclass, and every snapshot clones every node.
        node = NodeInfo(*_node_values(self))
        node.tasks = dict(self.tasks)
        node.used_ports = set(self.used_ports)
        return node


_node_values = operator.attrgetter(*(f.name for f in fields(NodeInfo)))


def host_ports(pod: dict) -> list[tuple[str, str, int]]:
    """Host ports a pod asks for, as (protocol, hostIP, port)."""
    ports: list[tuple[str, str, int]] = []
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            host_port = port.get("hostPort")
            if host_port:
                ports.append(
                    (port.get("protocol", "TCP"), port.get("hostIP") or "0.0.0.0", int(host_port))
                )
    return ports


class NodeTable:
    """All nodes of a snapshot with their resource arrays."""

    def __init__(self, index: ResourceIndex | None = None) -> None:
        self.index = index or ResourceIndex()
        self.nodes: list[NodeInfo] = []
        self.position: dict[str, int] = {}
        width = len(self.index)
        self.allocatable = np.zeros((0, width))
        self.used = np.zeros((0, width))
        self.releasing = np.zeros((0, width))
        self.pipelined = np.zeros((0, width))
        #: Derived and kept current by every change: ``allocatable - used`` and
        #: ``idle + releasing - pipelined`` (what fits now, and what fits once pods leave).
        self.idle_now = np.zeros((0, width))
        self.future = np.zeros((0, width))
        #: Bumped whenever a node's use changes, so per-shape caches know which rows are stale.
        self.versions = np.zeros(0, dtype=np.int64)
        #: Positions in the order their use changed (repeats kept), so that a per-shape cache
        #: finds the few stale rows of a search from the entries since its last look instead
        #: of comparing every node's version. Cleared when it passes ``CHANGE_LOG`` entries,
        #: and then ``epoch`` moves on: a reader holding an older epoch starts afresh.
        self.changes: list[int] = []
        self.epoch = 0
        #: Rows of shared requests (replicas of one template share one ``Resource``), by id,
        #: with the request kept alive so that its id cannot be reused while remembered.
        self._request_rows: dict[int, tuple[Resource, np.ndarray]] = {}

    _ARRAYS = ("allocatable", "used", "releasing", "pipelined", "idle_now", "future")

    def __len__(self) -> int:
        return len(self.nodes)

    # -- shape ------------------------------------------------------------------------------

    def ensure_columns(self) -> None:
        """Grow the arrays after new resource names were indexed."""
        extra = len(self.index) - self.allocatable.shape[1]
        if extra > 0:
            pad = ((0, 0), (0, extra))
            for name in self._ARRAYS:
                setattr(self, name, np.pad(getattr(self, name), pad))

    def vector(self, resource: Resource, pods: float = 0.0) -> np.ndarray:
        for name in resource.names():
            self.index.add(name)
        self.ensure_columns()
        return self.index.vector(resource, pods)

    def add_node(self, info: NodeInfo) -> None:
        row = self.vector(info.allocatable)
        info.position = len(self.nodes)
        self.nodes.append(info)
        self.position[info.name] = info.position
        zeros = np.zeros((1, row.shape[0]))
        self.allocatable = np.vstack([self.allocatable, row[None, :]])
        self.used = np.vstack([self.used, zeros])
        self.releasing = np.vstack([self.releasing, zeros])
        self.pipelined = np.vstack([self.pipelined, zeros])
        self.idle_now = np.vstack([self.idle_now, row[None, :]])
        self.future = np.vstack([self.future, row[None, :]])
        self.versions = np.append(self.versions, 0)
        self.epoch += 1  # rows moved: what readers kept per row is void

    def replace_node(self, info: NodeInfo) -> None:
        """Update a node's static facts and allocatable, keeping its pods and use."""
        position = self.position[info.name]
        old = self.nodes[position]
        info.position = position
        info.tasks = old.tasks
        info.used_ports = old.used_ports
        self.nodes[position] = info
        self.allocatable[position] = self.vector(info.allocatable)
        self._refresh(position)

    def remove_node(self, name: str) -> None:
        position = self.position.pop(name)
        del self.nodes[position]
        for array_name in self._ARRAYS:
            setattr(self, array_name, np.delete(getattr(self, array_name), position, axis=0))
        self.versions = np.delete(self.versions, position)
        self.epoch += 1
        for i in range(position, len(self.nodes)):
            self.nodes[i].position = i
            self.position[self.nodes[i].name] = i

    def copy(self) -> NodeTable:
        """A snapshot copy: arrays copied, node facts shared, per-node pod maps copied."""
        table = NodeTable.__new__(NodeTable)
        table.index = copy.copy(self.index)
        table.index.names = list(self.index.names)
        table.index.columns = dict(self.index.columns)
        table.nodes = [node.clone() for node in self.nodes]
        table.position = dict(self.position)
        for name in self._ARRAYS:
            setattr(table, name, getattr(self, name).copy())
        table.versions = self.versions.copy()
        table.changes = []
        table.epoch = 0
        table._request_rows = dict(self._request_rows)
        return table

    def _refresh(self, position: int) -> None:
        # Written into the rows in place (no temporaries): called on every task placed.
        idle = self.idle_now[position]
        np.subtract(self.allocatable[position], self.used[position], out=idle)
        future = self.future[position]
        np.add(idle, self.releasing[position], out=future)
        future -= self.pipelined[position]
        self.versions[position] += 1
        changes = self.changes
        changes.append(position)
        if len(changes) > CHANGE_LOG:
            changes.clear()
            self.epoch += 1

    # -- accounting -------------------------------------------------------------------------

    def task_vector(self, task: TaskInfo) -> np.ndarray:
        """The task's scheduling request as a row (pods column 1); read-only, as it is
        shared by every task of the same request."""
        vector = task.vector
        if vector is None or vector.shape[0] != len(self.index):
            vector = task.vector = self.request_row(task.init_resreq)
        return vector

    def request_row(self, request: Resource) -> np.ndarray:
        """``vector(request, pods=1)``, computed once per request object and width."""
        found = self._request_rows.get(id(request))
        if found is not None and found[0] is request and found[1].shape[0] == len(self.index):
            return found[1]
        row = self.vector(request, pods=1.0)
        row.flags.writeable = False
        if len(self._request_rows) >= REQUEST_VECTORS:
            self._request_rows.clear()
        self._request_rows[id(request)] = (request, row)
        return row

    def add_task(self, node_name: str, task: TaskInfo) -> None:
        """Account a task on a node according to its status."""
        position = self.position.get(node_name)
        if position is None:
            return
        node = self.nodes[position]
        node.tasks[task.uid] = task
        vector = self.task_vector(task)
        # ``np.add(row, v, out=row)``: what ``array[position] += v`` does, without writing the
        # row back onto itself a second time (this runs for every task placed).
        if task.status == TaskStatus.PIPELINED:
            row = self.pipelined[position]
            np.add(row, vector, out=row)
        else:
            row = self.used[position]
            np.add(row, vector, out=row)
            if task.status == TaskStatus.RELEASING:
                row = self.releasing[position]
                np.add(row, vector, out=row)
            if task.host_ports:
                node.used_ports.update(task.host_ports)
        self._refresh(position)

    def remove_task(self, node_name: str, task: TaskInfo) -> None:
        """Undo ``add_task`` for a task whose status is still the one it was added with."""
        position = self.position.get(node_name)
        if position is None:
            return
        node = self.nodes[position]
        if node.tasks.pop(task.uid, None) is None:
            return
        vector = self.task_vector(task)
        if task.status == TaskStatus.PIPELINED:
            row = self.pipelined[position]
            np.subtract(row, vector, out=row)
        else:
            row = self.used[position]
            np.subtract(row, vector, out=row)
            if task.status == TaskStatus.RELEASING:
                row = self.releasing[position]
                np.subtract(row, vector, out=row)
            for port in task.host_ports:
                node.used_ports.discard(port)
        self._refresh(position)

    def idle(self) -> np.ndarray:
        return self.idle_now

    def future_idle(self) -> np.ndarray:
        return self.future

    def used_of(self, node_name: str) -> Resource:
        return self.index.resource(self.used[self.position[node_name]])

    def total_allocatable(self) -> Resource:
        return self.index.resource(self.allocatable.sum(axis=0))


def is_counted_on_node(status: TaskStatus) -> bool:
    return status in _ON_NODE  # a set lookup: flag arithmetic is slow, and this is per pod

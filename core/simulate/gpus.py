"""GPUs of the simulated cluster over time, and card by card at the end.

The scheduler rebuilds its view of every card each session from the nodes' registrations and
the device ids written on the pods (``deviceshare``'s :class:`DeviceInventory`); the sampler
builds the same view from the scheduler cache after each cycle, with the options the session's
``deviceshare`` used, so the report shows what the scheduler itself counted. Whole
``nvidia.com/gpu`` stays a plain resource there, so it is counted per node, not per card.

Fragmentation is the ``fragmentation`` plugin's measure (FGD, ATC'23): a node's *fragment* is
the free GPU capacity that the pod shapes seen so far could not use there, weighted by how often
each shape was seen; the cluster's figure is the sum over nodes, in cards, and its share of the
free GPU capacity. It counts the cards ``deviceshare`` tracks, as the plugin does.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace

import numpy as np

from stromboli.core.scheduler.api.resource import CPU, MEMORY
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.plugins.fragmentation import (
    CHUNK_ELEMENTS,
    card_layout,
    cards_free,
    pod_shape,
)
from stromboli.core.scheduler.scheduler import Scheduler
from stromboli.core.scheduler.util.devices import gpushare
from stromboli.core.scheduler.util.devices.fragmentation import (
    FULL,
    PodShape,
    WorkloadMix,
    expected_fragments,
    mix_arrays,
)
from stromboli.core.scheduler.util.devices.inventory import (
    GPU_PRODUCT_LABEL,
    DeviceInventory,
    DeviceOptions,
    Held,
    NodeDevices,
)
from stromboli.core.scheduler.util.devices.mig import Geometry
from stromboli.core.scheduler.util.devices.request import NVIDIA_GPU

#: Shapes kept in the sampler's workload mix: the plugin's default ``fragmentation.maxShapes``.
MIX_SHAPES = 64
#: Card mode shown for Volcano's legacy memory-share cards (``volcano.sh/gpu-memory``).
SHARE_MODE = "gpu-share"


@dataclass(frozen=True, slots=True)
class GpuSample:
    """The cluster's GPUs at one time. Amounts in cards unless said otherwise."""

    time: float
    #: Cards in the cluster: tracked cards plus whole ``nvidia.com/gpu`` allocatable.
    gpus: float
    #: Cards held whole: ``nvidia.com/gpu`` in use and ``volcano.sh/gpu-number`` cards.
    whole: float
    #: Cards some pod holds part of (vGPU or memory share, MIG excluded).
    shared_cards: int
    #: Fraction (0..1) of tracked cards' memory, and of vGPU cards' cores, in use.
    memory: float
    cores: float
    #: MIG instances in use, and on how many cards.
    mig_instances: int
    mig_cards: int
    #: Allocation in card-equivalents: whole cards plus each tracked card's larger used
    #: fraction (memory or cores).
    allocated: float
    #: Free capacity of tracked cards, and the part the workload mix cannot use.
    free: float
    fragmented: float

    @property
    def fragmentation(self) -> float:
        """Share of free tracked GPU capacity the workload mix cannot use (0..1)."""
        return self.fragmented / self.free if self.free > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Holding:
    """What one pod holds of one card."""

    pod: str
    memory: int
    #: Cores (% of SMs) for a vGPU; -1 where the card model has no core share (legacy share).
    cores: int = -1
    #: The MIG instance (``2g.10gb``) and its position, for a MIG card.
    instance: str = ""
    position: int = -1


@dataclass(slots=True)
class CardView:
    index: int
    uuid: str
    model: str
    mode: str
    healthy: bool
    memory_used: int
    memory_total: int
    cores_used: int
    cores_total: int
    #: Free fraction a pod could still use (the plugin's measure: smaller of free memory and
    #: free cores; a MIG card's largest free instance).
    free: float
    mig_group: str = ""
    holdings: list[Holding] = field(default_factory=list)


@dataclass(slots=True)
class WholeGpus:
    """A node's ``nvidia.com/gpu``: a plain resource, counted, not tracked per card."""

    model: str
    total: float
    used: float
    #: (pod, cards) of each pod holding some.
    pods: list[tuple[str, float]] = field(default_factory=list)


@dataclass(slots=True)
class NodeGpus:
    name: str
    cards: list[CardView] = field(default_factory=list)
    whole: WholeGpus | None = None
    free: float = 0.0
    fragmented: float = 0.0


def session_options(scheduler: Scheduler) -> DeviceOptions:
    """The device options of the last session's ``deviceshare``; without it the scheduler
    tracks no card, and neither does the report."""
    session = scheduler.last_session
    plugin = session.plugins.get("deviceshare") if session is not None else None
    options = getattr(plugin, "options", None)
    return options if isinstance(options, DeviceOptions) else DeviceOptions()


def _whole_column(cache: SchedulerCache) -> int | None:
    return cache.nodes.index.columns.get(NVIDIA_GPU)


def _counted(status: TaskStatus) -> bool:
    return bool(status & (TaskStatus.RUNNING | TaskStatus.BOUND | TaskStatus.BINDING))


class ReportMix(WorkloadMix):
    """The workload mix for the report: re-derived whenever the count of pods seen grew by a
    tenth (the plugin waits for it to double, to keep its score caches). Each change of the
    mix makes every GPU node be measured again, so it changes with every pod only while few
    were seen (under ten), and a handful of times per decade of pods after that."""

    def observe(self, shape: PodShape) -> None:
        super().observe(shape)
        if self._derived_at != self.total and self.total >= 1.1 * self._derived_at:
            self._derive()


#: Per-node figures kept in :attr:`GpuSampler._stats` (columns).
_CARDS, _WHOLE, _SHARED, _MEM_USED, _MEM_TOTAL, _CORES_USED, _CORES_TOTAL = range(7)
_MIG_INSTANCES, _MIG_CARDS, _ALLOCATED = range(7, 10)
_STATS = 10


class GpuSampler:
    """Samples the cluster's GPUs after each cycle. It keeps the workload mix (every pod of
    ours seen so far) and one :class:`DeviceInventory`, brought up to date node by node: only
    nodes whose use changed since the last sample are read again (their pods given back and
    adopted), so a sample costs what changed, not the cluster."""

    def __init__(self, mix_shapes: int = MIX_SHAPES) -> None:
        self.mix: WorkloadMix = ReportMix(mix_shapes)
        self._seen: set[str] = set()
        self._inventory: DeviceInventory | None = None
        self._options: DeviceOptions | None = None
        self._names: list[str] = []
        self._node_objects: list[dict] = []
        self._versions = np.zeros(0, dtype=np.int64)
        #: Per node: the tasks (by uid) counted at the last sample.
        self._tasks: list[dict[str, object]] = []
        self._epoch = -1
        # Per node, laid out as the fragmentation plugin does: card memory and model, free
        # milli per card, the node's figures, expected fragment and free capacity (cards).
        self._memory = np.zeros((0, 0), dtype=np.int64)
        self._types = np.zeros((0, 0), dtype=object)
        self._free = np.zeros((0, 0), dtype=np.int32)
        self._stats = np.zeros((0, _STATS))
        self._fragments = np.zeros(0)
        self._last: GpuSample | None = None
        #: Whether any node had GPUs at some sample (the report shows GPUs only then).
        self.any_gpus = False

    # -- state ---------------------------------------------------------------------------

    def _follow_plugin(self, scheduler: Scheduler) -> None:
        """Weigh the mix's shapes as the session's ``fragmentation`` plugin does (its
        ``by``, when the plugin has that choice), so the report measures what it scores."""
        session = scheduler.last_session
        plugin = session.plugins.get("fragmentation") if session is not None else None
        by = getattr(getattr(plugin, "mix", None), "by", None)
        current = getattr(self.mix, "by", None)
        if by is not None and current is not None and current != by:
            setattr(self.mix, "by", by)  # noqa: B010  (only mixes that have the choice)
            if self.mix.shapes:
                self.mix._derive()  # the weights change; the shapes and counts stay

    def _observe(self, cache: SchedulerCache, inventory: DeviceInventory) -> None:
        for uid in cache.pods.keys() - self._seen:
            record = cache.pods[uid]
            self._seen.add(uid)
            if record.job_id is not None:
                self.mix.observe(pod_shape(record.task, inventory.request(record.task)))

    def _rebuild(self, scheduler: Scheduler, options: DeviceOptions) -> DeviceInventory:
        nodes = scheduler.cache.nodes
        inventory = DeviceInventory(nodes, options)
        self._inventory, self._options = inventory, options
        self._names = list(nodes.position)
        self._node_objects = [info.node for info in nodes.nodes]
        self._tasks = [dict(info.tasks) for info in nodes.nodes]
        count = len(nodes)
        width = max((len(card_layout(d)) for d in inventory.devices if d is not None), default=0)
        self._memory = np.zeros((count, width), dtype=np.int64)
        self._types = np.full((count, width), "", dtype=object)
        for position, devices in enumerate(inventory.devices):
            if devices is not None:
                for column, (size, kind) in enumerate(card_layout(devices)):
                    self._memory[position, column] = size
                    self._types[position, column] = kind
        self._free = np.zeros((count, width), dtype=np.int32)
        self._stats = np.zeros((count, _STATS))
        self._fragments = np.zeros(count)
        self._epoch = -1
        return inventory

    def _sync(self, scheduler: Scheduler) -> tuple[DeviceInventory, np.ndarray | None]:
        """The inventory brought up to date, and the nodes read again (None: all of them)."""
        nodes = scheduler.cache.nodes
        options = session_options(scheduler)
        inventory = self._inventory
        if (
            inventory is None
            or options != self._options
            or len(nodes) != len(self._names)
            or list(nodes.position) != self._names
        ):
            inventory = self._rebuild(scheduler, options)
            self._versions = nodes.versions.copy()
            return inventory, None
        stale = np.flatnonzero(nodes.versions != self._versions)
        for position in stale.tolist():
            info = nodes.nodes[position]
            if info.node is not self._node_objects[position]:
                # The node itself changed (its registration may have): read every node.
                inventory = self._rebuild(scheduler, options)
                self._versions = nodes.versions.copy()
                return inventory, None
            before = self._tasks[position]
            for uid in before.keys() - info.tasks.keys():
                held = inventory.held.get(uid)
                if held is not None and held.position == position:  # not moved and re-adopted
                    inventory.release(uid)
            for uid, task in info.tasks.items():
                if before.get(uid) is not task or uid not in inventory.held:
                    inventory.adopt(task, position)
            self._tasks[position] = dict(info.tasks)
        self._versions = nodes.versions.copy()
        return inventory, stale

    def inventory(self, scheduler: Scheduler) -> DeviceInventory:
        """The cards as the scheduler counts them now."""
        inventory, stale = self._sync(scheduler)
        self._refresh(scheduler, inventory, stale)
        return inventory

    def _refresh(
        self, scheduler: Scheduler, inventory: DeviceInventory, stale: np.ndarray | None
    ) -> bool:
        """Read the stale nodes' cards and fragments again (all when the mix changed);
        whether anything was read."""
        self._follow_plugin(scheduler)
        self._observe(scheduler.cache, inventory)
        rows = np.flatnonzero(inventory.has_devices) if stale is None else stale
        for position in rows.tolist():
            devices = inventory.devices[position]
            if devices is None:
                continue
            free = cards_free(devices)
            self._free[position, :] = 0
            self._free[position, : len(free)] = free
            self._stats[position] = _node_stats(devices)
        mixed = self.mix.epoch != self._epoch
        if mixed:
            self._epoch = self.mix.epoch
            rows = np.flatnonzero(inventory.has_devices)
        else:
            rows = rows[inventory.has_devices[rows]] if rows.shape[0] else rows
        if rows.shape[0]:
            self._fragments[rows] = self._expected(scheduler, rows)
        return mixed or bool(stale is None or stale.shape[0])

    def sample(self, now: float, scheduler: Scheduler) -> GpuSample | None:
        """The GPUs now, or None while no node has any."""
        cache = scheduler.cache
        inventory, stale = self._sync(scheduler)
        changed = self._refresh(scheduler, inventory, stale)
        if self._last is not None and not changed:
            self._last = replace(self._last, time=now)
            return self._last
        column = _whole_column(cache)
        whole_total = float(cache.nodes.allocatable[:, column].sum()) if column is not None else 0.0
        if not inventory.has_devices.any() and whole_total <= 0:
            self._last = None
            return None
        self.any_gpus = True
        whole_used = float(cache.nodes.used[:, column].sum()) if column is not None else 0.0
        totals = self._stats.sum(axis=0)
        self._last = GpuSample(
            time=now,
            gpus=float(totals[_CARDS]) + whole_total,
            whole=float(totals[_WHOLE]) + whole_used,
            shared_cards=int(totals[_SHARED]),
            memory=_ratio(totals[_MEM_USED], totals[_MEM_TOTAL]),
            cores=_ratio(totals[_CORES_USED], totals[_CORES_TOTAL]),
            mig_instances=int(totals[_MIG_INSTANCES]),
            mig_cards=int(totals[_MIG_CARDS]),
            allocated=float(totals[_ALLOCATED]) + whole_used,
            free=float(self._free.sum()) / FULL,
            fragmented=float(self._fragments.sum()),
        )
        return self._last

    # -- fragmentation ----------------------------------------------------------------------

    def _expected(self, scheduler: Scheduler, rows: np.ndarray) -> np.ndarray:
        """Expected fragment (cards) of the nodes at ``rows`` under the mix seen so far."""
        if not self.mix.shapes:
            return np.zeros(rows.shape[0])
        nodes = scheduler.cache.nodes
        cpu_col, mem_col = nodes.index.columns.get(CPU), nodes.index.columns.get(MEMORY)
        idle = nodes.idle_now[rows]
        cpu = idle[:, cpu_col] if cpu_col is not None else np.zeros(rows.shape[0])
        mem = idle[:, mem_col] if mem_col is not None else np.zeros(rows.shape[0])
        width = max(1, self._free.shape[1])
        out = np.zeros(rows.shape[0])
        step = max(1, CHUNK_ELEMENTS // (max(1, len(self.mix.shapes)) * width))
        for start in range(0, rows.shape[0], step):
            part = rows[start : start + step]
            arrays = mix_arrays(self.mix, self._memory[part], self._types[part])
            chunk = slice(start, start + step)
            fragments = expected_fragments(
                self._free[part], cpu[chunk], mem[chunk], arrays.need, arrays
            )
            out[chunk] = fragments / FULL
        return out

    def fragments(self, scheduler: Scheduler) -> tuple[np.ndarray, np.ndarray]:
        """Per node (all of the cache's, in order): expected fragment and free capacity, in
        cards, under the mix seen so far."""
        self.inventory(scheduler)
        return self._fragments.copy(), self._free.sum(axis=1) / FULL

    # -- the map at the end ------------------------------------------------------------------

    def node_map(self, scheduler: Scheduler) -> list[NodeGpus]:
        """Every node with GPUs, card by card, as the scheduler counts them now."""
        cache = scheduler.cache
        inventory = self.inventory(scheduler)
        fragments, free = self._fragments, self._free.sum(axis=1) / FULL
        by_position: dict[int, list[tuple[str, Held]]] = {}
        pods = {uid: record.task.key for uid, record in cache.pods.items()}
        for uid, held in inventory.held.items():
            by_position.setdefault(held.position, []).append((pods.get(uid, uid), held))
        column = _whole_column(cache)
        out: list[NodeGpus] = []
        for info in cache.nodes.nodes:
            position = info.position
            entry = NodeGpus(
                info.name, free=float(free[position]), fragmented=float(fragments[position])
            )
            devices = inventory.devices[position]
            if devices is not None:
                entry.cards = _cards(devices, by_position.get(position, []))
            total = float(cache.nodes.allocatable[position, column]) if column is not None else 0.0
            if total > 0:
                assert column is not None
                holders = [
                    (task.key, float(task.resreq.amounts.get(NVIDIA_GPU, 0.0)))
                    for task in info.tasks.values()
                    if _counted(task.status) and task.resreq.amounts.get(NVIDIA_GPU, 0.0) > 0
                ]
                entry.whole = WholeGpus(
                    info.labels.get(GPU_PRODUCT_LABEL, ""),
                    total,
                    float(cache.nodes.used[position, column]),
                    sorted(holders),
                )
            if entry.cards or entry.whole is not None:
                out.append(entry)
        return out


def _ratio(used: float, total: float) -> float:
    return float(used / total) if total else 0.0


def _node_stats(devices: NodeDevices) -> list[float]:
    """One node's figures, in the columns of :attr:`GpuSampler._stats`."""
    row = [0.0] * _STATS
    for card in devices.cards:
        if not card.healthy:
            continue
        row[_CARDS] += 1
        row[_MEM_USED] += card.used_memory
        row[_MEM_TOTAL] += card.memory
        if card.mig is not None:
            row[_MIG_INSTANCES] += len(card.mig.taken)
            row[_MIG_CARDS] += bool(card.mig.taken)
            row[_ALLOCATED] += _ratio(card.used_memory, card.memory)
            continue
        row[_CORES_USED] += card.used_cores
        row[_CORES_TOTAL] += card.cores
        row[_SHARED] += bool(card.used_count)
        row[_ALLOCATED] += max(
            _ratio(card.used_memory, card.memory), _ratio(card.used_cores, card.cores)
        )
    for share in devices.share:
        if not share.healthy:
            continue
        row[_CARDS] += 1
        row[_MEM_USED] += share.used_memory
        row[_MEM_TOTAL] += share.memory
        if _whole_share(share):
            row[_WHOLE] += 1
        elif share.used_memory:
            row[_SHARED] += 1
        row[_ALLOCATED] += _ratio(share.used_memory, share.memory)
    return row


def _whole_share(card: gpushare.ShareCard) -> bool:
    """A legacy card one ``gpu-number`` pod holds (it takes the card's whole memory)."""
    return bool(card.memory) and len(card.holders) == 1 and card.used_memory >= card.memory


def _cards(devices: NodeDevices, held: list[tuple[str, Held]]) -> list[CardView]:
    free = cards_free(devices)
    views: list[CardView] = []
    for column, card in enumerate(devices.cards):
        view = CardView(
            index=card.index,
            uuid=card.uuid,
            model=card.type,
            mode=card.mode,
            healthy=card.healthy,
            memory_used=card.used_memory,
            memory_total=card.memory,
            cores_used=card.used_cores,
            cores_total=card.cores if card.mig is None else 0,
            free=free[column] / FULL,
            mig_group=card.mig.group if card.mig is not None else "",
        )
        instances: tuple[Geometry, ...] = ()
        if card.mig is not None:
            group = card.mig.group_named(card.mig.group)
            instances = group.instances() if group is not None else ()
        for pod, entry in held:
            for grants in entry.plan.assignment:
                for grant in grants:
                    if grant.uuid != card.uuid:
                        continue
                    name = ""
                    if 0 <= grant.mig_position < len(instances):
                        name = instances[grant.mig_position].name
                    view.holdings.append(
                        Holding(pod, grant.memory, grant.cores, name, grant.mig_position)
                    )
        view.holdings.sort(key=lambda h: (h.position, h.pod))
        views.append(view)
    offset = len(devices.cards)
    for column, share in enumerate(devices.share):
        view = CardView(
            index=share.id,
            uuid=str(share.id),
            model="",
            mode=SHARE_MODE,
            healthy=share.healthy,
            memory_used=share.used_memory,
            memory_total=share.memory,
            cores_used=0,
            cores_total=0,
            free=free[offset + column] / FULL,
        )
        for pod, entry in held:
            if share.id in entry.plan.share_ids:
                amount = share.memory if entry.request.gpu_number else entry.request.gpu_memory
                view.holdings.append(Holding(pod, amount))
        view.holdings.sort(key=lambda h: h.pod)
        views.append(view)
    return views


#: One sampler per simulated scheduler, living as long as it: the timeline samples through it
#: each cycle and the report reads its workload mix at the end.
_SAMPLERS: weakref.WeakKeyDictionary[Scheduler, GpuSampler] = weakref.WeakKeyDictionary()


def sampler_for(scheduler: Scheduler) -> GpuSampler:
    """The GPU sampler of ``scheduler``'s run (made on first use)."""
    sampler = _SAMPLERS.get(scheduler)
    if sampler is None:
        sampler = _SAMPLERS[scheduler] = GpuSampler()
    return sampler


__all__ = [
    "CardView",
    "GpuSample",
    "GpuSampler",
    "Holding",
    "NodeGpus",
    "WholeGpus",
    "sampler_for",
    "session_options",
]

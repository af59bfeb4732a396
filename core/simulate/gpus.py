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


class GpuSampler:
    """Samples the cluster's GPUs after each cycle. It keeps the workload mix (every pod of
    ours seen so far) and reads the cards again only when some node's use changed."""

    def __init__(self, mix_shapes: int = MIX_SHAPES) -> None:
        self.mix = WorkloadMix(mix_shapes)
        self._seen: set[str] = set()
        self._inventory: DeviceInventory | None = None
        self._key: tuple[object, ...] | None = None
        self._last: GpuSample | None = None
        #: Whether any node had GPUs at some sample (the report shows GPUs only then).
        self.any_gpus = False

    # -- state ---------------------------------------------------------------------------

    def _observe(self, cache: SchedulerCache, inventory: DeviceInventory) -> None:
        for uid in cache.pods.keys() - self._seen:
            record = cache.pods[uid]
            self._seen.add(uid)
            if record.job_id is not None:
                self.mix.observe(pod_shape(record.task, inventory.request(record.task)))

    def inventory(self, scheduler: Scheduler) -> DeviceInventory:
        """The cards as the scheduler counts them now (rebuilt only after a change)."""
        nodes = scheduler.cache.nodes
        options = session_options(scheduler)
        key = (options, list(nodes.position), nodes.versions.tobytes())
        if self._inventory is None or key != self._key:
            self._inventory = DeviceInventory(nodes, options)
            self._key = key
        return self._inventory

    def sample(self, now: float, scheduler: Scheduler) -> GpuSample | None:
        """The GPUs now, or None while no node has any."""
        cache = scheduler.cache
        before = self._key
        inventory = self.inventory(scheduler)
        epoch = self.mix.epoch
        self._observe(cache, inventory)
        if self._last is not None and before == self._key and epoch == self.mix.epoch:
            self._last = replace(self._last, time=now)
            return self._last
        column = _whole_column(cache)
        whole_total = float(cache.nodes.allocatable[:, column].sum()) if column is not None else 0.0
        if not inventory.has_devices.any() and whole_total <= 0:
            self._last = None
            return None
        self.any_gpus = True
        whole_used = float(cache.nodes.used[:, column].sum()) if column is not None else 0.0
        fragments, free = self.fragments(scheduler, inventory)
        self._last = _cluster_sample(
            now, inventory, whole_total, whole_used, float(free.sum()), float(fragments.sum())
        )
        return self._last

    # -- fragmentation ----------------------------------------------------------------------

    def fragments(
        self, scheduler: Scheduler, inventory: DeviceInventory
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per node (all of the cache's, in order): expected fragment and free capacity, in
        cards, under the mix seen so far."""
        count = len(inventory.devices)
        fragments, free_cards = np.zeros(count), np.zeros(count)
        rows = np.flatnonzero(inventory.has_devices)
        if not rows.shape[0]:
            return fragments, free_cards
        present = [(r, d) for r in rows.tolist() if (d := inventory.devices[r]) is not None]
        width = max(len(card_layout(d)) for _, d in present)
        memory = np.zeros((rows.shape[0], width), dtype=np.int64)
        types = np.full((rows.shape[0], width), "", dtype=object)
        free = np.zeros((rows.shape[0], width), dtype=np.int32)
        for i, (_, devices) in enumerate(present):
            for column, (size, kind) in enumerate(card_layout(devices)):
                memory[i, column], types[i, column] = size, kind
            for column, milli in enumerate(cards_free(devices)):
                free[i, column] = milli
        free_cards[rows] = free.sum(axis=1) / FULL
        if not self.mix.shapes:
            return fragments, free_cards
        nodes = scheduler.cache.nodes
        cpu_col, mem_col = nodes.index.columns.get(CPU), nodes.index.columns.get(MEMORY)
        idle = nodes.idle_now[rows]
        cpu = idle[:, cpu_col] if cpu_col is not None else np.zeros(rows.shape[0])
        mem = idle[:, mem_col] if mem_col is not None else np.zeros(rows.shape[0])
        arrays = mix_arrays(self.mix, memory, types)
        step = max(1, CHUNK_ELEMENTS // (max(1, arrays.weights.size) * max(1, width)))
        for start in range(0, rows.shape[0], step):
            part = slice(start, start + step)
            fragments[rows[part]] = (
                expected_fragments(
                    free[part], cpu[part], mem[part], arrays.need[:, part, :], arrays
                )
                / FULL
            )
        return fragments, free_cards

    # -- the map at the end ------------------------------------------------------------------

    def node_map(self, scheduler: Scheduler) -> list[NodeGpus]:
        """Every node with GPUs, card by card, as the scheduler counts them now."""
        cache = scheduler.cache
        inventory = self.inventory(scheduler)
        self._observe(cache, inventory)
        fragments, free = self.fragments(scheduler, inventory)
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


def _cluster_sample(
    now: float,
    inventory: DeviceInventory,
    whole_total: float,
    whole_used: float,
    free: float,
    fragmented: float,
) -> GpuSample:
    cards = whole_total
    whole = whole_used
    shared = mig_instances = mig_cards = 0
    memory_used = memory_total = cores_used = cores_total = 0
    allocated = whole_used
    for devices in inventory.devices:
        if devices is None:
            continue
        for card in devices.cards:
            if not card.healthy:
                continue
            cards += 1
            memory_used += card.used_memory
            memory_total += card.memory
            if card.mig is not None:
                mig_instances += len(card.mig.taken)
                mig_cards += bool(card.mig.taken)
                allocated += card.used_memory / card.memory if card.memory else 0.0
                continue
            cores_used += card.used_cores
            cores_total += card.cores
            shared += bool(card.used_count)
            allocated += max(
                card.used_memory / card.memory if card.memory else 0.0,
                card.used_cores / card.cores if card.cores else 0.0,
            )
        for share in devices.share:
            if not share.healthy:
                continue
            cards += 1
            memory_used += share.used_memory
            memory_total += share.memory
            if _whole_share(share):
                whole += 1
            elif share.used_memory:
                shared += 1
            allocated += share.used_memory / share.memory if share.memory else 0.0
    return GpuSample(
        time=now,
        gpus=cards,
        whole=whole,
        shared_cards=shared,
        memory=memory_used / memory_total if memory_total else 0.0,
        cores=cores_used / cores_total if cores_total else 0.0,
        mig_instances=mig_instances,
        mig_cards=mig_cards,
        allocated=allocated,
        free=free,
        fragmented=fragmented,
    )


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

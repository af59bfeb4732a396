"""What a session starts from: a consistent copy of the cache for one cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.api.queue import QueueInfo


@dataclass(slots=True)
class Snapshot:
    jobs: dict[str, JobInfo]
    queues: dict[str, QueueInfo]
    nodes: NodeTable
    #: PriorityClass name → value.
    priority_classes: dict[str, int] = field(default_factory=dict)
    #: Namespace name → its ResourceQuota objects.
    resource_quotas: dict[str, list[dict]] = field(default_factory=dict)
    #: PodDisruptionBudgets (raw objects).
    pdbs: list[dict] = field(default_factory=list)
    #: HyperNodes (raw objects).
    hypernodes: dict[str, dict] = field(default_factory=dict)
    #: Numatopologies by name (= node name), raw objects.
    numatopologies: dict[str, dict] = field(default_factory=dict)
    #: Device-config ConfigMaps' ``data`` by (namespace, name), as ``deviceshare`` names them.
    device_configs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    #: Which of the cache's snapshots this is (0: not the cache's), for ``SchedulerCache.release``.
    serial: int = 0

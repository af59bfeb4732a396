"""The device-config ConfigMaps the ``deviceshare`` plugins name, read for the sessions.

Volcano's ``deviceshare`` reads its device configuration (``volcano-vgpu-device-config`` in
``kube-system`` unless ``deviceshare.KnownGeometriesCMName``/``Namespace`` say otherwise; the
``device-config.yaml`` key, its ``nvidia.knownMigGeometries`` giving each GPU model's MIG
layouts) from the API server. Here the scheduler fetches each named ConfigMap with one GET at
most every :data:`REFRESH_SECONDS` rather than watching every ConfigMap of the cluster, and
hands the data to the sessions through the snapshot. A ConfigMap that cannot be fetched keeps
the last data read; one that is gone is forgotten (the built-in geometries apply again).
"""

from __future__ import annotations

import logging

from stromboli.core.clock import Clock
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.scheduler.framework.options import SchedulerConfig
from stromboli.core.scheduler.plugins.deviceshare import (
    GEOMETRIES_CM_NAME,
    GEOMETRIES_CM_NAMESPACE,
    VGPU_ENABLE,
    DeviceSharePlugin,
)

log = logging.getLogger(__name__)

#: Longest time between two reads of one device-config ConfigMap.
REFRESH_SECONDS = 30.0
DEFAULT_NAME = str(DeviceSharePlugin.known_arguments[GEOMETRIES_CM_NAME])
DEFAULT_NAMESPACE = str(DeviceSharePlugin.known_arguments[GEOMETRIES_CM_NAMESPACE])

Key = tuple[str, str]


def wanted(config: SchedulerConfig) -> set[Key]:
    """(namespace, name) of the device-config ConfigMap of each ``deviceshare`` with vGPUs."""
    keys: set[Key] = set()
    for tier in config.tiers:
        for option in tier:
            if option.name != DeviceSharePlugin.name:
                continue
            if not option.arguments.get_bool(VGPU_ENABLE, False):
                continue
            name = option.arguments.get_str(GEOMETRIES_CM_NAME, DEFAULT_NAME) or DEFAULT_NAME
            namespace = (
                option.arguments.get_str(GEOMETRIES_CM_NAMESPACE, DEFAULT_NAMESPACE)
                or DEFAULT_NAMESPACE
            )
            keys.add((namespace, name))
    return keys


class DeviceConfigSource:
    """The ``data`` of the device-config ConfigMaps, refreshed as the cycles go."""

    def __init__(self, store: ClusterStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        #: (namespace, name) → the ConfigMap's ``data``.
        self.configs: dict[Key, dict[str, str]] = {}
        self._read_at: dict[Key, float] = {}

    async def refresh(self, config: SchedulerConfig) -> dict[Key, dict[str, str]]:
        now = self.clock.monotonic()
        keys = wanted(config)
        for key in list(self.configs):
            if key not in keys:
                self.configs.pop(key, None)
                self._read_at.pop(key, None)
        for key in keys:
            read_at = self._read_at.get(key)
            if read_at is not None and now - read_at < REFRESH_SECONDS:
                continue
            self._read_at[key] = now
            namespace, name = key
            try:
                found = await self.store.get("v1", "ConfigMap", name, namespace)
            except NotFoundError:
                self.configs.pop(key, None)
                continue
            except ApiError as err:
                log.warning("ConfigMap %s/%s not read (%s); last data kept", namespace, name, err)
                continue
            data = found.get("data") or {}
            self.configs[key] = {str(k): v for k, v in data.items() if isinstance(v, str)}
        return self.configs

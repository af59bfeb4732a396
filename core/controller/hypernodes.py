"""HyperNode discovery from node labels: the ``label`` source of Volcano's
``networkTopologyDiscovery``.

Volcano's controller ConfigMap (``volcano-controller-configmap``, key
``volcano-controller.conf``) lists discovery sources; the ``label`` one names, per topology
type, a chain of node labels from the top tier down to the node itself::

    networkTopologyDiscovery:
    - source: label
      enabled: true
      config:
        networkTopologyTypes:
          gpu-fabric:
          - nodeLabel: volcano.sh/hypercluster    # tier 2
          - nodeLabel: volcano.sh/hypernode       # tier 1
          - nodeLabel: kubernetes.io/hostname     # the nodes

Each value of a label above the last becomes a HyperNode: the lowest of them tier 1 with the
nodes carrying that value as members, each higher one with the HyperNodes below it. Nodes
without every label of a chain are left out of it. Discovered HyperNodes carry the label
``volcano.sh/network-topology-source: label`` and their ``status.nodeCount``; this controller
creates, updates and deletes only those, never a HyperNode someone else wrote. Names are
``<type>-t<tier>-<value>`` (lower-cased, other characters as ``-``, long ones shortened with a
digest), so two tiers or types sharing a value never collide.

``ufm`` and ``roce`` sources are accepted and logged as not supported here (Volcano's RoCE
source is not supported either). A ConfigMap that cannot be read changes nothing stored: the
HyperNodes already discovered stay as they are until a readable configuration says otherwise.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.durations import parse_duration
from stromboli.core.api.yamlbounds import YamlBoundsError, load_documents
from stromboli.core.clock import Clock
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.reconciler import Reconciler
from stromboli.core.events import EventRecorder

log = logging.getLogger(__name__)

CONFIG_MAP_NAME = "volcano-controller-configmap"
CONFIG_KEY = "volcano-controller.conf"
LABEL_SOURCE = "label"
#: Default ``interval`` of a source (Volcano's), and the longest this controller waits
#: before reading its ConfigMap again, whatever the interval says.
DEFAULT_INTERVAL_SECONDS = 3600.0
CONFIG_CHECK_SECONDS = 60.0
#: Bounds on what one configuration may ask for.
MAX_TYPES = 64
MAX_CHAIN = 16
MAX_NAME = 253

NODE = ("v1", "Node")
HYPERNODE = (k.TOPOLOGY_V1ALPHA1, "HyperNode")
#: The single work item: every discovered HyperNode is recomputed together.
KEY = LABEL_SOURCE


class DiscoveryConfigError(ValueError):
    """A discovery configuration that cannot be used; names the ConfigMap and the field."""


@dataclass(frozen=True, slots=True)
class LabelDiscovery:
    """The ``label`` source: topology type → node label keys, top tier first, the node's own
    label last."""

    types: Mapping[str, tuple[str, ...]]
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS


def parse_config(text: str, where: str) -> LabelDiscovery | None:
    """The enabled ``label`` source of a ``volcano-controller.conf``, or None when there is
    none; raises :class:`DiscoveryConfigError` naming ``where`` and the field."""
    try:
        documents = load_documents(text)
    except YamlBoundsError as err:
        raise DiscoveryConfigError(f"{where}: {err}") from None
    doc = documents[0] if documents else None
    if doc is None:
        return None
    if not isinstance(doc, Mapping):
        raise DiscoveryConfigError(f"{where}: the configuration is not a map")
    sources = doc.get("networkTopologyDiscovery") or []
    if not isinstance(sources, list):
        raise DiscoveryConfigError(f"{where}: networkTopologyDiscovery is not a list")
    found: LabelDiscovery | None = None
    for i, source in enumerate(sources):
        field = f"{where}: networkTopologyDiscovery[{i}]"
        if not isinstance(source, Mapping):
            raise DiscoveryConfigError(f"{field} is not a map")
        name = source.get("source")
        if source.get("enabled") is not True:
            continue
        if name != LABEL_SOURCE:
            log.warning("%s: source %r is not supported by Stromboli; skipped", field, name)
            continue
        interval = DEFAULT_INTERVAL_SECONDS
        if source.get("interval") is not None:
            try:
                interval = parse_duration(source["interval"], f"{field}.interval")
            except ValueError as err:
                raise DiscoveryConfigError(str(err)) from None
        config = source.get("config") or {}
        types = config.get("networkTopologyTypes") if isinstance(config, Mapping) else None
        if not isinstance(types, Mapping) or not types:
            raise DiscoveryConfigError(f"{field}.config.networkTopologyTypes is not a map of types")
        if len(types) > MAX_TYPES:
            raise DiscoveryConfigError(
                f"{field}.config.networkTopologyTypes: more than {MAX_TYPES} types"
            )
        chains: dict[str, tuple[str, ...]] = {}
        for type_name, chain in types.items():
            where_type = f"{field}.config.networkTopologyTypes.{type_name}"
            if not isinstance(chain, list) or not 2 <= len(chain) <= MAX_CHAIN:
                raise DiscoveryConfigError(
                    f"{where_type}: a list of 2 to {MAX_CHAIN} {{nodeLabel: ...}} entries"
                )
            keys = []
            for j, entry in enumerate(chain):
                label = entry.get("nodeLabel") if isinstance(entry, Mapping) else None
                if not isinstance(label, str) or not label or len(label) > MAX_NAME:
                    raise DiscoveryConfigError(f"{where_type}[{j}].nodeLabel is not a label key")
                keys.append(label)
            chains[str(type_name)] = tuple(keys)
        found = LabelDiscovery(chains, interval)
    return found


_UNSAFE = re.compile(r"[^a-z0-9.-]+")


def hypernode_name(type_name: str, tier: int, value: str) -> str:
    """A DNS-subdomain name for the HyperNode of ``value`` at ``tier`` of ``type_name``; a
    name that had to be changed to be one gets a digest of the original, so two values
    never share one."""
    raw = f"{type_name}-t{tier}-{value}"
    name = _UNSAFE.sub("-", raw.lower()).strip("-.")
    if name == raw and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{name[:200].rstrip('-.') or 'hypernode'}-{digest}"


def _member(kind: str, name: str) -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def desired_hypernodes(
    discovery: LabelDiscovery, nodes: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, Any]]:
    """The HyperNodes the node labels describe, by name, each with ``status.nodeCount``."""
    wanted: dict[str, dict[str, Any]] = {}
    for type_name, chain in sorted(discovery.types.items()):
        levels = chain[:-1]  # the last label is the node's own
        top = len(levels)
        members: dict[str, set[tuple[str, str]]] = {}
        tiers: dict[str, int] = {}
        counts: dict[str, set[str]] = {}
        for node_name, labels in sorted(nodes.items()):
            if any(not labels.get(key) for key in chain):
                continue
            child: tuple[str, str] = (k.MemberType.NODE, node_name)
            for depth in range(top - 1, -1, -1):
                tier = top - depth
                name = hypernode_name(type_name, tier, labels[levels[depth]])
                tiers[name] = tier
                members.setdefault(name, set()).add(child)
                counts.setdefault(name, set()).add(node_name)
                child = (k.MemberType.HYPERNODE, name)
        for name, tier in tiers.items():
            wanted[name] = {
                "apiVersion": k.TOPOLOGY_V1ALPHA1,
                "kind": "HyperNode",
                "metadata": {
                    "name": name,
                    "labels": {k.NETWORK_TOPOLOGY_SOURCE_KEY: LABEL_SOURCE},
                },
                "spec": {
                    "tier": tier,
                    "tierName": levels[top - tier],
                    "members": [_member(kind, m) for kind, m in sorted(members[name])],
                },
                "status": {"nodeCount": len(counts[name])},
            }
    return wanted


def owned(hypernode: Mapping[str, Any]) -> bool:
    labels = (hypernode.get("metadata") or {}).get("labels") or {}
    return labels.get(k.NETWORK_TOPOLOGY_SOURCE_KEY) == LABEL_SOURCE


class HyperNodeDiscovery(Reconciler[str]):
    """Keeps the label-discovered HyperNodes in step with the nodes' labels."""

    noun = "hypernode discovery"

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        namespace: str = "volcano-system",
        recorder: EventRecorder | None = None,
    ) -> None:
        super().__init__(store, clock, (NODE, HYPERNODE), recorder, "hypernode-controller")
        self.namespace = namespace
        self.nodes: dict[str, dict[str, str]] = {}
        self.hypernodes: dict[str, dict[str, Any]] = {}
        self._due = 0.0
        self._config_text: str | None = None

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        if kind == NODE:
            labels = meta.get("labels") or {}
            if event_type == "DELETED":
                self.nodes.pop(name, None)
            elif self.nodes.get(name) != labels:
                self.nodes[name] = dict(labels)
            else:
                return
        elif event_type == "DELETED":
            self.hypernodes.pop(name, None)
            if not owned(obj):
                return
        else:
            self.hypernodes[name] = obj
            if not owned(obj):
                return
        self._mark(KEY)

    async def _collect_due(self) -> None:
        if self.clock.monotonic() >= self._due:
            self._due = self.clock.monotonic() + CONFIG_CHECK_SECONDS
            self._mark(KEY)

    def next_wakeup(self) -> float | None:
        return self._due

    async def _read_config(self) -> LabelDiscovery | None:
        where = f"ConfigMap {self.namespace}/{CONFIG_MAP_NAME}"
        try:
            cm = await self.store.get("v1", "ConfigMap", CONFIG_MAP_NAME, self.namespace)
        except NotFoundError:
            return None
        text = (cm.get("data") or {}).get(CONFIG_KEY)
        if not isinstance(text, str):
            return None
        discovery = parse_config(text, f"{where}: data[{CONFIG_KEY}]")
        if discovery is not None:
            self._due = self.clock.monotonic() + min(
                CONFIG_CHECK_SECONDS, max(discovery.interval_seconds, 1.0)
            )
        return discovery

    async def _sync(self, key: str) -> None:
        try:
            discovery = await self._read_config()
        except DiscoveryConfigError as err:
            log.error("%s; discovered HyperNodes left as they are", err)
            return
        if discovery is None:
            return
        wanted = desired_hypernodes(discovery, self.nodes)
        for name, obj in wanted.items():
            await self._apply(name, obj)
        for name, current in list(self.hypernodes.items()):
            if owned(current) and name not in wanted:
                try:
                    await self.store.delete(k.TOPOLOGY_V1ALPHA1, "HyperNode", name)
                    self.writes += 1
                except NotFoundError:
                    pass

    async def _apply(self, name: str, obj: dict[str, Any]) -> None:
        current = self.hypernodes.get(name)
        try:
            if current is None:
                made = await self.store.create({k: v for k, v in obj.items() if k != "status"})
                self.writes += 1
                current = made
            elif not owned(current):
                log.warning("HyperNode %s exists and is not discovered by label; left alone", name)
                return
            elif current.get("spec") != obj["spec"]:
                meta = {**current["metadata"], "labels": obj["metadata"]["labels"]}
                current = await self.store.update(
                    {**current, "metadata": meta, "spec": obj["spec"]}
                )
                self.writes += 1
            if (current.get("status") or {}).get("nodeCount") != obj["status"]["nodeCount"]:
                status = {**(current.get("status") or {}), **obj["status"]}
                current = await self.store.update_status({**current, "status": status})
                self.writes += 1
            self.hypernodes[name] = current
        except ApiError as err:
            log.warning("HyperNode %s: could not write the discovered topology: %s", name, err)

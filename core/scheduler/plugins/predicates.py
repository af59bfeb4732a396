"""The ``predicates`` plugin: kube-scheduler's node filters, as Volcano wraps them.

Order per node (the first failing filter names the reason, as in Volcano): pod count,
unschedulable, node affinity/selector, taints, host ports, inter-pod affinity, topology spread.
The static part (unschedulable, node affinity, taints) depends only on the pod shape and node
facts, so its ``Filter`` is built once per shape while no node changes (kept with the node
index across sessions) and returned as is, never to be modified, while nothing dynamic
applies; dynamic filters run only when the pod asks for ports, pod (anti-)affinity or
spreading, when a placed pod has required anti-affinity, or when some node is full of pods.
Volume and DRA filters have no meaning without volume objects in the snapshot; their switches
are accepted and ignored.
"""

from __future__ import annotations

from typing import ClassVar

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.kube import (
    nodeaffinity,
    podaffinity,
    podcount,
    ports,
    spread,
    unschedulable,
)
from stromboli.core.scheduler.util.kube.podspec import PodSpecInfo, spec_of
from stromboli.core.scheduler.util.kube.state import SessionState, StaticMasks


class PredicatesPlugin(Plugin):
    name = "predicates"
    known_arguments: ClassVar[dict[str, object]] = {
        "predicate.NodeAffinityEnable": True,
        "predicate.NodePortsEnable": True,
        "predicate.TaintTolerationEnable": True,
        "predicate.PodAffinityEnable": True,
        "predicate.NodeVolumeLimitsEnable": True,
        "predicate.VolumeZoneEnable": True,
        "predicate.PodTopologySpreadEnable": True,
        "predicate.VolumeBindingEnable": True,
        "predicate.CacheEnable": False,
        "predicate.DynamicResourceAllocationEnable": False,
        "volumebinding.weight": 1,
        "volumebinding.shape": "",
        "volumebinding.bindTimeoutSeconds": 600,
        "dynamicresources.filterTimeoutSeconds": 10,
    }

    def on_session_open(self, ssn: Session) -> None:
        args = self.arguments
        self.node_affinity = args.get_bool("predicate.NodeAffinityEnable", True)
        self.node_ports = args.get_bool("predicate.NodePortsEnable", True)
        self.taint_toleration = args.get_bool("predicate.TaintTolerationEnable", True)
        self.pod_affinity = args.get_bool("predicate.PodAffinityEnable", True)
        self.topology_spread = args.get_bool("predicate.PodTopologySpreadEnable", True)
        self.state = SessionState.of(ssn)
        self._flags = (self.node_affinity, self.taint_toleration)
        self._filters: dict[str, Filter] = {}
        self._asks: dict[str, bool] = {}
        ssn.register(ExtensionPoint.PRE_PREDICATE, self.name, self.pre_predicate)
        ssn.register(ExtensionPoint.PREDICATE, self.name, self.predicate)

    def pre_predicate(self, task: TaskInfo) -> str | None:
        """Reject pods whose affinity or spread terms cannot be read."""
        errors = spec_of(task).errors
        return f"invalid pod spec: {'; '.join(errors)}" if errors else None

    def predicate(self, task: TaskInfo) -> Filter:
        spec = spec_of(task)
        static = self._filters.get(task.shape)
        if static is None:
            static = self._filters[task.shape] = self.state.nodes.memo(
                ("filter", task.shape, self._flags), lambda: self._static_filter(task, spec)
            )
        if not self._dynamic(task, spec):
            return static
        state = self.state
        result = Filter.all_pass(state.nodes.size)
        if state.room.full:
            result.fail(state.room.full_mask(), podcount.REASON)
        for mask, reason, unresolvable in static.reasons:
            result.fail(mask & result.passed, reason, unresolvable)
        if self.node_ports and spec.ports:
            result.fail(state.ports.conflicts(spec.ports) & result.passed, ports.REASON)
        if self.pod_affinity:
            podaffinity.apply_filter(result, state.nodes, state.pods, task.shape, spec)
        if self.topology_spread and spec.spread_hard:
            spread.apply_filter(result, state.nodes, state.pods, spec, state.static(task, spec))
        return result

    def _dynamic(self, task: TaskInfo, spec: PodSpecInfo) -> bool:
        """Whether anything beyond the shape's static filter can fail a node right now."""
        asks = self._asks.get(task.shape)
        if asks is None:
            asks = self._asks[task.shape] = self._asks_dynamic(spec)
        if asks:
            return True
        state = self.state
        return bool(
            self.pod_affinity
            and state.pods.anti_shapes
            and state.pods.existing_anti_terms(task.shape, spec)
        ) or (state.room.full > 0)

    def _asks_dynamic(self, spec: PodSpecInfo) -> bool:
        """Whether the pod itself asks for a filter that depends on placed pods (ports,
        inter-pod affinity, hard spreading): fixed per shape, so kept per shape."""
        return (
            bool(self.node_ports and spec.ports)
            or bool(self.topology_spread and spec.spread_hard)
            or bool(self.pod_affinity and spec.has_pod_affinity)
        )

    def _static_filter(self, task: TaskInfo, spec: PodSpecInfo) -> Filter:
        masks: StaticMasks = self.state.static(task, spec)
        result = Filter.all_pass(self.state.nodes.size)
        result.fail(masks.unschedulable, unschedulable.REASON, unresolvable=True)
        if self.node_affinity:
            result.fail(~masks.affinity_ok & result.passed, nodeaffinity.REASON, unresolvable=True)
        if self.taint_toleration:
            for mask, reason in masks.taint_failures:
                result.fail(mask & result.passed, reason, unresolvable=True)
        return result

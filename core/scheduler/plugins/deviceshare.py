"""The ``deviceshare`` plugin: GPUs shared by memory, HAMi vGPUs and dynamic MIG, card by card.

Predicate: a task that asks for shared devices passes only nodes where some card (or set of
cards) holds it now — memory, cores, vGPU slots, a free MIG instance — after the type and UUID
filters, the PodGroup spread policy and the exclusivity rules. Allocating a task picks its
cards (``deviceshare.SchedulePolicy``: ``binpack`` fills used cards, ``spread`` prefers idle
ones) and the chosen ids are written on the pod with the binding, under Volcano's keys, so the
device plugin hands out those cards. Node order (only when ``deviceshare.ScheduleWeight`` > 0)
scores how full a node's cards are: binpack prefers full nodes, spread empty ones, × 100 ×
weight. Whole ``nvidia.com/gpu`` stays a plain resource; its model is selected with
``nvidia.com/use-gputype``/``nouse-gputype`` against the ``nvidia.com/gpu.product`` node label.

MIG geometries come from the ``nvidia.knownMigGeometries`` of the device-config ConfigMap
``deviceshare.KnownGeometriesCMName`` in ``deviceshare.KnownGeometriesCMNamespace``
(``volcano-vgpu-device-config`` in ``kube-system``; read by the scheduler, see
``scheduler/deviceconfig.py``), else the built-in ones. Accepted but without effect here:
``deviceshare.NodeLockEnable`` (one scheduler writes the assignments, with the binding) and the
Ascend vNPU switches (NPUs stay plain resources).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import EventHandler, Session
from stromboli.core.scheduler.util.devices import vgpu
from stromboli.core.scheduler.util.devices.config import known_geometries
from stromboli.core.scheduler.util.devices.inventory import DeviceInventory, DeviceOptions, Plan
from stromboli.core.scheduler.util.devices.mig import DEFAULT_GEOMETRIES, ModelGeometries
from stromboli.core.scheduler.util.devices.request import DeviceError, DeviceRequest

log = logging.getLogger(__name__)

GPU_SHARING_ENABLE = "deviceshare.GPUSharingEnable"
GPU_NUMBER_ENABLE = "deviceshare.GPUNumberEnable"
NODE_LOCK_ENABLE = "deviceshare.NodeLockEnable"
VGPU_ENABLE = "deviceshare.VGPUEnable"
ASCEND_MINDCLUSTER_ENABLE = "deviceshare.AscendMindClusterVNPUEnable"
ASCEND_HAMI_ENABLE = "deviceshare.AscendHAMiVNPUEnable"
SCHEDULE_POLICY = "deviceshare.SchedulePolicy"
SCHEDULE_WEIGHT = "deviceshare.ScheduleWeight"
GEOMETRIES_CM_NAME = "deviceshare.KnownGeometriesCMName"
GEOMETRIES_CM_NAMESPACE = "deviceshare.KnownGeometriesCMNamespace"
GPU_EXCLUSIVE_RULES = "deviceshare.GPUExclusiveRules"
MAX_NODE_SCORE = 100.0
#: ``volcano.sh/bind-phase`` while the device plugin has not taken the assignment yet.
BIND_PHASE_ALLOCATING = "allocating"
#: Every pod annotation :func:`assignment_annotations` may write.
DEVICE_ANNOTATION_KEYS = (
    k.GPU_INDEX_KEY,
    k.PREDICATE_TIME_KEY,
    k.VGPU_IDS_NEW_KEY,
    k.DEVICES_TO_ALLOCATE_KEY,
    k.VGPU_NODE_KEY,
    k.VGPU_TIME_KEY,
    k.BIND_TIME_KEY,
    k.BIND_PHASE_KEY,
)


def exclusive_rules(value: object) -> tuple[Mapping[str, str], ...]:
    """``deviceshare.GPUExclusiveRules``: a list of label maps; anything else is an error
    naming the argument."""
    if value in (None, ""):
        return ()
    if not isinstance(value, list) or not all(
        isinstance(rule, dict) and all(isinstance(v, str) for v in rule.values()) for rule in value
    ):
        raise ValueError(
            f"plugin deviceshare: {GPU_EXCLUSIVE_RULES} must be a list of label maps "
            "(such as [{app: trainer}]), got " + repr(value)[:80]
        )
    return tuple({str(key): v for key, v in rule.items()} for rule in value)


def assignment_annotations(plan: Plan, node: str, now_seconds: int) -> dict[str, str]:
    """The pod annotations that carry ``plan`` to the device plugins, under Volcano's keys."""
    notes: dict[str, str] = {}
    if plan.share_ids:
        notes[k.GPU_INDEX_KEY] = ",".join(str(i) for i in plan.share_ids)
        notes[k.PREDICATE_TIME_KEY] = str(now_seconds * 1_000_000_000)
    if any(plan.assignment):
        encoded = vgpu.encode(plan.assignment)
        notes[k.VGPU_IDS_NEW_KEY] = encoded
        notes[k.DEVICES_TO_ALLOCATE_KEY] = encoded
        notes[k.VGPU_NODE_KEY] = node
        notes[k.VGPU_TIME_KEY] = str(now_seconds)
        notes[k.BIND_TIME_KEY] = str(now_seconds)
        notes[k.BIND_PHASE_KEY] = BIND_PHASE_ALLOCATING
    return notes


class DeviceSharePlugin(Plugin):
    name = "deviceshare"
    known_arguments: ClassVar[dict[str, object]] = {
        GPU_SHARING_ENABLE: False,
        GPU_NUMBER_ENABLE: False,
        NODE_LOCK_ENABLE: False,
        VGPU_ENABLE: False,
        ASCEND_MINDCLUSTER_ENABLE: False,
        ASCEND_HAMI_ENABLE: False,
        SCHEDULE_POLICY: "",
        SCHEDULE_WEIGHT: 0,
        GEOMETRIES_CM_NAME: "volcano-vgpu-device-config",
        GEOMETRIES_CM_NAMESPACE: "kube-system",
        GPU_EXCLUSIVE_RULES: [],
    }

    def on_session_open(self, ssn: Session) -> None:
        args = self.arguments
        policy = args.get_str(SCHEDULE_POLICY, "").strip() or vgpu.BINPACK
        if policy not in (vgpu.BINPACK, vgpu.SPREAD):
            log.warning(
                "plugin deviceshare: %s is %r, not binpack or spread; using binpack",
                SCHEDULE_POLICY,
                policy,
            )
            policy = vgpu.BINPACK
        raw: Any = args.get(GPU_EXCLUSIVE_RULES)
        try:
            rules = exclusive_rules(raw)
        except ValueError as err:
            log.warning("%s; no exclusivity rules applied", err)
            rules = ()
        self.options = DeviceOptions(
            gpu_sharing=args.get_bool(GPU_SHARING_ENABLE, False),
            gpu_number=args.get_bool(GPU_NUMBER_ENABLE, False),
            vgpu=args.get_bool(VGPU_ENABLE, False),
            policy=policy,
            exclusive_rules=rules,
            geometries=self._geometries(ssn),
        )
        self.ssn = ssn
        self.weight = args.get_int(SCHEDULE_WEIGHT, 0)
        self.inventory = DeviceInventory(ssn.nodes, self.options)
        for message in self.inventory.node_errors.values():
            log.warning("%s; its vGPUs are not offered", message)
        self.now_seconds = int(ssn.now.timestamp())
        self._verdict_cache: dict[tuple, tuple[np.ndarray, list[str], np.ndarray]] = {}
        ssn.register(ExtensionPoint.PREDICATE, self.name, self.predicate)
        if self.weight > 0:
            ssn.register(ExtensionPoint.NODE_ORDER, self.name, self.node_order)
        ssn.add_event_handler(EventHandler(allocate=self.on_allocate, deallocate=self.on_release))

    def _geometries(self, ssn: Session) -> tuple[ModelGeometries, ...]:
        """The MIG geometries of the device-config ConfigMap the arguments name, else the
        built-in ones (also when it cannot be read: logged, naming it and the field)."""
        name = self.arguments.get_str(GEOMETRIES_CM_NAME, "") or str(
            self.known_arguments[GEOMETRIES_CM_NAME]
        )
        namespace = self.arguments.get_str(GEOMETRIES_CM_NAMESPACE, "") or str(
            self.known_arguments[GEOMETRIES_CM_NAMESPACE]
        )
        data = ssn.snapshot.device_configs.get((namespace, name))
        if data is None:
            return DEFAULT_GEOMETRIES
        try:
            found = known_geometries(data, f"ConfigMap {namespace}/{name}")
        except DeviceError as err:
            log.warning("%s; the built-in MIG geometries are used", err)
            return DEFAULT_GEOMETRIES
        return DEFAULT_GEOMETRIES if found is None else found

    # -- predicate and score -----------------------------------------------------------------

    def predicate(self, task: TaskInfo) -> Filter:
        count = len(self.ssn.nodes)
        verdict = Filter.all_pass(count)
        request = self.inventory.request(task)
        if isinstance(request, str):
            verdict.fail(np.ones(count, dtype=bool), request, unresolvable=True)
            return verdict
        if request.whole_gpus and (request.use_types or request.nouse_types):
            wrong = ~self.inventory.whole_gpu_type_ok(request)
            verdict.fail(wrong, "gpu type not allowed", unresolvable=True)
        if not self.inventory.tracked(request):
            return verdict
        codes, reasons = self._verdicts(task, request)
        for code, reason in enumerate(reasons):
            verdict.fail((codes == code) & verdict.passed, reason)
        return verdict

    def _verdicts(self, task: TaskInfo, request: DeviceRequest) -> tuple[np.ndarray, list[str]]:
        """Per node, the index of the reason the task's devices do not fit there (-1: they
        fit), and the reasons. Kept per request for the session, since pods of one shape are
        many: only nodes whose devices changed since are planned again."""
        holder = self.inventory.holder(task)
        key = (request, holder.rules, holder.job if request.spread_podgroup else "")
        versions = self.inventory.versions
        cached = self._verdict_cache.get(key)
        if cached is None:
            cached = (np.full(len(versions), -1), [], np.full(len(versions), -1))
            self._verdict_cache[key] = cached
        codes, reasons, seen = cached
        for position in np.flatnonzero(seen != versions).tolist():
            plan = self.inventory.plan(task, request, position, ordered=False)
            if isinstance(plan, str):
                if plan not in reasons:
                    reasons.append(plan)
                codes[position] = reasons.index(plan)
            else:
                codes[position] = -1
            seen[position] = versions[position]
        return codes, reasons

    def node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        request = self.inventory.request(task)
        if isinstance(request, str) or not self.inventory.tracked(request):
            return np.zeros(positions.shape[0])
        fullness = self.inventory.fullness.take(positions)
        if self.options.policy == vgpu.SPREAD:
            fullness = 1.0 - fullness
        return fullness * (MAX_NODE_SCORE * self.weight)

    # -- allocation events -----------------------------------------------------------------

    def on_allocate(self, task: TaskInfo) -> None:
        position = self.ssn.nodes.position.get(task.node_name)
        if position is None or task.uid in self.inventory.held:
            return
        if self.inventory.adopt(task, position):
            return  # a bound pod put back (an eviction undone): it keeps its cards
        request = self.inventory.request(task)
        if isinstance(request, str) or not self.inventory.tracked(request):
            return
        plan = self.inventory.plan(task, request, position)
        if isinstance(plan, str):
            log.warning(
                "pod %s placed on node %s, where its devices do not fit (%s); no device ids "
                "written",
                task.key,
                task.node_name,
                plan,
            )
            return
        self.inventory.take(task, request, position, plan)
        if task.status != TaskStatus.PIPELINED:
            notes = self.ssn.outcome.pod_annotations.setdefault(task.uid, {})
            notes.update(assignment_annotations(plan, task.node_name, self.now_seconds))

    def on_release(self, task: TaskInfo) -> None:
        self.inventory.release(task.uid)
        notes = self.ssn.outcome.pod_annotations.get(task.uid)
        if notes is not None:  # other plugins' annotations (a topology decision) stay theirs
            for key in DEVICE_ANNOTATION_KEYS:
                notes.pop(key, None)
            if not notes:
                self.ssn.outcome.pod_annotations.pop(task.uid, None)


__all__ = ["DeviceRequest", "DeviceSharePlugin", "assignment_annotations", "exclusive_rules"]

"""The ``numa-aware`` plugin: place CPU-pinned pods where the kubelet can align their CPUs.

A pod asks for alignment with ``volcano.sh/numa-topology-policy`` (a vcjob task's
``topologyPolicy`` is copied there by the controller): ``single-numa-node``, ``restricted``,
``best-effort`` or ``none``. Only Guaranteed pods asking whole CPUs get exclusive CPUs from the
kubelet's static CPU manager, so only they are checked. Each node's ``Numatopology``
(``nodeinfo.volcano.sh/v1alpha1``, written by the node agent) gives its CPU manager and
topology manager policies and its allocatable CPUs per NUMA node.

- predicate: the node must report a Numatopology, a ``static`` CPU manager, the task's own
  topology manager policy, and free CPUs that the policy can take (``util/numa``).
- batch_node_order: nodes where the CPUs come from fewer NUMA nodes score higher,
  100 × ``weight`` ÷ NUMA nodes used.
- on allocate the CPUs are chosen and written on the pod as ``volcano.sh/topology-decision``
  (``{"cpu": "0-3"}``) with the binding; CPUs held by bound pods are read back from that
  annotation, so a restarted scheduler never hands them out twice.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

import numpy as np

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.resource import CPU, EPSILON
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import EventHandler, Session
from stromboli.core.scheduler.util.cpuset import CpuSetError, format_cpuset, parse_cpuset
from stromboli.core.scheduler.util.numa import (
    POLICIES,
    STATIC,
    NodeNuma,
    choose_cpus,
    node_numa,
    numa_nodes_of,
)

log = logging.getLogger(__name__)

WEIGHT = "weight"
MAX_SCORE = 100.0
NO_TOPOLOGY = "node(s) without a Numatopology"
NOT_STATIC = "node(s) cpu manager policy isn't static"
NO_FIT = "node(s) without free CPUs aligned as the task's topology policy asks"


def no_fit_reason(policy: str, cpus: int) -> str:
    """:data:`NO_FIT` with what the policy asked, so ``stromboli explain`` says why."""
    if policy == k.NumaTopologyPolicy.SINGLE_NUMA_NODE:
        return f"{NO_FIT} ({policy}: no NUMA node has {cpus} free CPUs)"
    if policy == k.NumaTopologyPolicy.RESTRICTED:
        return f"{NO_FIT} ({policy}: {cpus} free CPUs on no more NUMA nodes than they need)"
    return f"{NO_FIT} ({policy}: {cpus} free CPUs)"


def policy_mismatch(policy: str) -> str:
    return f"node(s) topology manager policy is not the task's {policy}"


def task_policy(task: TaskInfo) -> str:
    """The task's NUMA policy; '' for none, or for a value that is not one (logged)."""
    annotations = (task.pod.get("metadata") or {}).get("annotations") or {}
    policy = annotations.get(k.NUMA_TOPOLOGY_POLICY_KEY) or ""
    if policy and policy not in POLICIES:
        log.warning(
            "pod %s: annotation %s is %r, not one of %s; no NUMA alignment asked",
            task.key,
            k.NUMA_TOPOLOGY_POLICY_KEY,
            str(policy)[:60],
            ", ".join(sorted(POLICIES)),
        )
        return ""
    return "" if policy == k.NumaTopologyPolicy.NONE else str(policy)


def _guaranteed(pod: dict[str, Any]) -> bool:
    """Whether every container's cpu and memory limits are set and equal to its requests."""
    containers = (pod.get("spec") or {}).get("containers") or ()
    if not containers:
        return False
    for c in containers:
        resources = c.get("resources") or {} if isinstance(c, dict) else {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                return False
    return True


def exclusive_cpus(task: TaskInfo) -> int:
    """Exclusive CPUs the static CPU manager gives the pod: its whole CPUs when Guaranteed."""
    milli = task.resreq.get(CPU)
    whole = round(milli / 1000)
    if whole < 1 or abs(whole * 1000 - milli) > EPSILON or not _guaranteed(task.pod):
        return 0
    return whole


def decision_cpus(pod: dict[str, Any]) -> frozenset[int]:
    """CPUs a bound pod's ``volcano.sh/topology-decision`` holds (empty when none)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(k.TOPOLOGY_DECISION_KEY)
    if not text:
        return frozenset()
    try:
        decision = json.loads(text) if isinstance(text, str) and len(text) < 65_536 else None
        return parse_cpuset(decision.get(CPU, "")) if isinstance(decision, dict) else frozenset()
    except (ValueError, CpuSetError):
        return frozenset()


class NumaAwarePlugin(Plugin):
    name = "numa-aware"
    known_arguments: ClassVar[dict[str, object]] = {WEIGHT: 1}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.weight = self.arguments.get_int(WEIGHT, 1)
        #: Node position → its layout, for nodes with a readable Numatopology.
        self.layouts: dict[int, NodeNuma] = {}
        #: Node position → CPUs held there (bound pods' decisions and this session's).
        self.held: dict[int, set[int]] = {}
        #: Task uid → (node position, CPUs) chosen in this session.
        self.chosen: dict[str, tuple[int, frozenset[int]]] = {}
        if not any(task_policy(t) for j in ssn.jobs.values() for t in j.tasks.values()):
            return  # no task asks for alignment: keep the hot path free of this plugin
        topologies = ssn.snapshot.numatopologies
        for position, node in enumerate(ssn.nodes.nodes):
            obj = topologies.get(node.name)
            if obj is None:
                continue
            try:
                self.layouts[position] = node_numa(obj)
            except ValueError as err:
                log.warning("%s; node %s treated as without one", err, node.name)
                continue
            held: set[int] = set()
            for task in node.tasks.values():
                held |= decision_cpus(task.pod)
            self.held[position] = held
        ssn.register(ExtensionPoint.PREDICATE, self.name, self.predicate)
        if self.weight:
            ssn.register(ExtensionPoint.BATCH_NODE_ORDER, self.name, self.batch_node_order)
        ssn.add_event_handler(EventHandler(allocate=self.on_allocate, deallocate=self.on_release))

    def _choice(self, task: TaskInfo, policy: str, position: int) -> frozenset[int] | None:
        layout = self.layouts[position]
        held = self.held.get(position, set())
        free = {n: ids - held for n, ids in layout.allocatable.items()}
        capacity = {n: len(ids) for n, ids in layout.allocatable.items()}
        return choose_cpus(policy, capacity, free, exclusive_cpus(task))

    # -- predicate and score -----------------------------------------------------------------

    def predicate(self, task: TaskInfo) -> Filter:
        count = len(self.ssn.nodes)
        verdict = Filter.all_pass(count)
        policy = task_policy(task)
        if not policy or not exclusive_cpus(task):
            return verdict
        without = np.ones(count, dtype=bool)
        not_static = np.zeros(count, dtype=bool)
        other_policy = np.zeros(count, dtype=bool)
        no_fit = np.zeros(count, dtype=bool)
        for position, layout in self.layouts.items():
            without[position] = False
            if layout.cpu_manager_policy != STATIC:
                not_static[position] = True
            elif layout.topology_policy != policy:
                other_policy[position] = True
            elif self._choice(task, policy, position) is None:
                no_fit[position] = True
        verdict.fail(without, NO_TOPOLOGY, unresolvable=True)
        verdict.fail(not_static, NOT_STATIC, unresolvable=True)
        verdict.fail(other_policy, policy_mismatch(policy), unresolvable=True)
        verdict.fail(no_fit, no_fit_reason(policy, exclusive_cpus(task)))
        return verdict

    def batch_node_order(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        scores = np.zeros(positions.shape[0])
        policy = task_policy(task)
        if not policy or not exclusive_cpus(task):
            return scores
        for i, position in enumerate(positions.tolist()):
            if position not in self.layouts:
                continue
            cpus = self._choice(task, policy, position)
            if cpus:
                used = len(numa_nodes_of(cpus, self.layouts[position]))
                scores[i] = MAX_SCORE * self.weight / max(used, 1)
        return scores

    # -- allocation events -----------------------------------------------------------------

    def on_allocate(self, task: TaskInfo) -> None:
        position = self.ssn.nodes.position.get(task.node_name)
        if position is None or position not in self.layouts or task.uid in self.chosen:
            return
        held = decision_cpus(task.pod)
        if held and task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            self.held[position] |= held  # a bound pod put back: it keeps its CPUs
            self.chosen[task.uid] = (position, held)
            return
        policy = task_policy(task)
        if not policy or not exclusive_cpus(task):
            return
        cpus = self._choice(task, policy, position)
        if cpus is None:
            log.warning(
                "pod %s placed on node %s, where its %s CPUs do not fit; no topology decision",
                task.key,
                task.node_name,
                policy,
            )
            return
        self.held[position] |= cpus
        self.chosen[task.uid] = (position, cpus)
        if task.status != TaskStatus.PIPELINED:
            notes = self.ssn.outcome.pod_annotations.setdefault(task.uid, {})
            notes[k.TOPOLOGY_DECISION_KEY] = json.dumps({CPU: format_cpuset(cpus)})

    def on_release(self, task: TaskInfo) -> None:
        chosen = self.chosen.pop(task.uid, None)
        if chosen is not None:
            position, cpus = chosen
            self.held[position] -= cpus
        elif task.node_name in self.ssn.nodes.position:  # a bound pod evicted
            position = self.ssn.nodes.position[task.node_name]
            if position in self.held:
                self.held[position] -= decision_cpus(task.pod)
        notes = self.ssn.outcome.pod_annotations.get(task.uid)
        if notes is not None:
            notes.pop(k.TOPOLOGY_DECISION_KEY, None)
            if not notes:
                self.ssn.outcome.pod_annotations.pop(task.uid, None)

"""pdb: evictions keep PodDisruptionBudgets (``policy/v1``) whole.

Registered on ``preemptable``, ``reclaimable`` and ``victimTasks``. Candidates are taken in
order; a pod passes when every budget of its namespace that selects it still allows a
disruption, and each pod that passes spends one from each of its budgets. A pod already listed
in a budget's ``status.disruptedPods`` is being disrupted already and spends nothing from that
budget.

What a budget allows is its ``status.disruptionsAllowed`` (0 when no disruption controller
has written it), less the pods it selects that this session already evicted. Where the
budget's ``minAvailable`` or ``maxUnavailable`` can be checked against the pods in the
snapshot (healthy = Running and not being deleted; expected = not finished), the stricter of
the two figures applies, so the budget holds between two updates of its status, and on the
embedded simulator, which runs no disruption controller.

Differences from Volcano, deliberate: selectors follow ``policy/v1`` (``{}`` selects every pod
of the namespace, an absent selector none) where Volcano treats both as selecting nothing,
and a pod without labels is evictable unless a budget selects it (Volcano never evicts it);
a pod refused by one budget spends nothing from the others; and on ``victimTasks`` the plugin
only vetoes the victims other plugins nominate (Volcano's returns every evictable running pod
as a victim, which makes ``shuffle`` evict them all).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from stromboli.core.cluster.selectors import Selector, SelectorError, selector_from_dict
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import (
    PERMIT,
    EventHandler,
    Session,
    VictimFilter,
)

log = logging.getLogger(__name__)

_FINISHED = TaskStatus.SUCCEEDED | TaskStatus.FAILED


@dataclass(slots=True)
class Budget:
    """One PodDisruptionBudget as the session reads it."""

    namespace: str
    name: str
    selector: Selector
    #: Disruptions allowed at session open.
    allowed: int
    #: Pod names the API server already counts as disrupted.
    disrupted: frozenset[str] = field(default_factory=frozenset)

    def selects(self, task: TaskInfo) -> bool:
        if task.namespace != self.namespace:
            return False
        return self.selector.matches((task.pod.get("metadata") or {}).get("labels") or {})

    def spends(self, task: TaskInfo) -> bool:
        """Whether evicting ``task`` takes one of this budget's disruptions."""
        return self.selects(task) and task.name not in self.disrupted


def _scaled(value: int | str, total: int, field_name: str) -> int:
    """An IntOrString budget figure: an integer, or a percentage of ``total`` rounded up."""
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("%"):
            try:
                return int(text)
            except ValueError:
                pass
        else:
            try:
                return math.ceil(int(text[:-1]) * total / 100)
            except ValueError:
                pass
        raise ValueError(f"{field_name}: {value!r} is neither an integer nor a percentage")
    return int(value)


def live_allowed(spec: dict, selected: list[TaskInfo]) -> int | None:
    """Disruptions the budget's spec allows over the pods it selects now, or None when the
    spec names neither ``minAvailable`` nor ``maxUnavailable``."""
    expected = [t for t in selected if not t.status & _FINISHED]
    healthy = sum(
        1
        for t in expected
        if t.status == TaskStatus.RUNNING
        and not (t.pod.get("metadata") or {}).get("deletionTimestamp")
    )
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], len(expected), "spec.minAvailable")
    elif spec.get("maxUnavailable") is not None:
        unavailable = _scaled(spec["maxUnavailable"], len(expected), "spec.maxUnavailable")
        desired = len(expected) - unavailable
    else:
        return None
    return max(0, healthy - desired)


def session_pods(ssn: Session) -> list[TaskInfo]:
    """Every pod the session knows: those of its jobs and any other pod on its nodes."""
    seen: dict[str, TaskInfo] = {}
    for job in ssn.jobs.values():
        seen.update(job.tasks)
    for node in ssn.nodes.nodes:
        for uid, task in node.tasks.items():
            seen.setdefault(uid, task)
    return list(seen.values())


def read_budgets(ssn: Session) -> list[Budget]:
    pods: list[TaskInfo] | None = None
    budgets: list[Budget] = []
    for pdb in ssn.snapshot.pdbs:
        meta = pdb.get("metadata") or {}
        spec = pdb.get("spec") or {}
        status = pdb.get("status") or {}
        name = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        try:
            selector = selector_from_dict(spec.get("selector"))
        except SelectorError as err:
            log.warning("ignoring PodDisruptionBudget %s: %s", name, err)
            continue
        budget = Budget(
            namespace=meta.get("namespace") or "default",
            name=meta.get("name", ""),
            selector=selector,
            allowed=int(status.get("disruptionsAllowed") or 0),
            disrupted=frozenset(status.get("disruptedPods") or ()),
        )
        if pods is None:
            pods = session_pods(ssn)
        try:
            live = live_allowed(spec, [t for t in pods if budget.selects(t)])
        except ValueError as err:
            log.warning("PodDisruptionBudget %s: %s", name, err)
            live = None
        if live is not None:
            budget.allowed = min(budget.allowed, live) if "disruptionsAllowed" in status else live
        budgets.append(budget)
    return budgets


class PdbPlugin(Plugin):
    name = "pdb"

    def on_session_open(self, ssn: Session) -> None:
        budgets = read_budgets(ssn)
        #: Pods this session evicted (statements not yet undone), by uid.
        evicted: dict[str, TaskInfo] = {}

        def on_allocate(task: TaskInfo) -> None:
            if task.status != TaskStatus.RELEASING:
                evicted.pop(task.uid, None)  # an eviction undone

        def on_deallocate(task: TaskInfo) -> None:
            if task.status == TaskStatus.RELEASING:
                evicted[task.uid] = task

        def keep_budgets(tasks: list[TaskInfo]) -> list[TaskInfo]:
            if not budgets:
                return list(tasks)
            left = [b.allowed - sum(1 for t in evicted.values() if b.spends(t)) for b in budgets]
            victims = []
            for task in tasks:
                spent = [i for i, budget in enumerate(budgets) if budget.spends(task)]
                if any(left[i] <= 0 for i in spent):
                    continue
                for i in spent:
                    left[i] -= 1
                victims.append(task)
            return victims

        def victims(_evictor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return keep_budgets(candidates), PERMIT

        ssn.register(ExtensionPoint.PREEMPTABLE, self.name, victims)
        ssn.register(ExtensionPoint.RECLAIMABLE, self.name, victims)
        ssn.register(ExtensionPoint.VICTIM_TASKS, self.name, VictimFilter(keep_budgets))
        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

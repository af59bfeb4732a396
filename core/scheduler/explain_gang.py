"""How many members of a gang fit now, and what the others lack.

A trial placement over the session: the job's pending pods in task order, each put where
allocate's own node search puts it (idle room first, then room being released), inside a
statement that is discarded at the end, so later pods see the room earlier ones took. A pod
that fits nowhere is described by what is nearest to enough: how much more of which resource
the roomiest node would need, or which filters rule the nodes out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.readable import amounts_text
from stromboli.core.scheduler.api.resource import EPSILON, Resource
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.explain import Explanation, explain
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.placement import place, requested_columns

#: Pods the trial places at most: enough for any answer, bounded for a huge gang.
MAX_TRIAL_PLACEMENTS = 2000
_PLURAL_VERBS = {"need ": "needs ", "have ": "has ", "are ": "is "}


def _agree(count: int, clause: str) -> str:
    """``2 need ...`` / ``1 needs ...``: clauses are written in the plural."""
    if count == 1:
        for plural, singular in _PLURAL_VERBS.items():
            if clause.startswith(plural):
                return f"1 {singular}{clause[len(plural) :]}"
    return f"{count} {clause}"


@dataclass(slots=True)
class GangFit:
    #: The gang's minimum (``minMember``).
    needed: int
    #: Members already placed (bound, running, finished).
    ready: int
    #: (pod name, node) for each pending pod the trial could place.
    placed: list[tuple[str, str]] = field(default_factory=list)
    #: What the pods that fit nowhere lack (a plural clause) → their names.
    lacks: dict[str, list[str]] = field(default_factory=dict)
    #: Pending pods left out once the trial had placed ``MAX_TRIAL_PLACEMENTS``.
    untried: int = 0

    @property
    def fit(self) -> int:
        return self.ready + len(self.placed)

    @property
    def short(self) -> bool:
        return self.fit < self.needed

    def sentence(self) -> str:
        head = f"{self.fit}/{self.needed} members fit"
        if self.untried:
            head += f" ({self.untried} more not tried: the trial stops at {MAX_TRIAL_PLACEMENTS})"
        if not self.lacks:
            return head
        rest = "; ".join(_agree(len(pods), lack) for lack, pods in self.lacks.items())
        return f"{head}; {rest}"


def queue_room_clause(ssn: Session, queue: QueueInfo, task: TaskInfo) -> str:
    """Why the queue's plugins refuse another pod (``allocatable``), with the numbers."""
    for plugin, bound in (("proportion", "deserved"), ("capacity", "real_capability")):
        account = (ssn.queue_accounts.get(plugin) or {}).get(queue.name)
        if account is None:
            continue
        allocated: Resource = getattr(account, "allocated", Resource())
        limit = getattr(account, bound, Resource())
        names = [n for n, v in task.resreq.amounts.items() if v > EPSILON and n != "pods"]
        over = [n for n in names if allocated.get(n) + task.resreq.get(n) > limit.get(n) + EPSILON]
        if over:
            what = "deserved share" if bound == "deserved" else "capability"
            held = amounts_text({n: allocated.get(n) for n in over})
            room = amounts_text({n: limit.get(n) for n in over})
            asks = amounts_text({n: task.resreq.get(n) for n in over})
            return (
                f"are refused by queue {queue.name}'s {what} ({plugin}): it holds {held} of "
                f"{room} and each asks {asks}"
            )
    if not queue.is_open():
        return f"are refused: queue {queue.name} is {queue.state}"
    return f"are refused by queue {queue.name} (allocatable)"


def lack_clause(ssn: Session, task: TaskInfo, result: Explanation) -> str:
    """What a pod that fits on no node lacks, as a plural clause."""
    if not result.nodes:
        return "have no node to go to: the cluster has no nodes"
    nodes = ssn.nodes
    vector = nodes.task_vector(task)
    columns = requested_columns(vector)
    resource_only = [
        i for i, v in enumerate(result.nodes) if all(who == "resources" for who, _ in v.failures)
    ]
    filtered = Counter(
        next(why for who, why in v.failures if who != "resources")
        for v in result.nodes
        if any(who != "resources" for who, _ in v.failures)
    )
    ruled_out = ", ".join(f"{count} {why}" for why, count in sorted(filtered.items()))
    if not resource_only:
        return f"pass no node's filters ({ruled_out})"
    best, best_cost, best_short = -1, float("inf"), np.zeros(0)
    for position in resource_only:
        short = np.maximum(vector[columns] - nodes.future[position, columns], 0.0)
        cost = float(np.sum(short / np.maximum(vector[columns], EPSILON)))
        if cost < best_cost:
            best, best_cost, best_short = position, cost, short
    names = [nodes.index.names[c] for c in columns]
    lacking = {n: float(s) for n, s in zip(names, best_short, strict=True) if s > EPSILON}
    pairs = list(zip(names, columns, strict=True))
    free = amounts_text({n: float(nodes.future[best, c]) for n, c in pairs})
    asks = amounts_text({n: float(vector[c]) for n, c in pairs})
    clause = (
        f"need {amounts_text(lacking)} more on any node "
        f"(closest: {result.nodes[best].node} has {free} free; each asks {asks})"
    )
    if ruled_out:
        clause += f"; other nodes ruled out: {ruled_out}"
    return clause


def gang_fit(ssn: Session, job: JobInfo, domain: tuple[str, np.ndarray] | None = None) -> GangFit:
    """Place the job's pending pods where they fit now, count them, and undo it all;
    ``domain`` (a HyperNode's name and node mask) keeps them inside it, as allocate does for a
    job with ``networkTopology``."""
    fit = GangFit(needed=job.min_available, ready=job.ready_task_num())
    queue = ssn.queues.get(job.queue)
    statement = ssn.statement()
    try:
        failed: dict[str, str] = {}
        for task in ssn.sorted_tasks(job.tasks_with(TaskStatus.PENDING)):
            if len(fit.placed) >= MAX_TRIAL_PLACEMENTS:
                fit.untried += 1
                continue
            # Room only shrinks during the trial: a shape that fit nowhere still fits nowhere.
            clause = _refusal(ssn, task) or failed.get(task.shape)
            if clause is None:
                placement = place(ssn, task, domain=domain)  # allocate's own search
                if isinstance(placement, FitErrors):
                    if domain is not None and not isinstance(place(ssn, task), FitErrors):
                        clause = f"fit no node of hyperNode {domain[0]}, only nodes outside it"
                    else:
                        clause = lack_clause(ssn, task, explain(ssn, task))
                    failed[task.shape] = clause
                elif queue is not None and not ssn.allocatable(queue, task):
                    # Checked before nodes by allocate; said only when a node has room, since
                    # a queue entitled to the whole cluster is then not what holds the pod.
                    clause = failed[task.shape] = queue_room_clause(ssn, queue, task)
                else:
                    statement.allocate(task, placement.node)
                    fit.placed.append((task.name, placement.node))
                    continue
            fit.lacks.setdefault(clause, []).append(task.name)
    finally:
        statement.discard()
    return fit


def _refusal(ssn: Session, task: TaskInfo) -> str | None:
    """A reason the pod is not tried on nodes at all, or None."""
    if task.gated:
        return "have scheduling gates (spec.schedulingGates): they wait until those are removed"
    objection = ssn.pre_predicate(task)
    if objection:
        return f"are refused before node checks: {objection}"
    return None


def pods_text(pods: list[str], limit: int = 5) -> str:
    """``a, b, c`` or ``a, b, c, ... (12 in all)``."""
    if len(pods) <= limit:
        return ", ".join(pods)
    return ", ".join(pods[:limit]) + f", ... ({len(pods)} in all)"

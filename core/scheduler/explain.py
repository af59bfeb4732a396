"""Why a pod is (not) placed: every node's verdict, plugin by plugin, for one pod.

Built on a session over the current cache, so it says what the scheduler would decide now:
the resource check against each node's free and releasing resources, each predicate plugin's
reason for rejecting the node, and each scoring plugin's score on the nodes that pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.readable import amount_text
from stromboli.core.scheduler.api.resource import EPSILON
from stromboli.core.scheduler.framework.points import ExtensionPoint, VictimFilter
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.placement import requested_columns


@dataclass(slots=True)
class NodeVerdict:
    node: str
    #: (who, why) for every check the node fails: "resources" or a plugin name.
    failures: list[tuple[str, str]] = field(default_factory=list)
    #: Plugin → score, for nodes that pass.
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return not self.failures

    @property
    def total(self) -> float:
        return sum(self.scores.values())


@dataclass(slots=True)
class Explanation:
    task: TaskInfo
    job: JobInfo
    pre_predicate: str | None
    nodes: list[NodeVerdict]

    def feasible(self) -> list[NodeVerdict]:
        return sorted((n for n in self.nodes if n.feasible), key=lambda n: -n.total)

    def infeasible(self) -> list[NodeVerdict]:
        return [n for n in self.nodes if not n.feasible]


def find_task(ssn: Session, namespace: str, name: str) -> TaskInfo | None:
    for job in ssn.jobs.values():
        if job.namespace != namespace:
            continue
        for task in job.tasks.values():
            if task.name == name:
                return task
    return None


def explain(ssn: Session, task: TaskInfo) -> Explanation:
    nodes = ssn.nodes
    count = len(nodes)
    verdicts = [NodeVerdict(info.name) for info in nodes.nodes]
    vector = nodes.task_vector(task)
    for column in requested_columns(vector):
        wanted = vector[column] - EPSILON
        short = np.flatnonzero(nodes.future[:, column] < wanted)
        name = nodes.index.names[column]
        for position in short:
            free = nodes.future[position, column]
            asks, left = amount_text(name, vector[column]), amount_text(name, free)
            verdicts[position].failures.append(
                ("resources", f"Insufficient {name} (asks {asks}, free {left})")
            )
    for plugin, fn in ssn.callbacks(ExtensionPoint.PREDICATE):
        assert not isinstance(fn, VictimFilter)  # accepted on victim_tasks only
        result = fn(task)
        for mask, reason, _ in result.reasons:
            for position in np.flatnonzero(mask):
                verdicts[position].failures.append((plugin, reason))
    passing = np.array([v.feasible for v in verdicts], dtype=bool) if count else np.zeros(0, bool)
    positions = np.flatnonzero(passing)
    if positions.shape[0]:
        for point in (ExtensionPoint.NODE_ORDER, ExtensionPoint.BATCH_NODE_ORDER):
            for plugin, fn in ssn.callbacks(point):
                assert not isinstance(fn, VictimFilter)  # accepted on victim_tasks only
                scores = fn(task, positions)
                for position, score in zip(positions, scores, strict=True):
                    verdicts[position].scores[plugin] = verdicts[position].scores.get(
                        plugin, 0.0
                    ) + float(score)
    return Explanation(task, ssn.jobs[task.job_id], ssn.pre_predicate(task), verdicts)

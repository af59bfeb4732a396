"""What a queue holds against what it deserves and may hold, and who waits in it.

The amounts come from the queue plugin of the session (``proportion`` or ``capacity``), which
computes ``deserved`` and the real capability each cycle; without one, from the jobs' own
allocations and the queue's spec. Waiting jobs are listed by name: Pending PodGroups (not yet
admitted by enqueue) and admitted ones with pods still unplaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.readable import names_text, resource_text
from stromboli.core.scheduler.api.resource import EPSILON, PODS, Resource
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.explain_job import owner_name
from stromboli.core.scheduler.framework.session import Session

_QUEUE_PLUGINS = ("capacity", "proportion")


@dataclass(slots=True)
class QueueExplanation:
    queue: QueueInfo
    #: The plugin whose accounting the amounts come from, or "" (the jobs and the spec).
    plugin: str
    allocated: Resource
    inqueue: Resource
    deserved: Resource | None
    capability: Resource | None
    #: Resources on which allocated + admitted reaches the capability.
    at_capability: list[str]
    #: Job names (vcjob or PodGroup) by what they wait for.
    pending: list[str] = field(default_factory=list)
    inqueue_waiting: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)

    def sentence(self) -> str:
        q = self.queue
        text = (
            f"queue {q.name} ({q.state or 'Open'}, weight {q.weight}) holds "
            f"{resource_text(self.allocated)}"
        )
        if not self.inqueue.is_empty():
            text += f" and has admitted {resource_text(self.inqueue)} more not yet running"
        text += f"; deserved {resource_text(self.deserved) if self.deserved else 'not set'}"
        text += f", capability {resource_text(self.capability)}"
        if self.at_capability:
            text += f": at capability on {names_text(self.at_capability)}"
        return text

    def waiting_sentence(self) -> str:
        parts = []
        if self.pending:
            parts.append(f"{len(self.pending)} Pending at enqueue ({', '.join(self.pending)})")
        if self.inqueue_waiting:
            parts.append(
                f"{len(self.inqueue_waiting)} admitted with pods unplaced "
                f"({', '.join(self.inqueue_waiting)})"
            )
        if not parts:
            return "no job waits"
        return "waiting: " + "; ".join(parts)

    def as_dict(self) -> dict:
        return {
            "queue": self.queue.name,
            "state": self.queue.state or "Open",
            "weight": self.queue.weight,
            "plugin": self.plugin,
            "allocated": self.allocated.to_list(),
            "inqueue": self.inqueue.to_list(),
            "deserved": self.deserved.to_list() if self.deserved is not None else None,
            "capability": self.capability.to_list() if self.capability is not None else None,
            "atCapability": list(self.at_capability),
            "pending": list(self.pending),
            "inqueueWaiting": list(self.inqueue_waiting),
            "running": list(self.running),
            "reason": self.sentence(),
        }


def _as_resource(value: object) -> Resource | None:
    amounts = getattr(value, "amounts", None)
    if amounts is None:
        return None
    finite = {n: float(v) for n, v in amounts.items() if v != float("inf")}
    return Resource(finite)


def explain_queue(ssn: Session, queue: QueueInfo) -> QueueExplanation:
    jobs = [j for j in ssn.jobs.values() if j.queue == queue.name]
    plugin, account = "", None
    for name in _QUEUE_PLUGINS:
        account = (ssn.queue_accounts.get(name) or {}).get(queue.name)
        if account is not None:
            plugin = name
            break
    if account is not None:
        allocated = _as_resource(getattr(account, "allocated", None)) or Resource()
        inqueue = _as_resource(getattr(account, "inqueue", None)) or Resource()
        deserved = _as_resource(getattr(account, "deserved", None))
    else:
        allocated = Resource()
        inqueue = Resource()
        for job in jobs:
            allocated.add(job.allocated)
            if job.phase == "Inqueue" and job.min_resources is not None:
                inqueue.add(job.min_resources)
        deserved = queue.deserved
    capability = queue.capability
    at_capability = []
    if capability is not None:
        for name, limit in capability.amounts.items():
            if name == PODS:
                continue
            if allocated.get(name) + inqueue.get(name) >= limit - EPSILON:
                at_capability.append(name)
    out = QueueExplanation(
        queue, plugin, allocated, inqueue, deserved, capability, sorted(at_capability)
    )
    for job in sorted(jobs, key=lambda j: (j.creation, j.namespace, j.name)):
        label = f"{job.namespace}/{owner_name(job) or job.name}"
        if job.is_pending():
            out.pending.append(label)
        elif job.tasks_with(TaskStatus.PENDING):
            out.inqueue_waiting.append(label)
        elif job.ready_task_num():
            out.running.append(label)
    return out

"""Which gate holds a Pending PodGroup at enqueue, with the numbers that decide it.

The enqueue action admits a PodGroup when the ``jobEnqueueable`` votes allow it. This module
replays that action over a session (read-only: the session is a copy nobody writes back) up
to the job asked about, so the jobs ahead of it in queue order are admitted first exactly as
the next cycle would, then asks every voting plugin on its own and turns each vote into a
sentence: the queue's capability (``proportion``, ``capacity``), the cluster's inflated room
(``overcommit``), the namespace's ResourceQuotas (``resourcequota``), the queue's state, the
job's service level (``sla``), or an ``extender``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from typing import Any

from stromboli.core.scheduler.actions.enqueue import mark_inqueue
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.readable import amount_text, amounts_text, duration_text
from stromboli.core.scheduler.api.resource import CPU, EPSILON, PODS, Resource
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.util.durations import creation_time
from stromboli.core.scheduler.util.inqueue import without_gated
from stromboli.core.scheduler.util.queues import QueueJobs

#: Gate names as explanations print them.
QUEUE_CAPABILITY = "queue capability"
QUEUE_CLOSED = "queue closed"
OVERCOMMIT = "overcommit"
RESOURCEQUOTA = "resourcequota"
SLA = "sla"
EXTENDER = "extender"

_QUEUE_PLUGINS = ("proportion", "capacity")
_GATE_OF_PLUGIN = {
    "proportion": QUEUE_CAPABILITY,
    "capacity": QUEUE_CAPABILITY,
    "overcommit": OVERCOMMIT,
    "resourcequota": RESOURCEQUOTA,
    "sla": SLA,
    "extender": EXTENDER,
}
_DEFAULT_OVERCOMMIT_FACTOR = 1.2
_REQUEST_PREFIXES = ("requests.", "limits.")


@dataclass(slots=True)
class Gate:
    """One plugin's vote on admitting the job, in words."""

    gate: str
    plugin: str
    #: ``holds``, ``admits`` or ``abstains``.
    verdict: str
    sentence: str
    tier: int = 0

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"


@dataclass(slots=True)
class EnqueueVerdict:
    admitted: bool
    gates: list[Gate]
    #: Set when the job is not held by any vote (no enqueue action, no minResources).
    note: str = ""

    def holding(self) -> list[Gate]:
        return [g for g in self.gates if g.holds]

    def sentence(self) -> str:
        held = self.holding()
        if held:
            return "; ".join(f"{g.gate}: {g.sentence}" for g in held)
        return self.note or "every gate admits it: the next enqueue moves it to Inqueue"


def _requested_names(minimum: Resource) -> list[str]:
    return [n for n, v in minimum.amounts.items() if v > EPSILON and n != PODS]


def _only(amounts: Any, names: list[str]) -> dict[str, float]:
    return {n: float(amounts.get(n)) for n in names}


def _over(wanted: dict[str, float], limit: Any, names: list[str]) -> dict[str, float]:
    return {
        n: wanted[n] - float(limit.get(n))
        for n in names
        if wanted[n] > float(limit.get(n)) + EPSILON
    }


def queue_capability_sentence(ssn: Session, job: JobInfo, plugin: str) -> str:
    """What the queue holds, has admitted and may hold, against this job's minimum."""
    queue = ssn.queues[job.queue]
    minimum = job.min_resources or Resource()
    account = (ssn.queue_accounts.get(plugin) or {}).get(job.queue)
    if account is None:
        return f"queue {queue.name} has no account in {plugin}"
    names = _requested_names(minimum)
    allocated = getattr(account, "allocated", Resource())
    inqueue = getattr(account, "inqueue", Resource())
    elastic = getattr(account, "elastic", Resource())
    limit = getattr(account, "real_capability", Resource())
    wanted = {
        n: max(minimum.get(n) + allocated.get(n) + inqueue.get(n) - elastic.get(n), 0.0)
        for n in names
    }
    over = _over(wanted, limit, names)
    own = queue.capability
    bound = (
        "its capability"
        if own is not None and all(n in own.amounts for n in (over or names))
        else "what the cluster leaves it (total less other queues' guarantees"
        + (", within its capability)" if own is not None else ")")
    )
    admitted = _only(inqueue, names)
    text = f"queue {queue.name} holds {amounts_text(_only(allocated, names))}"
    if any(admitted.values()):
        text += f" and has admitted {amounts_text(admitted)} more not yet running"
    text += (
        f"; with this job's minResources ({amounts_text(_only(minimum, names))}) "
        f"it would hold {amounts_text(wanted)}"
    )
    if over:
        bounded = amounts_text(_only(limit, list(over)))
        return f"{text}, over {bound} of {bounded} by {amounts_text(over)}"
    return f"{text}, within {bound} of {amounts_text(_only(limit, names))}"


def admitted_needs(ssn: Session) -> Resource:
    """What admitted jobs still need, as ``overcommit`` counts it when the session opens:
    Inqueue jobs' ``minResources`` and Running jobs' shortfall from it (gated pods left out)."""
    inqueue = Resource()
    for other in ssn.jobs.values():
        if other.min_resources is None:
            continue
        if other.phase == "Inqueue":
            inqueue.add(without_gated(other, other.min_resources))
        elif other.phase == "Running":
            inqueue.add(without_gated(other, other.min_resources - other.allocated))
    return inqueue


def overcommit_sentence(ssn: Session, job: JobInfo, inqueue: Resource | None = None) -> str:
    """The cluster's total inflated by the factor, what is used and admitted, and the job.

    ``inqueue`` is what admitted jobs still need (:func:`admitted_needs`, plus what a replay
    admitted since); computed here when not given.
    """
    plugin = ssn.plugins.get("overcommit")
    factor = _DEFAULT_OVERCOMMIT_FACTOR
    if plugin is not None:
        factor = plugin.arguments.get_float("overcommit-factor", _DEFAULT_OVERCOMMIT_FACTOR)
        if factor < 1.0:
            factor = _DEFAULT_OVERCOMMIT_FACTOR
    minimum = job.min_resources or Resource()
    names = _requested_names(minimum)
    total = ssn.total_resource
    used = ssn.nodes.index.resource(ssn.nodes.used.sum(axis=0))
    if inqueue is None:
        inqueue = admitted_needs(ssn)
    idle = {n: max(total.get(n) * factor - used.get(n), 0.0) for n in names}
    wanted = {n: inqueue.get(n) + minimum.get(n) for n in names}
    over = {n: wanted[n] - idle[n] for n in names if wanted[n] > idle[n] + EPSILON}
    text = (
        f"the cluster's {amounts_text(_only(total, names))} × overcommit-factor {factor:g}, "
        f"less {amounts_text(_only(used, names))} in use, leaves {amounts_text(idle)}; "
        f"admitted jobs not yet running hold {amounts_text(_only(inqueue, names))} and this "
        f"job asks {amounts_text(_only(minimum, names))}"
    )
    if over:
        return f"{text}, short by {amounts_text(over)} (resource in cluster is overused)"
    return f"{text}: it fits"


def _quota_amount(name: str, value: Fraction) -> str:
    base = name
    for prefix in _REQUEST_PREFIXES:
        if name.startswith(prefix):
            base = name[len(prefix) :]
    amount = float(value * 1000) if base == CPU else float(value)
    text = amount_text(base, amount)
    return text if base == name else f"{text} ({name})"


def resourcequota_sentence(ssn: Session, job: JobInfo) -> str:
    """Each ResourceQuota of the namespace the job's minimum would exceed, with its numbers."""
    from stromboli.core.scheduler.plugins.resourcequota import quantities, requested_for

    raw = (job.podgroup.get("spec") or {}).get("minResources")
    minimum = quantities(raw, f"PodGroup {job.uid} spec.minResources")
    plugin = ssn.plugins.get("resourcequota")
    pending = (getattr(plugin, "pending", None) or {}).get(job.namespace) or {}
    parts: list[str] = []
    for quota in ssn.snapshot.resource_quotas.get(job.namespace) or []:
        name = f"ResourceQuota {job.namespace}/{(quota.get('metadata') or {}).get('name', '')}"
        spec, status = quota.get("spec") or {}, quota.get("status") or {}
        hard = quantities(spec.get("hard") or status.get("hard"), f"{name} hard")
        used = quantities(status.get("used"), f"{name} status.used")
        for resource, limit in sorted(hard.items()):
            asked = requested_for(resource, minimum)
            if asked is None:
                continue
            held = used.get(resource, Fraction(0)) + (
                requested_for(resource, pending) or Fraction(0)
            )
            if held + asked > limit:
                parts.append(
                    f"{name} allows {_quota_amount(resource, limit)}, "
                    f"{_quota_amount(resource, held)} is used and this job asks "
                    f"{_quota_amount(resource, asked)} (short by "
                    f"{_quota_amount(resource, held + asked - limit)})"
                )
    return "; ".join(parts) or "the namespace's ResourceQuotas have room"


def sla_sentence(ssn: Session, job: JobInfo, admitted_when_overdue: bool) -> str | None:
    """How long the job has waited against its ``sla-waiting-time``; None without one."""
    plugin = ssn.plugins.get("sla")
    waiting_time = getattr(plugin, "waiting_time", None)
    if waiting_time is None:
        return None
    wait: timedelta | None = waiting_time(job)
    if wait is None:
        return None
    created = creation_time(job)
    waited = (ssn.now - created).total_seconds() if created is not None else None
    limit = wait.total_seconds()
    if waited is None or waited >= limit:
        return f"waited past its sla-waiting-time of {duration_text(limit)}: it votes to admit"
    then = "it is admitted" if admitted_when_overdue else "the gates above still hold it"
    return (
        f"waited {duration_text(waited)} of its sla-waiting-time {duration_text(limit)}; "
        f"in {duration_text(limit - waited)} it votes to admit, and then {then}"
    )


def _gate_sentence(
    ssn: Session, job: JobInfo, plugin: str, vote: int, message: str, inqueue: Resource | None
) -> str:
    if plugin in _QUEUE_PLUGINS:
        return queue_capability_sentence(ssn, job, plugin)
    if plugin == "overcommit":
        return overcommit_sentence(ssn, job, inqueue)
    if plugin == "resourcequota":
        return resourcequota_sentence(ssn, job)
    if message:
        return message
    return {PERMIT: "votes to admit", REJECT: "votes to hold"}.get(vote, "abstains")


def _tier_of(ssn: Session) -> dict[str, int]:
    return {option.name: index for index, tier in enumerate(ssn.tiers) for option in tier}


def _decide(votes: list[tuple[int, int]]) -> bool:
    """Volcano's vote over tiers: a Reject stops; a tier with a Permit admits; else go on."""
    for tier in sorted({t for t, _ in votes}):
        in_tier = [v for t, v in votes if t == tier]
        if any(v < 0 for v in in_tier):
            return False
        if any(v > 0 for v in in_tier):
            return True
    return True


def votes_for(ssn: Session, job: JobInfo, inqueue: Resource | None = None) -> EnqueueVerdict:
    """Every ``jobEnqueueable`` vote on ``job`` now, each as a :class:`Gate` (``inqueue``:
    what admitted jobs still need, for the ``overcommit`` sentence)."""
    queue = ssn.queues.get(job.queue)
    if queue is None:
        gate = Gate(QUEUE_CLOSED, "", "holds", f"queue {job.queue} does not exist")
        return EnqueueVerdict(False, [gate])
    gates: list[Gate] = []
    if not queue.is_open():
        state = queue.state or "Open"
        gates.append(
            Gate(QUEUE_CLOSED, "", "holds", f"queue {queue.name} is {state}: it admits no job")
        )
    if job.min_resources is None:
        note = "it has no minResources, so enqueue admits it without a vote"
        return EnqueueVerdict(not gates, gates, note)
    tiers = _tier_of(ssn)
    recorded: list[tuple[int, int]] = []
    sla_at: int | None = None
    for plugin, fn in ssn.callbacks(ExtensionPoint.JOB_ENQUEUEABLE):
        before = len(ssn.job_events)
        vote = int(fn(job))  # type: ignore[operator]
        messages = [m for uid, _, _, m in ssn.job_events[before:] if uid == job.uid]
        del ssn.job_events[before:]
        tier = tiers.get(plugin, 0)
        recorded.append((tier, vote))
        if plugin == "sla":
            sla_at = len(recorded) - 1
            continue
        if vote < 0 and not queue.is_open() and plugin in _QUEUE_PLUGINS:
            continue  # the closed queue is already said
        verdict = "holds" if vote < 0 else ("admits" if vote > 0 else "abstains")
        if vote == 0 and plugin not in _GATE_OF_PLUGIN:
            continue
        sentence = _gate_sentence(ssn, job, plugin, vote, "; ".join(messages), inqueue)
        gates.append(Gate(_GATE_OF_PLUGIN.get(plugin, plugin), plugin, verdict, sentence, tier))
    admitted = _decide(recorded) and queue.is_open()
    if sla_at is not None:
        overdue = list(recorded)
        overdue[sla_at] = (overdue[sla_at][0], PERMIT)
        said = sla_sentence(ssn, job, _decide(overdue) and queue.is_open())
        if said is not None:
            verdict = "admits" if recorded[sla_at][1] > 0 else "abstains"
            gates.append(Gate(SLA, "sla", verdict, said, recorded[sla_at][0]))
    if not admitted and not any(g.holds for g in gates):
        gates.append(Gate("votes", "", "holds", "the jobEnqueueable votes reject it"))
    return EnqueueVerdict(admitted, gates)


_NO_ENQUEUE = "no enqueue action is configured: allocate admits it"


def enqueue_verdicts(
    ssn: Session, wanted: Collection[str] | None = None, stop_at: JobInfo | None = None
) -> dict[str, EnqueueVerdict]:
    """Replay the enqueue action once over the session and give the verdict of each Pending
    job in ``wanted`` (by uid; every Pending job when None) at the moment enqueue reaches it,
    the jobs ahead of it admitted in order, as the next cycle would. Stops after ``stop_at``.

    Without an ``enqueue`` action, allocate admits Pending jobs itself, and no gate holds.
    """
    pending_jobs = [
        j for j in ssn.jobs.values() if j.is_pending() and (wanted is None or j.uid in wanted)
    ]
    if "enqueue" not in ssn.config.actions:
        return {j.uid: EnqueueVerdict(True, [], _NO_ENQUEUE) for j in pending_jobs}
    needs = admitted_needs(ssn) if "overcommit" in ssn.plugins else None
    pending = QueueJobs(ssn)
    for job in ssn.jobs.values():
        if job.is_pending() and job.queue in ssn.queues:
            pending.add(job)
    verdicts: dict[str, EnqueueVerdict] = {}
    before = len(ssn.job_events)
    while (popped := pending.pop_next()) is not None:
        queue, job = popped
        if wanted is None or job.uid in wanted:
            verdicts[job.uid] = votes_for(ssn, job, needs)
            if job is stop_at:
                break
        if job.min_resources is None or ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
            mark_inqueue(ssn, job.uid)
            if needs is not None and job.min_resources is not None:
                needs.add(job.min_resources)
        pending.requeue(queue)
    for job in pending_jobs:  # a queue that does not exist: enqueue never reaches the job
        if job.uid not in verdicts and job.queue not in ssn.queues:
            verdicts[job.uid] = votes_for(ssn, job, needs)
    del ssn.job_events[before:]
    return verdicts


def enqueue_verdict(ssn: Session, target: JobInfo) -> EnqueueVerdict:
    """The verdict on one Pending job: enqueue replayed up to it (see :func:`enqueue_verdicts`)."""
    verdicts = enqueue_verdicts(ssn, {target.uid}, stop_at=target)
    verdict = verdicts.get(target.uid)
    if verdict is None:  # not Pending (any more): nothing at enqueue holds it
        return EnqueueVerdict(True, [], "it is no longer Pending")
    return verdict

"""Why a vcjob or PodGroup waits: the stage it is held at and, in one sentence, what holds it.

A Pending PodGroup waits for enqueue: :mod:`explain_enqueue` names the gate. An admitted one
waits for allocate: an objection of ``jobValid`` (too few pods for the gang), the queue's
share, or the gang not fitting (:mod:`explain_gang`). The sentence is what ``stromboli
explain job/NAME`` prints first and what the simulator's report gives for a job that never
got a pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.explain_enqueue import EnqueueVerdict, enqueue_verdict
from stromboli.core.scheduler.explain_gang import GangFit, gang_fit, pods_text
from stromboli.core.scheduler.explain_topology import topology_fit
from stromboli.core.scheduler.framework.session import Session

#: Stages a job can be held at, as the explanation names them.
ENQUEUE = "enqueue"
INVALID = "invalid"
ALLOCATE = "allocate"
PLACED = "placed"


@dataclass(slots=True)
class JobExplanation:
    job: JobInfo
    stage: str
    #: The one sentence: what holds the job, with numbers.
    sentence: str
    enqueue: EnqueueVerdict | None = None
    gang: GangFit | None = None
    #: Further facts, one line each (the PodGroup's last condition, the queue's state).
    notes: list[str] = field(default_factory=list)

    @property
    def waiting(self) -> bool:
        return self.stage != PLACED

    def as_dict(self) -> dict:
        out: dict = {
            "podgroup": f"{self.job.namespace}/{self.job.name}",
            "queue": self.job.queue,
            "phase": self.job.phase,
            "minMember": self.job.min_available,
            "stage": self.stage,
            "reason": self.sentence,
            "notes": list(self.notes),
        }
        if self.enqueue is not None:
            out["gates"] = [
                {"gate": g.gate, "plugin": g.plugin, "verdict": g.verdict, "message": g.sentence}
                for g in self.enqueue.gates
            ]
        if self.gang is not None:
            out["members"] = {
                "needed": self.gang.needed,
                "fit": self.gang.fit,
                "ready": self.gang.ready,
                "placed": [{"pod": p, "node": n} for p, n in self.gang.placed],
                "lacking": [{"reason": r, "pods": pods} for r, pods in self.gang.lacks.items()],
            }
        return out


def owner_name(job: JobInfo, kind: str = "Job") -> str | None:
    """The name of the PodGroup's controlling owner of ``kind`` (a vcjob), if any."""
    refs = (job.podgroup.get("metadata") or {}).get("ownerReferences") or ()
    for ref in refs:
        if ref.get("kind") == kind and ref.get("controller", True):
            return str(ref.get("name") or "")
    return None


def find_podgroup(ssn: Session, namespace: str, name: str) -> JobInfo | None:
    for job in ssn.jobs.values():
        if job.namespace == namespace and job.name == name:
            return job
    return None


def find_vcjob(ssn: Session, namespace: str, name: str) -> JobInfo | None:
    """The PodGroup a vcjob's controller made for it (owned by the vcjob)."""
    for job in ssn.jobs.values():
        if job.namespace == namespace and owner_name(job) == name:
            return job
    return None


def find_unqueued(cache: SchedulerCache, kind: str, namespace: str, name: str) -> JobInfo | None:
    """A PodGroup (``kind`` ``podgroup``) or a vcjob's PodGroup (``job``) that the cache holds
    but no session sees, because its queue does not exist."""
    for job_id, entry in cache.jobs.items():
        job = entry.built if entry.built is not None else cache.job_info(job_id, entry)
        if job is None or job.namespace != namespace or job.queue in cache.queues:
            continue
        if (kind == "podgroup" and job.name == name) or (kind == "job" and owner_name(job) == name):
            return job
    return None


def explain_unqueued(job: JobInfo) -> JobExplanation:
    """Why a job whose queue does not exist waits."""
    sentence = (
        f"queue {job.queue} does not exist: the scheduler leaves the job aside until the queue "
        "is created"
    )
    return JobExplanation(job, ENQUEUE, sentence)


def _last_condition(job: JobInfo) -> str | None:
    conditions = (job.podgroup.get("status") or {}).get("conditions") or ()
    for condition in reversed(conditions):
        if condition.get("type") == k.PodGroupConditionType.UNSCHEDULABLE and condition.get(
            "status"
        ) in ("True", True):
            return f"PodGroup condition Unschedulable: {condition.get('message') or ''}".strip()
    return None


def explain_job(
    ssn: Session, job: JobInfo, verdict: EnqueueVerdict | None = None
) -> JobExplanation:
    """Why ``job`` waits now (or that it does not). ``verdict``: the job's enqueue verdict
    when a replay over many jobs already gave it (see ``enqueue_verdicts``)."""
    notes: list[str] = []
    condition = _last_condition(job)
    if condition:
        notes.append(condition)
    queue = ssn.queues.get(job.queue)
    if verdict is not None or job.is_pending():  # a replay may have admitted it since
        if verdict is None:
            verdict = enqueue_verdict(ssn, job)
        if verdict.admitted:
            sentence = f"PodGroup is Pending, but {verdict.sentence()}"
        else:
            sentence = f"held at enqueue by {verdict.sentence()}"
        return JobExplanation(job, ENQUEUE, sentence, enqueue=verdict, notes=notes)
    if queue is None:
        return JobExplanation(job, ALLOCATE, f"queue {job.queue} does not exist", notes=notes)
    waiting = job.tasks_with(TaskStatus.PENDING)
    invalid = ssn.job_valid(job)
    if invalid is not None and waiting:
        reason, message = invalid
        have = len(job.tasks)
        sentence = (
            f"{reason}: {message} ({have} pod{'s' if have != 1 else ''} exist, "
            f"minMember {job.min_available})"
        )
        return JobExplanation(job, INVALID, sentence, notes=notes)
    if not waiting:
        sentence = f"no pod waits: {job.ready_task_num()} of {len(job.tasks)} placed or finished"
        return JobExplanation(job, PLACED, sentence, notes=notes)
    if not queue.is_open():
        notes.append(f"queue {queue.name} is {queue.state}")
    overused = ssn.overused(queue)
    if overused:
        notes.append(
            f"queue {queue.name} is overused (allocated ≥ deserved): allocate passes it by"
        )
    spans = topology_fit(ssn, job)
    fit = spans.gang if spans is not None else gang_fit(ssn, job)
    names = pods_text([name for name, _ in fit.placed])
    if spans is not None and not spans.found:
        sentence = f"gang short of room: {spans.refusal()}"
    elif spans is not None and not fit.short and not fit.lacks and not overused:
        sentence = f"{fit.sentence()} in {spans.where()}: the next allocate places {names}"
    elif fit.short:
        sentence = f"gang short of room: {fit.sentence()}"
    elif fit.lacks:
        sentence = f"the gang's minimum is met; {fit.sentence()}"
    elif overused:
        sentence = f"{fit.sentence()}, but queue {queue.name} is overused: allocate passes it by"
    else:
        sentence = f"{fit.sentence()}: the next allocate places {names}"
    return JobExplanation(job, ALLOCATE, sentence, gang=fit, notes=notes)

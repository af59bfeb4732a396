"""What the report tells about jobs beyond their times: why the ones that never started wait,
who evicted whom, and how many jobs JobFlows and CronJobs made.

- Why a job waits is the sentence ``stromboli explain job/NAME`` prints, from a scheduling
  session opened (and never written back) over the final state with the run's configuration.
- Evictions are the ones the scheduler carried out, with the task each made room for.
- Jobs made by a JobFlow or a CronJob are the vcjobs it owns in the final state, plus, for
  CronJobs, the jobs its ``SuccessfulCreate`` events name (finished runs beyond the history
  limits are deleted, their events stay).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from stromboli.core.api import constants as k
from stromboli.core.scheduler.cache import WATCHED_KINDS, SchedulerCache
from stromboli.core.scheduler.explain_enqueue import enqueue_verdicts
from stromboli.core.scheduler.explain_job import explain_job, explain_unqueued, find_unqueued
from stromboli.core.scheduler.framework.outcome import EvictionRecord
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.simulate.engine import SimulationResult
from stromboli.core.simulate.jobs import JobFigures

log = logging.getLogger(__name__)

#: Owner kinds whose made jobs the report counts.
MAKERS = ("JobFlow", "CronJob")
_CREATED_PREFIX = "Created job "
#: Jobs the report explains at most (each costs a trial placement of its gang).
MAX_EXPLAINED = 200
#: Job states that end waiting: such a job is not reported as waiting.
ENDED = frozenset({"Completed", "Aborted", "Failed", "Terminated"})


@dataclass(slots=True)
class WaitingJob:
    """A job that never started, and why."""

    label: str
    queue: str
    stage: str
    reason: str


@dataclass(slots=True)
class EvictionGroup:
    """Pods of one job evicted for one other job, for one reason."""

    victim_job: str
    victim_queue: str
    preemptor_job: str
    preemptor_queue: str
    reason: str
    first_at: str
    pods: list[str] = field(default_factory=list)


@dataclass(slots=True)
class MadeJobs:
    """The vcjobs one JobFlow or CronJob made."""

    kind: str
    owner: str
    jobs: set[str] = field(default_factory=set)
    #: Of those, the ones still stored at the end.
    stored: set[str] = field(default_factory=set)

    @property
    def count(self) -> int:
        return len(self.jobs)


def _items(final: dict, kind: str) -> Iterable[dict]:
    return (o for o in final.get("items") or () if o.get("kind") == kind)


def final_cache(result: SimulationResult, final: dict) -> SchedulerCache:
    """The scheduler's cache rebuilt from the final state (every object as it ended)."""
    cache = SchedulerCache(tuple(result.scheduler.cache.scheduler_names))
    watched = set(WATCHED_KINDS)
    for obj in final.get("items") or ():
        kind = (obj.get("apiVersion", ""), obj.get("kind", ""))
        if kind not in watched:
            continue
        try:
            cache.apply(kind, "ADDED", obj)
        except ValueError as err:  # the run quarantined it too; the report goes on without it
            log.warning("report: %s left out of the final session: %s", kind[1], err)
    return cache


def final_session(result: SimulationResult, cache: SchedulerCache) -> Session:
    """A session over the final state, as the next cycle would open it (nothing written)."""
    scheduler = result.scheduler
    ssn = Session(cache.snapshot(), scheduler.config.current(), scheduler.clock.now())
    ssn.open()
    return ssn


@dataclass(slots=True)
class Waiting:
    """The jobs that never started: the first ones explained, and how many there were."""

    jobs: list[WaitingJob]
    total: int

    def __bool__(self) -> bool:
        return self.total > 0


def waiting_jobs(
    result: SimulationResult, final: dict, jobs: list[JobFigures], limit: int = MAX_EXPLAINED
) -> Waiting:
    """Each job that never had a pod running (the first ``limit`` in submission order), with
    the reason it still waits."""
    everyone = [j for j in jobs if j.start is None and j.state not in ENDED]
    unstarted = everyone[:limit]
    if not unstarted:
        return Waiting([], len(everyone))
    cache = final_cache(result, final)
    ssn = final_session(result, cache)
    by_name = {(j.namespace, j.name): j for j in ssn.jobs.values()}
    found = [by_name[key] for f in unstarted if (key := (f.namespace, f.name)) in by_name]
    # One replay of enqueue gives every Pending job its verdict, each in queue order.
    verdicts = enqueue_verdicts(ssn, {j.uid for j in found if j.is_pending()})
    out: list[WaitingJob] = []
    for job in unstarted:
        info = by_name.get((job.namespace, job.name))
        if info is not None:
            explanation = explain_job(ssn, info, verdicts.get(info.uid))
        elif (unqueued := find_unqueued(cache, "podgroup", job.namespace, job.name)) is not None:
            explanation = explain_unqueued(unqueued)
        else:
            reason = "no PodGroup the scheduler follows (another scheduler's, or not yet made)"
            out.append(WaitingJob(job.label, job.queue, "", reason))
            continue
        out.append(WaitingJob(job.label, job.queue, explanation.stage, explanation.sentence))
    return Waiting(out, len(everyone))


def evictions(result: SimulationResult) -> list[EvictionRecord]:
    """Evictions the scheduler carried out, oldest first."""
    return list(result.scheduler.recent_evictions)


def group_evictions(records: Iterable[EvictionRecord]) -> list[EvictionGroup]:
    """Evictions folded by (victim job, preemptor job, reason), in order of the first one."""
    groups: dict[tuple[str, str, str], EvictionGroup] = {}
    for record in records:
        key = (record.victim_job, record.preemptor_job, record.reason)
        group = groups.get(key)
        if group is None:
            group = groups[key] = EvictionGroup(
                record.victim_job,
                record.victim_queue,
                record.preemptor_job,
                record.preemptor_queue,
                record.reason,
                record.at,
            )
        group.pods.append(record.victim)
    return list(groups.values())


def made_jobs(final: dict) -> list[MadeJobs]:
    """Per JobFlow and CronJob, the vcjobs it made, by owner name."""
    made: dict[tuple[str, str], MadeJobs] = {}
    for vcjob in _items(final, "Job"):
        if vcjob.get("apiVersion") != k.BATCH_V1ALPHA1:
            continue
        meta = vcjob.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        for ref in meta.get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") in MAKERS:
                owner = f"{namespace}/{ref.get('name', '')}"
                entry = made.setdefault((ref["kind"], owner), MadeJobs(ref["kind"], owner))
                name = f"{namespace}/{meta.get('name', '')}"
                entry.jobs.add(name)
                entry.stored.add(name)
    for event in _items(final, "Event"):
        involved = event.get("involvedObject") or {}
        message = str(event.get("message") or "")
        if (
            involved.get("kind") != "CronJob"
            or event.get("reason") != "SuccessfulCreate"
            or not message.startswith(_CREATED_PREFIX)
        ):
            continue
        namespace = involved.get("namespace") or "default"
        owner = f"{namespace}/{involved.get('name', '')}"
        entry = made.setdefault(("CronJob", owner), MadeJobs("CronJob", owner))
        entry.jobs.add(f"{namespace}/{message[len(_CREATED_PREFIX) :].strip()}")
    return sorted(made.values(), key=lambda m: (m.kind, m.owner))

"""The CronJob controller: vcjobs created on a cron schedule, with Kubernetes CronJob semantics.

Each CronJob is reconciled as a whole: its child jobs (controller ownerReference) are compared
with ``status.active``, finished jobs leave ``active`` and old ones beyond the history limits
are deleted; then the most recent unmet schedule time (after ``lastScheduleTime``, or the
creation time) decides whether a job is due. ``startingDeadlineSeconds`` bounds how late a run
may start, ``concurrencyPolicy`` decides what happens while a run is still active, and
``suspend`` stops new runs. The next schedule time becomes a timer on the injected clock, so a
virtual clock can jump to it (:meth:`CronJobController.next_wakeup`).

The same ``start/step/next_wakeup/run`` shape as the vcjob controller: the simulator steps it,
``stromboli controller`` runs it on watches.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from stromboli.core.admission.cronjob import schedule_problem
from stromboli.core.api import constants as k
from stromboli.core.api.keys import Key, object_key
from stromboli.core.clock import Clock, format_time, parse_time
from stromboli.core.cluster.errors import AlreadyExistsError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.cluster.writes import put_status
from stromboli.core.controller.reconciler import JobMutator, Reconciler, is_newer
from stromboli.core.events import EventRecorder

COMPONENT: Final = "cronjob-controller"
#: More missed start times than this and the controller only reports it (as Kubernetes does).
MAX_MISSED: Final = 100
SUCCEEDED: Final = frozenset({"Completed"})
FINISHED: Final = frozenset({"Completed", "Failed", "Terminated", "Aborted"})


def _phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def _owner_cronjob(job: Mapping[str, Any]) -> str | None:
    for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "CronJob":
            return str(ref.get("name") or "")
    return None


def rfc3339(when: datetime) -> str:
    """RFC 3339 with the zone's offset (``Z`` for UTC), whole seconds."""
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    offset = when.utcoffset() or timedelta(0)
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """``<cronjob>-<scheduled time in minutes since the epoch>``."""
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


class CronJobController(Reconciler[Key]):
    """See the module docstring. ``mutate_job`` is applied to each job before it is created
    (the simulator passes the job webhook's defaults)."""

    noun = "cronjob"
    #: The group/version of the CronJobs and Jobs handled (the simulator's batch/v1 emulation
    #: reuses this reconcile with Kubernetes' kinds), the annotation carrying each run's
    #: scheduled time, and the component its events name.
    api_version: ClassVar[str] = k.BATCH_V1ALPHA1
    scheduled_annotation: ClassVar[str] = k.CRONJOB_SCHEDULED_TIMESTAMP_KEY
    component: ClassVar[str] = COMPONENT

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        recorder: EventRecorder | None = None,
        *,
        mutate_job: JobMutator | None = None,
    ) -> None:
        kinds = [(self.api_version, "CronJob"), (self.api_version, "Job")]
        super().__init__(store, clock, kinds, recorder, self.component, mutate_job)
        self.cronjobs: dict[Key, dict[str, Any]] = {}
        self.jobs: dict[Key, dict[str, Any]] = {}
        #: Monotonic time at which each CronJob must be looked at again.
        self._due: dict[Key, float] = {}

    def next_wakeup(self) -> float | None:
        return min(self._due.values()) if self._due else None

    # --- intake ------------------------------------------------------------------------------

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if kind[1] == "CronJob":
            if event_type == "DELETED":
                self.cronjobs.pop(key, None)
                self._due.pop(key, None)
                self._dirty.pop(key, None)
                return
            if is_newer(obj, self.cronjobs.get(key)):
                self.cronjobs[key] = obj
                self._mark(key)
            return
        if event_type == "DELETED":
            self.jobs.pop(key, None)
        elif is_newer(obj, self.jobs.get(key)):
            self.jobs[key] = obj
        owner = _owner_cronjob(obj)
        if owner:
            self._mark((key[0], owner))

    async def _collect_due(self) -> None:
        now = self.clock.monotonic()
        for key, due in list(self._due.items()):
            if due <= now:
                del self._due[key]
                self._mark(key)

    # --- reconcile ---------------------------------------------------------------------------

    async def _sync(self, key: Key) -> None:
        cronjob = self.cronjobs.get(key)
        if cronjob is None or cronjob["metadata"].get("deletionTimestamp"):
            self._due.pop(key, None)
            return
        spec = cronjob.get("spec") or {}
        status = copy.deepcopy(cronjob.get("status") or {})
        uid = cronjob["metadata"].get("uid")
        children = {
            name: job
            for (ns, name), job in self.jobs.items()
            if ns == key[0] and owned_by_cronjob(job, uid)
        }
        await self._reconcile_active(cronjob, status, children)
        await self._clean_history(cronjob, children)

        self._due.pop(key, None)
        if spec.get("suspend"):
            await self._write_status(cronjob, status)
            return
        zone = await self._zone(cronjob)
        if zone is None:
            await self._write_status(cronjob, status)
            return
        schedule = str(spec.get("schedule") or "")
        problem = schedule_problem(spec.get("schedule"))
        if problem:
            await self._event(cronjob, "Warning", "UnparseableSchedule", problem)
            await self._write_status(cronjob, status)
            return
        now = self.clock.now().astimezone(zone)
        scheduled, missed = self._most_recent(cronjob, status, schedule, zone, now)
        if missed > MAX_MISSED:
            await self._event(
                cronjob,
                "Warning",
                "TooManyMissedTimes",
                f"too many missed start times: {missed}. Set or decrease "
                ".spec.startingDeadlineSeconds or check clock skew",
            )
        self._requeue_next(key, schedule, zone, now)
        if scheduled is None:
            await self._write_status(cronjob, status)
            return
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and scheduled + timedelta(seconds=int(deadline)) < now:
            await self._event(
                cronjob,
                "Warning",
                "MissSchedule",
                f"Missed scheduled time to start a job: {rfc3339(scheduled)}",
            )
            await self._write_status(cronjob, status)
            return
        name = job_name(key[1], scheduled)
        active = status.get("active") or []
        if any(ref.get("name") == name for ref in active) or name in children:
            await self._write_status(cronjob, status)
            return
        policy = spec.get("concurrencyPolicy") or k.ConcurrencyPolicy.ALLOW
        if policy == k.ConcurrencyPolicy.FORBID and active:
            await self._write_status(cronjob, status)
            return
        if policy == k.ConcurrencyPolicy.REPLACE:
            for ref in list(active):
                await self._delete_job(cronjob, key[0], str(ref.get("name")))
                active.remove(ref)
            status["active"] = active or None
        created = await self._create_job(cronjob, name, scheduled, zone)
        if created is not None:
            active.append(self._job_ref(created))
            status["active"] = active
        status["lastScheduleTime"] = format_time(scheduled)
        await self._write_status(cronjob, status)

    async def _reconcile_active(
        self, cronjob: dict[str, Any], status: dict[str, Any], children: dict[str, dict]
    ) -> None:
        active = [dict(ref) for ref in status.get("active") or []]
        names = {ref.get("name") for ref in active}
        for name, job in sorted(children.items()):
            if name not in names and _phase(job) not in FINISHED:
                active.append(self._job_ref(job))
        kept = []
        for ref in active:
            child = children.get(str(ref.get("name")))
            if child is None:
                await self._event(
                    cronjob, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}"
                )
                continue
            if _phase(child) in FINISHED:
                await self._event(
                    cronjob,
                    "Normal",
                    "SawCompletedJob",
                    f"Saw completed job: {ref.get('name')}, status: {_phase(child)}",
                )
                continue
            kept.append(ref)
        status["active"] = kept or None
        for job in children.values():
            if _phase(job) not in SUCCEEDED:
                continue
            done = _finished_at(job)
            last = status.get("lastSuccessfulTime")
            if done and (not last or parse_time(done) > parse_time(last)):
                status["lastSuccessfulTime"] = done

    async def _clean_history(self, cronjob: dict[str, Any], children: dict[str, dict]) -> None:
        spec = cronjob.get("spec") or {}
        namespace = object_key(cronjob)[0]
        for phases, limit in (
            (SUCCEEDED, spec.get("successfulJobsHistoryLimit")),
            (FINISHED - SUCCEEDED, spec.get("failedJobsHistoryLimit")),
        ):
            if limit is None:
                continue
            finished = sorted(
                (job for job in children.values() if _phase(job) in phases),
                key=lambda j: (_finished_at(j) or "", j["metadata"]["name"]),
            )
            for job in finished[: max(len(finished) - int(limit), 0)]:
                name = job["metadata"]["name"]
                if await self._delete_job(cronjob, namespace, name):
                    children.pop(name, None)

    def _most_recent(
        self,
        cronjob: Mapping[str, Any],
        status: Mapping[str, Any],
        schedule: str,
        zone: ZoneInfo,
        now: datetime,
    ) -> tuple[datetime | None, int]:
        """The latest schedule time in (earliest, now], and how many there were (capped)."""
        since = status.get("lastScheduleTime") or cronjob["metadata"].get("creationTimestamp")
        earliest = parse_time(since).astimezone(zone) if since else now
        deadline = (cronjob.get("spec") or {}).get("startingDeadlineSeconds")
        if deadline is not None:
            earliest = max(earliest, now - timedelta(seconds=int(deadline)))
        times = croniter(schedule, earliest)
        latest: datetime | None = None
        missed = 0
        while True:
            upcoming = times.get_next(datetime)
            if upcoming > now:
                break
            latest = upcoming
            missed += 1
            if missed > MAX_MISSED:
                back = croniter(schedule, now + timedelta(seconds=1)).get_prev(datetime)
                latest = back if back <= now else latest
                break
        return latest, missed

    def _requeue_next(self, key: Key, schedule: str, zone: ZoneInfo, now: datetime) -> None:
        upcoming = croniter(schedule, now).get_next(datetime)
        delay = max((upcoming - now).total_seconds(), 0.0)
        self._due[key] = self.clock.monotonic() + delay
        if self._wake is not None:
            self._wake.set()

    async def _zone(self, cronjob: dict[str, Any]) -> ZoneInfo | None:
        name = (cronjob.get("spec") or {}).get("timeZone")
        if name is None:
            return ZoneInfo("UTC")
        try:
            if not name or name == "Local":
                raise ValueError(name)
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            await self._event(cronjob, "Warning", "UnknownTimeZone", f"invalid timeZone: {name!r}")
            return None

    # --- writes ------------------------------------------------------------------------------

    async def _create_job(
        self, cronjob: dict[str, Any], name: str, scheduled: datetime, zone: ZoneInfo
    ) -> dict[str, Any] | None:
        meta = cronjob["metadata"]
        template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
        tmeta = template.get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        annotations[self.scheduled_annotation] = rfc3339(scheduled.astimezone(zone))
        job: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace") or "default",
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": self.api_version,
                        "kind": "CronJob",
                        "name": meta["name"],
                        "uid": meta.get("uid", ""),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        if not job["metadata"]["labels"]:
            del job["metadata"]["labels"]
        if self.mutate_job is not None:
            job = self.mutate_job(job)
        try:
            created = await self.store.create(job)
        except AlreadyExistsError:
            try:
                existing = await self.store.get(
                    self.api_version, "Job", name, job["metadata"]["namespace"]
                )
            except NotFoundError:
                return None
            return existing if owned_by_cronjob(existing, meta.get("uid")) else None
        except Exception as err:  # an invalid template: report it, try again next time
            await self._event(cronjob, "Warning", "FailedCreate", f"Error creating job: {err}")
            return None
        self.writes += 1
        self.jobs[object_key(created)] = created
        await self._event(cronjob, "Normal", "SuccessfulCreate", f"Created job {name}")
        return created

    async def _delete_job(self, cronjob: dict[str, Any], namespace: str, name: str) -> bool:
        try:
            await self.store.delete(
                self.api_version, "Job", name, namespace, propagation="Background"
            )
        except NotFoundError:
            self.jobs.pop((namespace, name), None)
            return True
        self.writes += 1
        self.jobs.pop((namespace, name), None)
        await self._event(cronjob, "Normal", "SuccessfulDelete", f"Deleted job {name}")
        return True

    async def _write_status(self, cronjob: dict[str, Any], status: dict[str, Any]) -> None:
        wanted = {key: value for key, value in status.items() if value is not None}
        if wanted == {
            key: value for key, value in (cronjob.get("status") or {}).items() if value is not None
        }:
            return
        written = await put_status(self.store, cronjob, lambda _current: wanted)
        if written is None:
            return
        self.writes += 1
        key = object_key(written)
        if is_newer(written, self.cronjobs.get(key)):
            self.cronjobs[key] = written

    async def _event(self, cronjob: Mapping[str, Any], kind: str, reason: str, msg: str) -> None:
        meta = cronjob["metadata"]
        ref = {
            "apiVersion": self.api_version,
            "kind": "CronJob",
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", "default"),
            "uid": meta.get("uid", ""),
        }
        await self.recorder.record(ref, kind, reason, msg)

    def _job_ref(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """An entry of ``status.active``: a reference to one of the CronJob's jobs."""
        meta = job["metadata"]
        return {
            "apiVersion": self.api_version,
            "kind": "Job",
            "name": meta["name"],
            "namespace": meta.get("namespace", "default"),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }


def owned_by_cronjob(job: Mapping[str, Any], uid: str | None) -> bool:
    for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "CronJob" and ref.get("uid") == uid:
            return True
    return False


def _finished_at(job: Mapping[str, Any]) -> str | None:
    state = (job.get("status") or {}).get("state") or {}
    return state.get("lastTransitionTime") or job["metadata"].get("creationTimestamp")

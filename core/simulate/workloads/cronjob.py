"""Kubernetes CronJobs (``batch/v1``): a batch Job ``<cronjob>-<scheduled minutes since the
epoch>`` at each schedule time, which the batch Job emulation then runs.

The schedule, ``startingDeadlineSeconds``, ``concurrencyPolicy``, ``suspend``, ``timeZone``
and the history limits behave as in Volcano's CronJob (whose controller already follows
Kubernetes' semantics; this one reuses its reconcile and swaps the kinds); a Job counts as
finished when it has the ``Complete`` or ``Failed`` condition. Each Job carries the
``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation. The history limits default
to 3 successful and 1 failed Job, as the API server defaults them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final
from zoneinfo import ZoneInfo

from stromboli.core.api import constants as k
from stromboli.core.api.keys import object_key
from stromboli.core.clock import Clock, parse_time
from stromboli.core.cluster.errors import AlreadyExistsError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.cronjob import CronJobController, rfc3339
from stromboli.core.controller.reconciler import JobMutator, Reconciler, is_newer
from stromboli.core.events import EventRecorder
from stromboli.core.simulate.workloads.batchjob import job_finished
from stromboli.core.simulate.workloads.common import COMPONENT, CRONJOB_SCHEDULED_TIMESTAMP

CRONJOB: Final = (k.K8S_BATCH_V1, "CronJob")
JOB: Final = (k.K8S_BATCH_V1, "Job")


def _owned_by(job: Mapping[str, Any], uid: str | None) -> bool:
    return any(
        ref.get("controller") and ref.get("kind") == "CronJob" and ref.get("uid") == uid
        for ref in (job.get("metadata") or {}).get("ownerReferences") or ()
    )


def _finish_time(job: Mapping[str, Any]) -> str | None:
    status = job.get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition.get("lastTransitionTime")
    return status.get("completionTime") or job["metadata"].get("creationTimestamp")


def _job_ref(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": k.K8S_BATCH_V1,
        "kind": "Job",
        "name": meta["name"],
        "namespace": meta.get("namespace", "default"),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }


class BatchCronJobController(CronJobController):
    """Volcano's CronJob reconcile with ``batch/v1`` CronJobs and Jobs."""

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        recorder: EventRecorder | None = None,
        *,
        mutate_job: JobMutator | None = None,
    ) -> None:
        Reconciler.__init__(self, store, clock, [CRONJOB, JOB], recorder, COMPONENT, mutate_job)
        self.cronjobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self._due: dict[tuple[str, str], float] = {}

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if kind == CRONJOB:
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
        for ref in obj["metadata"].get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") == "CronJob":
                self._mark((key[0], str(ref.get("name") or "")))

    async def _reconcile_active(
        self, cronjob: dict[str, Any], status: dict[str, Any], children: dict[str, dict]
    ) -> None:
        active = [dict(ref) for ref in status.get("active") or []]
        names = {ref.get("name") for ref in active}
        for name, job in sorted(children.items()):
            if name not in names and job_finished(job) is None:
                active.append(_job_ref(job))
        kept = []
        for ref in active:
            child = children.get(str(ref.get("name")))
            if child is None:
                await self._event(
                    cronjob, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}"
                )
                continue
            finished = job_finished(child)
            if finished is not None:
                await self._event(
                    cronjob,
                    "Normal",
                    "SawCompletedJob",
                    f"Saw completed job: {ref.get('name')}, condition: {finished}",
                )
                continue
            kept.append(ref)
        status["active"] = kept or None
        for job in children.values():
            if job_finished(job) != "Complete":
                continue
            done = _finish_time(job)
            last = status.get("lastSuccessfulTime")
            if done and (not last or parse_time(done) > parse_time(last)):
                status["lastSuccessfulTime"] = done

    async def _clean_history(self, cronjob: dict[str, Any], children: dict[str, dict]) -> None:
        spec = cronjob.get("spec") or {}
        namespace = object_key(cronjob)[0]
        for ending, limit in (
            ("Complete", spec.get("successfulJobsHistoryLimit", 3)),
            ("Failed", spec.get("failedJobsHistoryLimit", 1)),
        ):
            if limit is None:
                continue
            finished = sorted(
                (job for job in children.values() if job_finished(job) == ending),
                key=lambda j: (_finish_time(j) or "", j["metadata"]["name"]),
            )
            for job in finished[: max(len(finished) - int(limit), 0)]:
                name = job["metadata"]["name"]
                if await self._delete_job(cronjob, namespace, name):
                    children.pop(name, None)

    async def _create_job(
        self, cronjob: dict[str, Any], name: str, scheduled: datetime, zone: ZoneInfo
    ) -> dict[str, Any] | None:
        meta = cronjob["metadata"]
        template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
        tmeta = template.get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        annotations[CRONJOB_SCHEDULED_TIMESTAMP] = rfc3339(scheduled.astimezone(zone))
        job: dict[str, Any] = {
            "apiVersion": k.K8S_BATCH_V1,
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace") or "default",
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": k.K8S_BATCH_V1,
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
                existing = await self.store.get(*JOB, name, job["metadata"]["namespace"])
            except NotFoundError:
                return None
            return existing if _owned_by(existing, meta.get("uid")) else None
        except Exception as err:  # an invalid template: report it, try again next time
            await self._event(cronjob, "Warning", "FailedCreate", f"Error creating job: {err}")
            return None
        self.writes += 1
        self.jobs[object_key(created)] = created
        await self._event(cronjob, "Normal", "SuccessfulCreate", f"Created job {name}")
        return created

    async def _delete_job(self, cronjob: dict[str, Any], namespace: str, name: str) -> bool:
        try:
            await self.store.delete(*JOB, name, namespace, propagation="Background")
        except NotFoundError:
            self.jobs.pop((namespace, name), None)
            return True
        self.writes += 1
        self.jobs.pop((namespace, name), None)
        await self._event(cronjob, "Normal", "SuccessfulDelete", f"Deleted job {name}")
        return True

    async def _event(self, cronjob: Mapping[str, Any], kind: str, reason: str, msg: str) -> None:
        meta = cronjob["metadata"]
        ref = {
            "apiVersion": k.K8S_BATCH_V1,
            "kind": "CronJob",
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", "default"),
            "uid": meta.get("uid", ""),
        }
        await self.recorder.record(ref, kind, reason, msg)

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

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.keys import object_key
from stromboli.core.clock import parse_time
from stromboli.core.controller.cronjob import CronJobController
from stromboli.core.simulate.workloads.batchjob import job_finished
from stromboli.core.simulate.workloads.common import COMPONENT, CRONJOB_SCHEDULED_TIMESTAMP


def _finish_time(job: Mapping[str, Any]) -> str | None:
    status = job.get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition.get("lastTransitionTime")
    return status.get("completionTime") or job["metadata"].get("creationTimestamp")


class BatchCronJobController(CronJobController):
    """Volcano's CronJob reconcile with ``batch/v1`` CronJobs and Jobs: only what tells a
    finished Job differs (its ``Complete``/``Failed`` condition, not a vcjob phase)."""

    api_version = k.K8S_BATCH_V1
    scheduled_annotation = CRONJOB_SCHEDULED_TIMESTAMP
    component = COMPONENT

    async def _reconcile_active(
        self, cronjob: dict[str, Any], status: dict[str, Any], children: dict[str, dict]
    ) -> None:
        active = [dict(ref) for ref in status.get("active") or []]
        names = {ref.get("name") for ref in active}
        for name, job in sorted(children.items()):
            if name not in names and job_finished(job) is None:
                active.append(self._job_ref(job))
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

"""Kubernetes batch Jobs (``batch/v1``): pods until ``completions`` succeed, at most
``parallelism`` at once, giving up after ``backoffLimit`` failed pods.

Pods are named ``<job>-<random>`` (``<job>-<index>-<random>`` with ``completionMode:
Indexed``) and labelled ``batch.kubernetes.io/controller-uid`` and
``batch.kubernetes.io/job-name`` (and the older ``controller-uid`` and ``job-name``), as
kube-controller-manager labels them. A pod ends by the simulator's runtime annotations on the
template: ``sim.stromboli.dev/runtime`` then exit code 0 succeeds, a non-zero
``sim.stromboli.dev/exit-code`` fails. After a failure the next pod waits the controller's
backoff (10 s, doubled per failure, at most 6 min) on the virtual clock. The Job ends
``Complete`` or ``Failed`` (``BackoffLimitExceeded``, ``DeadlineExceeded`` for
``activeDeadlineSeconds``), with those conditions and the counts in its status; its remaining
pods are deleted when it fails. Without ``completions`` the Job is a work queue: it completes
when a pod has succeeded and none is left running. ``spec.suspend`` deletes the active pods
and creates none.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

from stromboli.core.api import constants as k
from stromboli.core.api.keys import Key
from stromboli.core.clock import format_time, parse_time
from stromboli.core.simulate.workloads.common import (
    JOB_COMPLETION_INDEX,
    JOB_CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    OwnerController,
    is_active,
    is_ready,
    phase,
    pod_from_template,
)

DEFAULT_BACKOFF_LIMIT: Final = 6
BACKOFF_SECONDS: Final = 10.0
MAX_BACKOFF_SECONDS: Final = 360.0


def _count(value: Any, default: int | None) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0)
    return default


def job_finished(job: dict[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` once the Job has that condition, else None."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


def completion_index(pod: dict[str, Any]) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def index_ranges(indexes: set[int]) -> str:
    """``0-2,4``: the form of ``status.completedIndexes``."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and runs[-1][1] == index - 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _finished_at(pod: dict[str, Any]) -> float | None:
    latest = None
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        at = ((status.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if at:
            seconds = parse_time(at).timestamp()
            latest = seconds if latest is None else max(latest, seconds)
    return latest


class BatchJobController(OwnerController):
    noun = "job"
    owner_kind = (k.K8S_BATCH_V1, "Job")

    async def _sync(self, key: Key) -> None:
        job = self.owners.get(key)
        if job is None or job["metadata"].get("deletionTimestamp") or job_finished(job):
            return
        spec = job.get("spec") or {}
        status = dict(job.get("status") or {})
        pods = self.owned(job)
        active = [p for p in pods if is_active(p)]
        succeeded = [p for p in pods if phase(p) == "Succeeded"]
        failed = [p for p in pods if phase(p) == "Failed"]
        indexed = spec.get("completionMode") == "Indexed"
        completions = _count(spec.get("completions"), None)
        parallelism = _count(spec.get("parallelism"), 1) or 0
        backoff_limit = _count(spec.get("backoffLimit"), DEFAULT_BACKOFF_LIMIT) or 0
        now = self.clock.now()
        done_indexes = {i for p in succeeded if (i := completion_index(p)) is not None}

        if spec.get("suspend"):
            for pod in active:
                await self.delete_child(pod)
            active = []
            status = self._with_condition(status, "Suspended", "JobSuspended", "Job suspended")
        else:
            status.setdefault("startTime", format_time(now))
            status = self._without_condition(status, "Suspended")

        ending: tuple[str, str, str] | None = None
        deadline = _count(spec.get("activeDeadlineSeconds"), None)
        started = parse_time(status["startTime"]).timestamp() if "startTime" in status else None
        if len(failed) > backoff_limit:
            ending = (
                "Failed",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
        elif deadline is not None and started is not None and not spec.get("suspend"):
            if now.timestamp() >= started + deadline:
                ending = (
                    "Failed",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                )
            else:
                self.wake_at(key, self.clock.monotonic() + started + deadline - now.timestamp())
        if ending is None:
            if indexed and completions is not None:
                complete = sum(1 for i in done_indexes if i < completions) >= completions
            elif completions is not None:
                complete = len(succeeded) >= completions
            else:
                complete = bool(succeeded) and not active
            if complete:
                ending = ("Complete", "", "")

        if ending is None and not spec.get("suspend"):
            active += await self._start_pods(
                job, key, active, succeeded, failed, done_indexes, completions, parallelism, indexed
            )
        if ending is not None:
            kind, reason, message = ending
            if kind == "Failed":
                for pod in active:
                    await self.delete_child(pod)
                active = []
                await self.event(job, "Warning", reason, message)
            else:
                status["completionTime"] = format_time(now)
                await self.event(job, "Normal", "Completed", "Job completed")
            status = self._with_condition(status, kind, reason, message)
        status.update(
            active=len(active),
            ready=sum(1 for p in active if is_ready(p)),
            succeeded=len(succeeded),
            failed=len(failed),
        )
        for name in ("active", "succeeded", "failed"):
            if not status[name]:
                del status[name]
        if indexed:
            status["completedIndexes"] = index_ranges(done_indexes)
        await self.write_status(job, status)

    async def _start_pods(
        self,
        job: dict[str, Any],
        key: Key,
        active: list[dict[str, Any]],
        succeeded: list[dict[str, Any]],
        failed: list[dict[str, Any]],
        done_indexes: set[int],
        completions: int | None,
        parallelism: int,
        indexed: bool,
    ) -> list[dict[str, Any]]:
        if completions is None:
            wanted = 0 if succeeded else parallelism - len(active)
        else:
            wanted = min(parallelism, completions - len(succeeded)) - len(active)
        # Never more than the pods this Job may still make: a Job of a billion completions
        # costs what the cap allows, not a billion-entry list.
        wanted = min(wanted, self.pods_left(job) + 1)
        if wanted <= 0:
            return []
        if failed:
            last = max((t for p in failed if (t := _finished_at(p)) is not None), default=None)
            delay = min(BACKOFF_SECONDS * 2 ** (len(failed) - 1), MAX_BACKOFF_SECONDS)
            if last is not None and self.clock.now().timestamp() < last + delay:
                self.wake_at(
                    key, self.clock.monotonic() + last + delay - self.clock.now().timestamp()
                )
                return []
        indexes: list[int | None] = [None] * wanted
        if indexed and completions is not None:
            busy = done_indexes | {i for p in active if (i := completion_index(p)) is not None}
            free = (i for i in range(completions) if i not in busy)
            indexes = list(itertools.islice(free, wanted))
        made = []
        for index in indexes:
            created = await self.create_pod(job, self._pod(job, index))
            if created is None:
                break
            made.append(created)
        return made

    def _pod(self, job: dict[str, Any], index: int | None) -> dict[str, Any]:
        meta = job["metadata"]
        name, uid = meta["name"], meta.get("uid", "")
        labels = {
            JOB_CONTROLLER_UID_LABEL: uid,
            JOB_NAME_LABEL: name,
            LEGACY_CONTROLLER_UID_LABEL: uid,
            LEGACY_JOB_NAME_LABEL: name,
        }
        annotations = {}
        prefix = f"{name}-"
        if index is not None:
            labels[JOB_COMPLETION_INDEX] = str(index)
            annotations[JOB_COMPLETION_INDEX] = str(index)
            prefix = f"{name}-{index}-"
        return pod_from_template(
            job,
            (job.get("spec") or {}).get("template") or {},
            generate_name=prefix,
            labels=labels,
            annotations=annotations,
        )

    def _with_condition(
        self, status: dict[str, Any], kind: str, reason: str, message: str
    ) -> dict[str, Any]:
        conditions = [c for c in status.get("conditions") or () if c.get("type") != kind]
        old = next((c for c in status.get("conditions") or () if c.get("type") == kind), None)
        if old is not None and old.get("status") == "True":
            return status
        now = format_time(self.clock.now())
        condition = {
            "type": kind,
            "status": "True",
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
        if reason:
            condition.update(reason=reason, message=message)
        return {**status, "conditions": [*conditions, condition]}

    @staticmethod
    def _without_condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
        conditions = [c for c in status.get("conditions") or () if c.get("type") != kind]
        out = {**status, "conditions": conditions}
        if not conditions:
            del out["conditions"]
        return out

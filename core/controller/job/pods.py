"""Pods and the PodGroup of a vcjob.

Objects are created by name and an existing one is left alone, so replaying events, or a
second controller on the same store, creates nothing twice. Deleting goes through one loop
(:meth:`JobPods._delete_pods`) for a sync and a kill alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, JobEventReason
from stromboli.core.api.keys import object_key
from stromboli.core.cluster.errors import AlreadyExistsError, ApiError, NotFoundError
from stromboli.core.controller.job import build
from stromboli.core.controller.job.base import (
    PENDING_REPORT_AGAIN,
    POD,
    PODGROUP,
    Parsed,
    SyncFailure,
)
from stromboli.core.controller.job.intake import JobIntake
from stromboli.core.controller.job.plugins import JobPluginError
from stromboli.core.controller.job.policies import (
    is_out_of_sync,
)
from stromboli.core.controller.job.spec import JobView, TaskView
from stromboli.core.controller.job.status import JobStatus


class JobPods(JobIntake):
    """Creation and deletion of the pods and the PodGroup of a job."""

    async def _create_pod(
        self,
        job: dict[str, Any],
        parsed: Parsed,
        task: TaskView,
        index: int,
        status: JobStatus,
        forwarding: bool,
    ) -> tuple[dict[str, Any] | None, str]:
        """Create one pod; returns (the created pod or None if it existed, an error text)."""
        view = parsed.view
        assert view is not None
        pod = build.build_pod(
            job,
            view,
            task,
            index,
            version=status.version,
            retry_count=status.retry_count,
            forwarding=forwarding,
        )
        name = pod["metadata"]["name"]
        try:
            for plugin in parsed.plugins:
                plugin.on_pod_create(pod, task.name, index)
            if self.mutate_pod is not None:
                pod = self.mutate_pod(pod)
        except (JobPluginError, ValueError) as err:
            return None, f"pod {name}: {err}"
        try:
            created = await self.store.create(pod)
        except AlreadyExistsError:
            return None, ""
        except ApiError as err:
            return None, f"pod {name}: {err}"
        self.writes += 1
        self.pods.setdefault(view.key, {})[name] = created
        if self.metrics is not None:
            self._observe_creation(job, created)
        return created, ""

    def _observe_creation(self, job: Mapping[str, Any], pod: Mapping[str, Any]) -> None:
        """Job-to-pod latency as Volcano measures it: the pod's creationTimestamp minus the
        job's (both stamped by the API server, so whole seconds on a real cluster)."""
        assert self.metrics is not None
        created = pod["metadata"].get("creationTimestamp")
        if not created:
            return
        self.metrics.observe_pod_creation(1000.0 * self._since_created(job, created))

    async def _delete_pods(
        self,
        job: Mapping[str, Any],
        view: JobView,
        pods: list[dict[str, Any]],
        *,
        mark_out_of_sync: bool,
    ) -> int:
        """Delete ``pods``; returns how many are gone. A kill marks each pod out of sync first
        (so that its deletion is not taken for an eviction); a sync deletes pods that are out
        of sync already, or beyond the replicas. Any failure: a Warning and a SyncFailure."""
        errors: list[str] = []
        for pod in pods:
            error = await self._mark_out_of_sync(view, pod) if mark_out_of_sync else ""
            if not error:
                error = await self._delete_pod(view, pod)
            if error:
                errors.append(error)
        if errors:
            await self._event(
                job, "Warning", JobEventReason.FAILED_DELETE, f"Error deleting pods: {errors}"
            )
            raise SyncFailure(f"failed to delete {len(errors)} of {len(pods)} pods")
        return len(pods)

    async def _delete_pod(self, view: JobView, pod: Mapping[str, Any]) -> str:
        name = pod["metadata"]["name"]
        try:
            await self.store.delete(*POD, name, view.namespace)
        except NotFoundError:
            pass
        except ApiError as err:
            return f"pod {name}: {err}"
        else:
            self.writes += 1
            self._deleted.add(pod["metadata"].get("uid"))
        self.pods.get(view.key, {}).pop(name, None)
        return ""

    async def _mark_out_of_sync(self, view: JobView, pod: Mapping[str, Any]) -> str:
        """Annotate the pod before deleting it, so that its deletion is not taken for an
        eviction (by this or another controller replica)."""
        if is_out_of_sync(pod):
            return ""
        name = pod["metadata"]["name"]
        try:
            patched = await self.store.patch(
                *POD,
                name,
                {"metadata": {"annotations": {k.CONTROLLER_OUT_OF_SYNC_KEY: "true"}}},
                namespace=view.namespace,
            )
        except NotFoundError:
            return ""
        except ApiError as err:
            return f"pod {name}: {err}"
        self.writes += 1
        self.pods.setdefault(view.key, {})[name] = patched
        return ""

    # --- PodGroup ----------------------------------------------------------------------------

    def _podgroup_of(self, view: JobView) -> dict[str, Any] | None:
        pg = self.podgroups.get((view.namespace, build.podgroup_name(view.name, view.uid)))
        if pg is None:
            pg = self.podgroups.get((view.namespace, view.name))  # legacy name
        return pg

    def _priority_of(self, name: str) -> int | None:
        return self.priority_classes.get(name)

    async def _ensure_podgroup(self, job: dict[str, Any], view: JobView) -> None:
        existing = self._podgroup_of(view)
        if existing is None:
            pg = build.build_podgroup(job, view, self._priority_of)
            try:
                created = await self.store.create(pg)
            except AlreadyExistsError:
                return
            except ApiError as err:
                await self._event(
                    job,
                    "Warning",
                    JobEventReason.POD_GROUP_ERROR,
                    f"Failed to create PodGroup, err: {err}",
                )
                raise SyncFailure(f"PodGroup: {err}") from None
            self.writes += 1
            self._seen_podgroup("ADDED", created)
            return
        wanted = build.podgroup_spec(view, self._priority_of)
        patch = build.podgroup_drift(existing.get("spec") or {}, wanted)
        if not patch:
            return
        ns, name = object_key(existing)
        try:
            written = await self.store.patch(*PODGROUP, name, {"spec": patch}, namespace=ns)
        except NotFoundError:
            return
        except ApiError as err:
            await self._event(
                job,
                "Warning",
                JobEventReason.POD_GROUP_ERROR,
                f"Failed to update PodGroup, err: {err}",
            )
            raise SyncFailure(f"PodGroup: {err}") from None
        self.writes += 1
        self.podgroups[(ns, name)] = written

    async def _delete_podgroups(self, view: JobView) -> None:
        """Delete the job's PodGroup, under its name and under the legacy one (the job's)."""
        for name in (build.podgroup_name(view.name, view.uid), view.name):
            if (view.namespace, name) not in self.podgroups:
                continue
            try:
                await self.store.delete(*PODGROUP, name, view.namespace)
            except NotFoundError:
                continue
            self.writes += 1
            self.podgroups.pop((view.namespace, name), None)
            self._forget_pg_queue((view.namespace, name))
            self.queues.enqueue(view.queue, Action.SYNC_QUEUE)

    async def _podgroup_event(
        self, job: dict[str, Any], view: JobView, pg: Mapping[str, Any]
    ) -> None:
        """Warn while the latest true condition of the PodGroup is not ``Scheduled``: once per
        condition the scheduler wrote (and again every ``PENDING_REPORT_AGAIN`` seconds while
        it stands), not once per sync. A job syncs several times between two scheduler
        cycles (its pods are created, bound, started); each repeat would be one more write of
        the same event, telling nothing new."""
        latest: Mapping[str, Any] | None = None
        for condition in (pg.get("status") or {}).get("conditions") or ():
            if condition.get("status") != "True":
                continue
            if latest is None or str(condition.get("lastTransitionTime") or "") > str(
                latest.get("lastTransitionTime") or ""
            ):
                latest = condition
        if latest is None or latest.get("type") == k.PodGroupConditionType.SCHEDULED:
            self._pending_reported.pop(view.key, None)
            return
        message = (
            f"PodGroup {view.namespace}:{view.name} {str(latest.get('type')).lower()}, "
            f"reason: {latest.get('message') or ''}"
        )
        seen = (
            str((pg.get("metadata") or {}).get("uid") or ""),
            str(latest.get("transitionID") or ""),
            str(latest.get("lastTransitionTime") or ""),
            message,
        )
        now = self.clock.monotonic()
        reported = self._pending_reported.get(view.key)
        if (
            reported is not None
            and reported[0] == seen
            and now - reported[1] < PENDING_REPORT_AGAIN
        ):
            return
        self._pending_reported[view.key] = (seen, now)
        await self._event(job, "Warning", JobEventReason.POD_GROUP_PENDING, message)

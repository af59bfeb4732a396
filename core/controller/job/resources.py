"""What a vcjob owns beside pods and its PodGroup, recorded in ``status.controlledResources``
as Volcano does: the objects of its plugins (Services, ConfigMaps, Secrets, NetworkPolicies)
and the PVCs of ``spec.volumes``.

Someone else's object under a plugin's name is never overwritten, and a refusal to delete it
does not hold the job up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.constants import JobEventReason
from stromboli.core.cluster.errors import AlreadyExistsError, ApiError, NotFoundError
from stromboli.core.controller.job import build
from stromboli.core.controller.job.base import (
    PVC,
    Parsed,
    SyncFailure,
)
from stromboli.core.controller.job.plugins import JobPluginError
from stromboli.core.controller.job.pods import JobPods
from stromboli.core.controller.job.spec import JobView
from stromboli.core.controller.job.status import JobStatus


class JobResources(JobPods):
    """Plugin objects and volumes of a job."""

    async def _ensure_plugin_objects(
        self, job: dict[str, Any], parsed: Parsed, status: JobStatus
    ) -> None:
        """Objects of the job's plugins: created when the plugin has none recorded in
        ``status.controlledResources``, refreshed when the job's spec changed."""
        if parsed.plugin_error:
            await self._event(
                job,
                "Warning",
                JobEventReason.PLUGIN_ERROR,
                f"Execute plugin when job add failed, err: {parsed.plugin_error}",
            )
            raise SyncFailure(parsed.plugin_error)
        uid = str(job["metadata"].get("uid") or "")
        refresh = self._updated_generation.get(uid) != parsed.generation
        try:
            for plugin in parsed.plugins:
                key = plugin.controlled_resource_key
                if status.controlled_resources.get(key) != plugin.name:
                    for obj in plugin.on_job_add():
                        await self._apply(job, obj, replace=False)
                    status.controlled_resources[key] = plugin.name
                if refresh:
                    for obj in plugin.on_job_update():
                        await self._apply(job, obj, replace=True)
        except (JobPluginError, ValueError, ApiError) as err:
            await self._event(
                job,
                "Warning",
                JobEventReason.PLUGIN_ERROR,
                f"Execute plugin when job add failed, err: {err}",
            )
            raise SyncFailure(str(err)) from None
        self._updated_generation[uid] = parsed.generation

    async def _apply(self, job: Mapping[str, Any], obj: dict[str, Any], *, replace: bool) -> None:
        """Create ``obj`` (owned by the job); with ``replace``, also bring an existing one's
        content (everything but metadata and status) up to date."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", job["metadata"].get("namespace", "default"))
        if not meta.get("ownerReferences"):
            meta["ownerReferences"] = [build.controller_ref(job)]
        try:
            await self.store.create(obj)
        except AlreadyExistsError:
            if not replace:
                return
        else:
            self.writes += 1
            return
        current = await self.store.get(
            obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"]
        )
        if not _controlled_by(current, job):
            # Someone else's object under the plugin's name: never overwrite it.
            raise JobPluginError(
                f"{obj['kind']} {meta['namespace']}/{meta['name']} exists and is not controlled "
                f"by job {job['metadata'].get('name')}; delete or rename it"
            )
        content = {key: v for key, v in obj.items() if key not in ("metadata", "status")}
        if all(current.get(key) == v for key, v in content.items()):
            return
        await self.store.update({**current, **content})
        self.writes += 1

    async def _delete_plugin_objects(
        self, job: Mapping[str, Any], parsed: Parsed, status: JobStatus
    ) -> None:
        namespace = str(job["metadata"].get("namespace") or "default")
        for plugin in parsed.plugins:
            key = plugin.controlled_resource_key
            if status.controlled_resources.get(key) != plugin.name:
                continue
            for api_version, kind, name in plugin.on_job_delete():
                try:
                    await self.store.delete(api_version, kind, name, namespace)
                except NotFoundError:
                    continue
                except ApiError as err:
                    if err.code != 403:
                        raise
                    # Refused (deploy/rbac.yaml's admission policy lets the controller delete
                    # only objects of vcjobs): someone else's object under the plugin's name
                    # stays, and the job is not held up by it.
                    await self._event(
                        job,
                        "Warning",
                        JobEventReason.PLUGIN_ERROR,
                        f"{kind} {namespace}/{name} of plugin {plugin.name} not deleted: {err}",
                    )
                    continue
                self.writes += 1
            del status.controlled_resources[key]

    # --- volumes -----------------------------------------------------------------------------

    async def _ensure_volumes(
        self, job: dict[str, Any], view: JobView, status: JobStatus
    ) -> dict[str, Any]:
        """PVCs of ``spec.volumes``: a volume with only a claim spec gets a PVC
        ``<job>-pvc-<12>`` (its name written back to the spec); a named claim must exist."""
        volumes = [dict(v) for v in (job.get("spec") or {}).get("volumes") or ()]
        changed = False
        for index, volume in enumerate(volumes):
            claim = str(volume.get("volumeClaimName") or "")
            if not claim:
                claim = await self._new_claim(job, view, index, volume.get("volumeClaim"))
                volume["volumeClaimName"] = claim
                changed = True
            elif not await self._claim_exists(view.namespace, claim):
                message = (
                    f"pvc {claim} is not found, the job will be in the Pending state until "
                    "the PVC is created"
                )
                await self._event(
                    job,
                    "Warning",
                    JobEventReason.PVC_ERROR,
                    f"Failed to create PVC, err: {message}",
                )
                raise SyncFailure(message)
            status.controlled_resources[f"volume-pvc-{claim}"] = claim
        if not changed:
            return job
        updated = {**job, "spec": {**job["spec"], "volumes": volumes}}
        written = await self.store.update(updated)
        self.writes += 1
        self._cache_job(written)
        return written

    async def _claim_exists(self, namespace: str, name: str) -> bool:
        try:
            await self.store.get(*PVC, name, namespace)
        except NotFoundError:
            return False
        return True

    async def _new_claim(
        self, job: Mapping[str, Any], view: JobView, index: int, claim_spec: Any
    ) -> str:
        for attempt in range(16):
            name = build.pvc_name(view.name, view.uid, index, attempt)
            try:
                existing = await self.store.get(*PVC, name, view.namespace)
            except NotFoundError:
                break
            owners = (existing.get("metadata") or {}).get("ownerReferences") or ()
            if any(ref.get("uid") == view.uid for ref in owners):
                return name  # created by an earlier attempt of this controller
        else:
            raise SyncFailure(f"no free PVC name for job {view.name} volume {index}")
        if isinstance(claim_spec, Mapping):
            pvc = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": name,
                    "namespace": view.namespace,
                    "ownerReferences": [build.controller_ref(job)],
                },
                "spec": dict(claim_spec),
            }
            try:
                await self.store.create(pvc)
            except ApiError as err:
                await self._event(
                    job, "Warning", JobEventReason.PVC_ERROR, f"Failed to create PVC, err: {err}"
                )
                raise SyncFailure(f"PVC {name}: {err}") from None
            self.writes += 1
        return name


# --- small helpers ---------------------------------------------------------------------------


def _controlled_by(obj: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is controlled by a vcjob of ``job``'s name: this one, or an earlier one
    of that name whose objects the garbage collector has not removed yet."""
    name = job["metadata"].get("name")
    return any(
        ref.get("controller")
        and ref.get("kind") == "Job"
        and str(ref.get("apiVersion") or "").startswith(f"{k.BATCH_GROUP}/")
        and ref.get("name") == name
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    )

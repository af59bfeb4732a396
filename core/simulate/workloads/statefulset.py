"""StatefulSets: pods ``<statefulset>-0`` … ``<statefulset>-(replicas-1)``.

Each pod carries ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index`` and
``controller-revision-hash`` (``<statefulset>-<hash>``), and gets ``spec.hostname`` (its name)
and ``spec.subdomain`` (``spec.serviceName``). With ``podManagementPolicy: OrderedReady`` (the
default) a pod is created only once every lower ordinal is Running and Ready, and extra pods
are removed from the highest ordinal, one at a time; ``Parallel`` creates and removes them all
at once. A finished pod is deleted and made again under the same name, as the StatefulSet
controller does.
"""

from __future__ import annotations

import copy
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.keys import Key
from stromboli.core.cluster.errors import AlreadyExistsError, ApiError
from stromboli.core.simulate.workloads.common import (
    CONTROLLER_REVISION_HASH_LABEL,
    POD_INDEX_LABEL,
    STATEFULSET_POD_NAME_LABEL,
    OwnerController,
    is_active,
    is_ready,
    omit_zeros,
    pod_from_template,
    replicas,
    template_hash,
)


def ordinal(statefulset_name: str, pod_name: str) -> int | None:
    """The ordinal of ``pod_name`` in the StatefulSet, or None if it is not one of its names."""
    prefix, _, number = pod_name.rpartition("-")
    if prefix != statefulset_name or not number.isdigit():
        return None
    return int(number)


class StatefulSetController(OwnerController):
    noun = "statefulset"
    owner_kind = (k.APPS_V1, "StatefulSet")

    async def _sync(self, key: Key) -> None:
        sts = self.owners.get(key)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return
        name = sts["metadata"]["name"]
        spec = sts.get("spec") or {}
        want = replicas(spec)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        revision = f"{name}-{template_hash(spec.get('template') or {})}"
        pods: dict[int, dict[str, Any]] = {}
        for pod in self.owned(sts):
            number = ordinal(name, pod["metadata"]["name"])
            if number is not None:
                pods[number] = pod
        # Finished pods go first: they are made again under the same name (unless no more
        # may be made: then the finished pod stays, to show how it ended).
        for number, pod in sorted(pods.items()) if not self.at_cap(sts) else ():
            finished = not is_active(pod) and not pod["metadata"].get("deletionTimestamp")
            if finished and await self.delete_child(pod):
                del pods[number]
                await self.event(
                    sts,
                    "Normal",
                    "SuccessfulDelete",
                    f"delete Pod {pod['metadata']['name']} in StatefulSet {name} successful",
                )
        for number in range(want):
            existing = pods.get(number)
            if existing is None:
                await self._claims(sts, number)
                created = await self.create_pod(sts, self._pod(sts, number, revision))
                if created is None:
                    break
                pods[number] = created
                if not parallel:
                    break
            elif not parallel and not is_ready(existing):
                break
        extra = sorted((n for n in pods if n >= want), reverse=True)
        for number in extra if parallel else extra[:1]:
            pod = pods[number]
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if await self.delete_child(pod):
                del pods[number]
        active = [p for p in pods.values() if is_active(p)]
        ready = sum(1 for p in active if is_ready(p))
        status = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(active),
            "readyReplicas": ready,
            "currentReplicas": len(active),
            "updatedReplicas": len(active),
            "availableReplicas": ready,
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        await self.write_status(
            sts, omit_zeros(status, keep=("replicas", "observedGeneration", "availableReplicas"))
        )

    async def _claims(self, sts: dict[str, Any], number: int) -> None:
        """The pod's PersistentVolumeClaims from ``volumeClaimTemplates``
        (``<claim>-<statefulset>-<ordinal>``), kept when the pod is made again."""
        meta = sts["metadata"]
        for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or ():
            claim = (template.get("metadata") or {}).get("name")
            if not claim:
                continue
            pvc = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": f"{claim}-{meta['name']}-{number}",
                    "namespace": meta.get("namespace") or "default",
                    "labels": dict(
                        ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
                    ),
                },
                "spec": copy.deepcopy(template.get("spec") or {}),
            }
            try:
                await self.store.create(pvc)
            except AlreadyExistsError:
                continue
            except ApiError as err:
                await self.event(sts, "Warning", "FailedCreate", f"create Claim failed: {err}")
                continue
            self.writes += 1

    def _pod(self, sts: dict[str, Any], number: int, revision: str) -> dict[str, Any]:
        name = f"{sts['metadata']['name']}-{number}"
        spec = sts.get("spec") or {}
        pod = pod_from_template(
            sts,
            spec.get("template") or {},
            name=name,
            labels={
                CONTROLLER_REVISION_HASH_LABEL: revision,
                STATEFULSET_POD_NAME_LABEL: name,
                POD_INDEX_LABEL: str(number),
            },
        )
        pod_spec = pod["spec"]
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        claims = [c.get("metadata", {}).get("name") for c in spec.get("volumeClaimTemplates") or ()]
        if claims:
            volumes = [v for v in pod_spec.get("volumes") or () if v.get("name") not in claims]
            volumes += [
                {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-{name}"}}
                for claim in claims
                if claim
            ]
            pod_spec["volumes"] = copy.deepcopy(volumes)
        return pod

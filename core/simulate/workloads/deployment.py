"""Deployments: one ReplicaSet ``<deployment>-<pod-template-hash>`` holding the replicas.

The ReplicaSet carries the ``pod-template-hash`` label on itself, its selector and its pod
template, and the ``deployment.kubernetes.io/revision``, ``desired-replicas`` and
``max-replicas`` annotations, as kube-controller-manager writes them. The simulator never
edits an object after it arrives, so there is no rollout: one template, one ReplicaSet,
scaled to ``spec.replicas``. The Deployment's status and its ``Available`` and
``Progressing`` conditions follow the ReplicaSet's.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.keys import Key
from stromboli.core.clock import format_time
from stromboli.core.cluster.errors import AlreadyExistsError, ApiError
from stromboli.core.simulate.workloads.common import (
    DEPLOYMENT_REVISION,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    POD_TEMPLATE_HASH_LABEL,
    OwnerController,
    omit_zeros,
    owner_reference,
    replicas,
    template_hash,
)

REPLICASET = (k.APPS_V1, "ReplicaSet")


def max_surge(spec: dict[str, Any], want: int) -> int:
    """``strategy.rollingUpdate.maxSurge`` as a count (default 25%, rounded up)."""
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(value, str) and value.endswith("%"):
        try:
            return max(math.ceil(want * float(value[:-1]) / 100), 0)
        except (ValueError, OverflowError):  # not a number, or 1e400%: no surge to show
            return 0
    return max(value, 0) if isinstance(value, int) and not isinstance(value, bool) else 0


class DeploymentController(OwnerController):
    noun = "deployment"
    owner_kind = (k.APPS_V1, "Deployment")
    child_kind = REPLICASET

    def replicaset_for(self, deployment: dict[str, Any]) -> dict[str, Any]:
        spec = deployment.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        digest = template_hash(template)
        want = replicas(spec)
        meta = template.setdefault("metadata", {})
        labels = {**(meta.get("labels") or {}), POD_TEMPLATE_HASH_LABEL: digest}
        meta["labels"] = labels
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {
            **(selector.get("matchLabels") or {}),
            POD_TEMPLATE_HASH_LABEL: digest,
        }
        dmeta = deployment["metadata"]
        return {
            "apiVersion": k.APPS_V1,
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{dmeta['name']}-{digest}",
                "namespace": dmeta.get("namespace") or "default",
                "labels": labels,
                "annotations": {
                    **(dmeta.get("annotations") or {}),
                    DEPLOYMENT_REVISION: "1",
                    DESIRED_REPLICAS: str(want),
                    MAX_REPLICAS: str(want + max_surge(spec, want)),
                },
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {
                "replicas": want,
                "minReadySeconds": spec.get("minReadySeconds", 0),
                "selector": selector,
                "template": template,
            },
        }

    async def _sync(self, key: Key) -> None:
        deployment = self.owners.get(key)
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            return
        spec = deployment.get("spec") or {}
        want = replicas(spec)
        wanted = self.replicaset_for(deployment)
        current = next(
            (
                rs
                for rs in self.owned(deployment)
                if rs["metadata"]["name"] == wanted["metadata"]["name"]
            ),
            None,
        )
        if current is None and not spec.get("paused"):
            current = await self._create_replicaset(deployment, wanted)
        elif current is not None and replicas(current.get("spec") or {}) != want:
            current = await self._scale(deployment, current, want)
        await self.write_status(deployment, self._status(deployment, current, want))

    async def _create_replicaset(
        self, deployment: dict[str, Any], replicaset: dict[str, Any]
    ) -> dict[str, Any] | None:
        try:
            created = await self.store.create(replicaset)
        except AlreadyExistsError:
            return None  # another's, or ours not seen yet: the next event brings it
        except ApiError as err:
            await self.event(deployment, "Warning", "FailedCreate", f"Error creating: {err}")
            return None
        self.writes += 1
        want = replicas(replicaset["spec"])
        await self.event(
            deployment,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled up replica set {created['metadata']['name']} from 0 to {want}",
        )
        return created

    async def _scale(
        self, deployment: dict[str, Any], replicaset: dict[str, Any], want: int
    ) -> dict[str, Any] | None:
        before = replicas(replicaset.get("spec") or {})
        try:
            updated = await self.store.update(
                {**replicaset, "spec": {**replicaset["spec"], "replicas": want}}
            )
        except ApiError:
            return replicaset  # a newer version is on its way; the next event resyncs
        self.writes += 1
        way = "up" if want > before else "down"
        await self.event(
            deployment,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {way} replica set {replicaset['metadata']['name']} from {before} to {want}",
        )
        return updated

    def _status(
        self, deployment: dict[str, Any], replicaset: dict[str, Any] | None, want: int
    ) -> dict[str, Any]:
        rs_status = (replicaset or {}).get("status") or {}
        have = int(rs_status.get("replicas") or 0)
        ready = int(rs_status.get("readyReplicas") or 0)
        available = int(rs_status.get("availableReplicas") or 0)
        previous = {
            c.get("type"): c for c in (deployment.get("status") or {}).get("conditions") or ()
        }
        name = (replicaset or {}).get("metadata", {}).get("name", "")
        conditions = [
            self._condition(
                previous,
                "Available",
                available >= want,
                "MinimumReplicasAvailable" if available >= want else "MinimumReplicasUnavailable",
                "Deployment has minimum availability."
                if available >= want
                else "Deployment does not have minimum availability.",
            ),
            self._condition(
                previous,
                "Progressing",
                True,
                "NewReplicaSetAvailable" if available >= want else "ReplicaSetUpdated",
                f'ReplicaSet "{name}" has successfully progressed.'
                if available >= want
                else f'ReplicaSet "{name}" is progressing.',
            ),
        ]
        status = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": have,
            "updatedReplicas": have,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(want - available, 0),
        }
        return {**omit_zeros(status, keep=("observedGeneration",)), "conditions": conditions}

    def _condition(
        self,
        previous: dict[str, dict[str, Any]],
        kind: str,
        true: bool,
        reason: str,
        message: str,
    ) -> dict[str, Any]:
        status = "True" if true else "False"
        now = format_time(self.clock.now())
        old = previous.get(kind) or {}
        same = old.get("status") == status
        return {
            "type": kind,
            "status": status,
            "lastUpdateTime": old.get("lastUpdateTime", now)
            if same and old.get("reason") == reason
            else now,
            "lastTransitionTime": old.get("lastTransitionTime", now) if same else now,
            "reason": reason,
            "message": message,
        }

"""ReplicaSets: ``spec.replicas`` active pods, named ``<replicaset>-<random>``.

A pod that finished (``Succeeded`` or ``Failed``, from the simulator's runtime annotations)
no longer counts and is replaced, as kube-controller-manager replaces it; the finished pod
stays, as it does until the pod garbage collector's threshold. Extra pods are deleted,
unscheduled ones first, then the newest.
"""

from __future__ import annotations

from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.api.keys import Key
from stromboli.core.simulate.workloads.common import (
    OwnerController,
    is_active,
    is_ready,
    omit_zeros,
    pod_from_template,
    replicas,
)


class ReplicaSetController(OwnerController):
    noun = "replicaset"
    owner_kind = (k.APPS_V1, "ReplicaSet")

    async def _sync(self, key: Key) -> None:
        rs = self.owners.get(key)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        spec = rs.get("spec") or {}
        want = replicas(spec)
        active = [p for p in self.owned(rs) if is_active(p)]
        template = spec.get("template") or {}
        for _ in range(want - len(active)):
            pod = pod_from_template(rs, template, generate_name=f"{rs['metadata']['name']}-")
            created = await self.create_pod(rs, pod)
            if created is None:
                break
            active.append(created)
        if len(active) > want:
            # Unscheduled first, then the newest: the cheapest to lose.
            doomed = sorted(
                active, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True
            )
            doomed.sort(key=lambda p: bool((p.get("spec") or {}).get("nodeName")))
            doomed = sorted(doomed[: len(active) - want], key=lambda p: p["metadata"]["name"])
            for pod in doomed:
                if await self.delete_child(pod):
                    active.remove(pod)
                    await self.event(
                        rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}"
                    )
        ready = sum(1 for p in active if is_ready(p))
        status: dict[str, Any] = {
            "replicas": len(active),
            "fullyLabeledReplicas": len(active),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        await self.write_status(rs, omit_zeros(status, keep=("replicas",)))

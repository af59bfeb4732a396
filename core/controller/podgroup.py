"""The PodGroup controller's enrolment of plain pods, as Volcano's pg-controller does it.

A pod for one of our schedulers that names no PodGroup gets a one-member group of its own,
``podgroup-<controller owner uid>`` (or ``podgroup-<pod uid>`` without an owner), and the
``scheduling.k8s.io/group-name`` annotation pointing at it, so the scheduler can treat every
pod as part of a gang.
"""

from __future__ import annotations

import logging

from stromboli.core.api import constants as k
from stromboli.core.cluster.errors import AlreadyExistsError, ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.controller.job.quota import pod_quota_usage, quota_list

log = logging.getLogger(__name__)

#: Pod annotations copied onto the generated PodGroup.
PROPAGATED_ANNOTATIONS = (
    k.PREEMPTABLE_KEY,
    k.COOLDOWN_TIME_KEY,
    k.REVOCABLE_ZONE_KEY,
    k.JDB_MIN_AVAILABLE_KEY,
    k.JDB_MAX_UNAVAILABLE_KEY,
    k.SLA_WAITING_TIME_KEY,
)


def fallback_group_name(pod: dict) -> str | None:
    """``podgroup-<controller owner uid>``, or ``podgroup-<pod uid>`` without an owner."""
    meta = pod.get("metadata") or {}
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    uid = owner.get("uid") if owner else meta.get("uid")
    return f"podgroup-{uid}" if uid else None


def needs_podgroup(pod: dict, scheduler_names: set[str]) -> bool:
    """A pod of ours naming no group, or naming the one this controller would make: the
    webhook's enrolment (``/pods/mutate``) writes that name at CREATE, before the group
    exists, so the group is made here as for a pod that names none."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if spec.get("schedulerName", "default-scheduler") not in scheduler_names:
        return False
    named = (meta.get("annotations") or {}).get(k.GROUP_NAME_ANNOTATION)
    if named and named != fallback_group_name(pod):
        return False
    return not spec.get("nodeName") and not meta.get("deletionTimestamp")


def min_member_of(pod: dict) -> int:
    """The pod's ``scheduling.volcano.sh/group-min-member`` (the webhook copies it from the
    workload owner), 1 when absent or not a count."""
    text = str((pod["metadata"].get("annotations") or {}).get(k.GROUP_MIN_MEMBER_ANNOTATION, ""))
    text = text.strip()
    if text.isascii() and text.isdigit() and len(text) <= 10 and 0 < int(text) < 2**31:
        return int(text)
    return 1


def podgroup_for(pod: dict, min_member: int = 1) -> dict:
    """The one-member PodGroup Volcano's controller would create for ``pod``."""
    meta = pod["metadata"]
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    name = f"podgroup-{owner['uid'] if owner else meta['uid']}"
    usage = pod_quota_usage(spec)
    pg_spec: dict = {
        "minMember": min_member,
        "queue": annotations.get(k.QUEUE_NAME_ANNOTATION_KEY) or k.DEFAULT_QUEUE,
        # Volcano sizes the group's admission request as the pod's quota usage × minMember
        # (cpu, memory, pods, count/pods, requests.*, limits.*).
        "minResources": quota_list(usage.multi(min_member)),
    }
    if spec.get("priorityClassName"):
        pg_spec["priorityClassName"] = spec["priorityClassName"]
    mode = annotations.get(k.NETWORK_TOPOLOGY_MODE_KEY)
    if mode:
        topology: dict = {"mode": mode}
        tier = annotations.get(k.NETWORK_TOPOLOGY_HIGHEST_TIER_KEY)
        if tier is not None:
            try:
                topology["highestTierAllowed"] = int(tier)
            except (TypeError, ValueError):
                raise ValueError(
                    f"metadata.annotations[{k.NETWORK_TOPOLOGY_HIGHEST_TIER_KEY}]: "
                    f"{str(tier)[:40]!r} is not a whole number"
                ) from None
        pg_spec["networkTopology"] = topology
    owner_ref = owner or {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "ownerReferences": [owner_ref],
            "annotations": {a: annotations[a] for a in PROPAGATED_ANNOTATIONS if a in annotations},
        },
        "spec": pg_spec,
        "status": {"phase": "Pending"},
    }


async def enrol_pod(store: ClusterStore, pod: dict) -> str | None:
    """Create (or reuse) the pod's PodGroup and annotate the pod; returns the group name."""
    pg = podgroup_for(pod, min_member_of(pod))
    name = pg["metadata"]["name"]
    meta = pod["metadata"]
    try:
        await store.create(pg)
    except AlreadyExistsError:
        pass
    except ApiError as err:
        log.warning(
            "could not create PodGroup for pod %s/%s: %s", meta.get("namespace"), meta["name"], err
        )
        return None
    if (meta.get("annotations") or {}).get(k.GROUP_NAME_ANNOTATION) == name:
        return name  # named at admission: only the group was missing
    try:
        await store.patch(
            "v1",
            "Pod",
            meta["name"],
            {"metadata": {"annotations": {k.GROUP_NAME_ANNOTATION: name}}},
            namespace=meta.get("namespace"),
        )
    except NotFoundError:
        return None
    return name

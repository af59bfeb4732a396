"""The one-member group of a plain pod (a pod of ours naming no PodGroup), as Volcano's
pg-controller makes it: ``podgroup-<controller owner uid>`` (``podgroup-<pod uid>`` without an
owner), minMember from ``scheduling.volcano.sh/group-min-member`` or 1, the queue from the pod.

Pure, so that the controller (which creates the object, ``--plain-pod-groups=object``) and the
scheduler cache (which keeps it in memory only, ``--plain-pod-groups=memory``) build the very
same group and schedule a pod the same way whichever mode makes it.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.quota import pod_quota_usage, quota_list

#: Where a plain pod's group lives: a stored PodGroup (Volcano's way) or the scheduler's memory.
PlainPodGroups = Literal["object", "memory"]
PLAIN_POD_GROUP_MODES: Final[tuple[str, ...]] = get_args(PlainPodGroups)
OBJECT: Final = "object"
MEMORY: Final = "memory"

#: Pod annotations copied onto the generated PodGroup.
PROPAGATED_ANNOTATIONS = (
    k.PREEMPTABLE_KEY,
    k.COOLDOWN_TIME_KEY,
    k.REVOCABLE_ZONE_KEY,
    k.JDB_MIN_AVAILABLE_KEY,
    k.JDB_MAX_UNAVAILABLE_KEY,
    k.SLA_WAITING_TIME_KEY,
)


def plain_pod_groups_mode(value: str, where: str = "--plain-pod-groups") -> PlainPodGroups:
    """``value`` as a mode, or a ValueError naming the choices."""
    if value == OBJECT:
        return OBJECT
    if value == MEMORY:
        return MEMORY
    raise ValueError(f"{where}: {value[:40]!r} is not one of {', '.join(PLAIN_POD_GROUP_MODES)}")


def _controller_owner(meta: dict) -> dict | None:
    owners = meta.get("ownerReferences") or ()
    if not isinstance(owners, list | tuple):
        return None
    return next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)


def fallback_group_name(pod: dict) -> str | None:
    """``podgroup-<controller owner uid>``, or ``podgroup-<pod uid>`` without an owner."""
    meta = pod.get("metadata") or {}
    owner = _controller_owner(meta)
    uid = owner.get("uid") if owner else meta.get("uid")
    return f"podgroup-{uid}" if uid else None


def plain_group_name(pod: dict) -> str | None:
    """The group name of a plain pod: one naming no group, or naming the one the controller
    would make (the webhook's enrolment writes that name at CREATE); None for any other."""
    name = fallback_group_name(pod)
    named = ((pod.get("metadata") or {}).get("annotations") or {}).get(k.GROUP_NAME_ANNOTATION)
    return name if not named or named == name else None


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
    owner = _controller_owner(meta)
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

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
from stromboli.core.scheduler.api.plaingroup import (
    min_member_of,
    plain_group_name,
    podgroup_for,
)

log = logging.getLogger(__name__)


def needs_podgroup(pod: dict, scheduler_names: set[str]) -> bool:
    """A pod of ours naming no group, or naming the one this controller would make: the
    webhook's enrolment (``/pods/mutate``) writes that name at CREATE, before the group
    exists, so the group is made here as for a pod that names none."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if spec.get("schedulerName", "default-scheduler") not in scheduler_names:
        return False
    if plain_group_name(pod) is None:
        return False
    return not spec.get("nodeName") and not meta.get("deletionTimestamp")


async def enrol_pod(store: ClusterStore, pod: dict) -> str | None:
    """Annotate the pod, then create (or reuse) its PodGroup; returns the group name, or None
    when the pod is gone or the group could not be made.

    The pod is patched first so that the scheduler, which holds a pod naming a group that does
    not exist yet, finds the group with its pod when the group arrives: it enqueues and places
    it in one cycle and writes its status once (``Running``). Created first, the group was
    often enqueued empty, a status write of its own (``Inqueue``) and a gang event, before the
    annotated pod reached the scheduler. A failed create leaves the pod naming the group, as
    the webhook's enrolment does: the next event of the pod makes it."""
    pg = podgroup_for(pod, min_member_of(pod))
    name = pg["metadata"]["name"]
    meta = pod["metadata"]
    if (meta.get("annotations") or {}).get(k.GROUP_NAME_ANNOTATION) != name:
        try:
            await store.patch(
                "v1",
                "Pod",
                meta["name"],
                {"metadata": {"annotations": {k.GROUP_NAME_ANNOTATION: name}}},
                namespace=meta.get("namespace"),
            )
        except NotFoundError:
            return None  # gone: no group to collect later
    try:
        await store.create(pg)
    except AlreadyExistsError:
        pass
    except ApiError as err:
        log.warning(
            "could not create PodGroup for pod %s/%s: %s", meta.get("namespace"), meta["name"], err
        )
        return None
    return name

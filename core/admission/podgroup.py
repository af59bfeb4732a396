"""Volcano's validating admission rule for PodGroups (its ``/podgroups/validate`` webhook, on
create).

A PodGroup may only be created in an existing, open queue (a PodGroup naming no queue is left
to the CRD default), and a network topology may limit the tier by number or by name, not both.
``validate_podgroup_create`` returns the reasons to refuse, in Volcano's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.admission import shape
from stromboli.core.admission.queue import queue_not_found, queue_state
from stromboli.core.api import constants as k

TIER_CONFLICT = (
    "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously."
)


def _tier_conflict(topology: Mapping[str, Any] | None) -> bool:
    return bool(
        topology
        and topology.get("highestTierAllowed") is not None
        and topology.get("highestTierName")
    )


def validate_podgroup_create(
    podgroup: Mapping[str, Any], queues: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Reasons Volcano's webhook would refuse to create ``podgroup``; ``queues`` by name."""
    malformed = shape.problems(podgroup, shape.PODGROUP)
    if malformed:
        return malformed
    spec = podgroup.get("spec") or {}
    errors: list[str] = []
    queue_name = spec.get("queue") or ""
    if queue_name:
        queue = queues.get(queue_name)
        if queue is None:
            errors.append(f"unable to find queue: {queue_not_found(queue_name)}")
        else:
            state = queue_state(queue)
            if state != k.QueueState.OPEN:
                errors.append(
                    "can only submit PodGroup to queue with state `Open`, "
                    f"queue `{queue_name}` status is `{state}`."
                )
    if _tier_conflict(spec.get("networkTopology")):
        errors.append(TIER_CONFLICT)
    for policy in spec.get("subGroupPolicy") or []:
        if _tier_conflict(policy.get("networkTopology")):
            errors.append(f"in subGroupPolicy '{policy.get('name', '')}': {TIER_CONFLICT}")
            break
    return errors

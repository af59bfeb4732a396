"""Volcano's mutating admission rules as plain functions (reference §6, "Mutating rules").

The admission webhook serves these, and the simulator applies them to its input, so an object
is defaulted the same way wherever it enters. Each function returns a new object and leaves
its argument alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from stromboli.core.api import constants as k


def mutate_queue(queue: Mapping) -> dict:
    """Queue CREATE: ``reclaimable`` defaults to true, ``weight`` 0 or missing to 1, and a
    hierarchy path not starting at ``root`` is put under it."""
    out = copy.deepcopy(dict(queue))
    spec = out.setdefault("spec", {})
    if spec.get("reclaimable") is None:
        spec["reclaimable"] = True
    if not spec.get("weight"):
        spec["weight"] = k.DEFAULT_QUEUE_WEIGHT
    annotations = (out.get("metadata") or {}).get("annotations") or {}
    path = annotations.get(k.HIERARCHY_KEY)
    weights = annotations.get(k.HIERARCHY_WEIGHTS_KEY)
    if path and weights and not path.startswith(k.ROOT_QUEUE):
        annotations[k.HIERARCHY_KEY] = f"{k.ROOT_QUEUE}/{path}"
        annotations[k.HIERARCHY_WEIGHTS_KEY] = f"1/{weights}"
    return out


def mutate_podgroup(podgroup: Mapping, namespace_annotations: Mapping[str, str]) -> dict:
    """PodGroup CREATE: a group left in the ``default`` queue goes to its namespace's queue
    when the namespace names one with ``scheduling.volcano.sh/queue-name``."""
    out = copy.deepcopy(dict(podgroup))
    spec = out.setdefault("spec", {})
    queue = spec.get("queue") or k.DEFAULT_QUEUE
    namespace_queue = namespace_annotations.get(k.QUEUE_NAME_ANNOTATION_KEY)
    if queue == k.DEFAULT_QUEUE and namespace_queue:
        spec["queue"] = namespace_queue
    return out

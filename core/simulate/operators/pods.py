"""Pods as an operator creates them: the role's template, the operator's labels, a controller
reference to the framework object, then the mutation the conversion gives that role (what the
operator's Volcano mode, or the webhook's enrolment, puts on the pod)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from stromboli.integrations.common import Conversion, apply_mutation, owner_reference, read_meta


def owned_pod(
    owner: Mapping[str, Any],
    name: str,
    template: Mapping[str, Any],
    labels: Mapping[str, str],
    conversion: Conversion | None,
    *,
    controller: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod named ``name`` from ``template`` (a PodTemplateSpec), labelled ``labels`` on top
    of the template's, owned by ``controller`` (default: ``owner``, the framework object)."""
    meta = read_meta(controller if controller is not None else owner)
    template_meta = _mapping(template.get("metadata"))
    spec = _mapping(template.get("spec"))
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": read_meta(owner).namespace,
            "labels": {**_mapping(template_meta.get("labels")), **labels},
            "annotations": dict(_mapping(template_meta.get("annotations"))),
            "ownerReferences": [owner_reference(meta)],
        },
        "spec": copy.deepcopy(dict(spec)),
    }
    change = conversion.mutation_for(pod) if conversion is not None else None
    return apply_mutation(pod, change) if change is not None else pod


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def phase_of(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else "Pending"

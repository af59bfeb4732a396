"""Builders for framework objects and the checks every conversion test makes."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from stromboli.core.api.registry import validate_object
from stromboli.integrations.common import Context, Conversion, ConversionError

GROUP_NAME = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"


def pod_spec(cpu: str | None = "1", memory: str | None = "2Gi", **extra: Any) -> dict[str, Any]:
    requests = {name: v for name, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    return {"containers": [container], **extra}


def template(cpu: str | None = "1", memory: str | None = "2Gi", **extra: Any) -> dict[str, Any]:
    return {"spec": pod_spec(cpu, memory, **extra)}


def obj(
    api_version: str,
    kind: str,
    name: str,
    spec: Mapping[str, Any],
    *,
    namespace: str = "ns",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    result: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta,
        "spec": dict(spec),
    }
    if status is not None:
        result["status"] = dict(status)
    return result


def convert(adapter: Any, source: Mapping[str, Any], context: Context | None = None) -> Conversion:
    """Convert, and check what every conversion must hold: the input is untouched, the result
    is the same when computed twice, and every PodGroup is one our API accepts."""
    before = copy.deepcopy(source)
    result = adapter.convert(source, context)
    assert source == before, "a conversion must not modify its input"
    again = adapter.convert(copy.deepcopy(source), context)
    assert _dump(again) == _dump(result), "a conversion must be a pure function"
    for group in result.podgroups:
        validate_object(group)
    return result


def only_group(conversion: Conversion) -> dict[str, Any]:
    assert len(conversion.podgroups) == 1, conversion
    return conversion.podgroups[0]


def roles(conversion: Conversion) -> dict[str, dict[str, str]]:
    return {m.role: dict(m.annotations) for m in conversion.mutations}


def stored(group: Mapping[str, Any], **spec: Any) -> dict[str, Any]:
    """A stored copy of ``group`` (what the API server returns), its spec changed by ``spec``."""
    result = copy.deepcopy(dict(group))
    result["spec"].update(spec)
    return result


def operator_made(group: Mapping[str, Any]) -> dict[str, Any]:
    """The same PodGroup as the operator would have made it (no adapter label)."""
    result = copy.deepcopy(dict(group))
    result["metadata"].pop("labels", None)
    return result


def _dump(conversion: Conversion) -> str:
    return json.dumps(
        {
            "podgroups": conversion.podgroups,
            "mutations": [
                [m.role, m.group_name, dict(m.match_labels), m.template, dict(m.annotations)]
                for m in conversion.mutations
            ],
            "adopted": conversion.adopted,
            "notes": conversion.notes,
        },
        sort_keys=True,
        default=str,
    )


def raises_field(adapter: Any, source: Any, field: str, context: Context | None = None) -> str:
    """Convert expecting a ConversionError at ``field``; returns its message."""
    try:
        adapter.convert(source, context)
    except ConversionError as exc:
        assert exc.field == field, f"{exc.field!r} != {field!r}: {exc}"
        return str(exc)
    raise AssertionError(f"no ConversionError for {field}")

"""The types of the fields the admission rules read, checked before the rules run.

A real API server decodes an object against its CRD's OpenAPI schema before any webhook sees
it, so a list where an object belongs never reaches Volcano's rules. Without one (the
simulator, a webhook reached by a client that bypassed the schema, a stale CRD) the rules
would crash on such input; instead each rule's entry point checks the shapes below first and
refuses with the API server's wording
(``spec.tasks: Invalid value: "object": spec.tasks in body must be of type array: "object"``).

A shape is a tree of :class:`Field` descriptions built from :func:`obj`, :func:`list_of`,
:func:`map_of` and the scalar shapes; fields a shape does not name are not checked (they are
kept as given, as the API server keeps unknown fields of free-form parts). The walk follows
the shape, not the value, so it is as deep as the shape however deep the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)


@dataclass(frozen=True, slots=True)
class Shape:
    """``kind`` is the JSON type wanted: string, integer, int32, boolean, quantity, object,
    array, map; ``fields`` (objects), ``items`` (arrays and maps)."""

    kind: str
    fields: Mapping[str, Shape] = field(default_factory=dict)
    items: Shape | None = None


STRING = Shape("string")
INTEGER = Shape("integer")
INT32 = Shape("int32")
BOOLEAN = Shape("boolean")
QUANTITY = Shape("quantity")
ANY_OBJECT = Shape("object")


def obj(**fields: Shape) -> Shape:
    return Shape("object", fields)


def list_of(items: Shape) -> Shape:
    return Shape("array", items=items)


def map_of(items: Shape) -> Shape:
    return Shape("map", items=items)


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


_WANTED = {"int32": "integer", "quantity": "string", "map": "object"}


def _wrong(path: str, value: Any, wanted: str) -> str:
    got = json_type(value)
    path = path or "<object>"
    return f'{path}: Invalid value: "{got}": {path} in body must be of type {wanted}: "{got}"'


def _key(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def problems(value: Any, shape: Shape, path: str = "") -> list[str]:
    """Where ``value`` does not have ``shape``; ``None`` anywhere counts as absent (the API
    server drops nulls of fields that are not nullable)."""
    out: list[str] = []
    #: (value, shape, path, whether null means absent: object fields yes, items no)
    stack: list[tuple[Any, Shape, str, bool]] = [(value, shape, path, True)]
    while stack:
        current, want, where, optional = stack.pop()
        if current is None:
            if not optional:
                out.append(_wrong(where, current, _WANTED.get(want.kind, want.kind)))
            continue
        kind = want.kind
        if kind == "string":
            if not isinstance(current, str):
                out.append(_wrong(where, current, "string"))
        elif kind in ("integer", "int32"):
            if isinstance(current, bool) or not isinstance(current, int):
                out.append(_wrong(where, current, "integer"))
            elif kind == "int32" and not INT32_MIN <= current <= INT32_MAX:
                bound = INT32_MAX if current > 0 else INT32_MIN
                relation = "less" if current > 0 else "greater"
                out.append(
                    f"{where}: Invalid value: {current}: {where} in body should be {relation} "
                    f"than or equal to {bound}"
                )
        elif kind == "boolean":
            if not isinstance(current, bool):
                out.append(_wrong(where, current, "boolean"))
        elif kind == "quantity":
            if isinstance(current, bool) or not isinstance(current, str | int | float):
                out.append(_wrong(where, current, "string"))
        elif kind == "array":
            if not isinstance(current, list):
                out.append(_wrong(where, current, "array"))
            elif want.items is not None:
                stack.extend(
                    (item, want.items, f"{where}[{i}]", False) for i, item in enumerate(current)
                )
        else:  # object or map
            if not isinstance(current, Mapping):
                out.append(_wrong(where, current, "object"))
                continue
            if kind == "map":
                for key, item in current.items():
                    if not isinstance(key, str):
                        out.append(_wrong(f"{where}[{key!r}]", key, "string"))
                    elif want.items is not None:
                        stack.append((item, want.items, f"{where}[{key}]", False))
                continue
            for name, inner in want.fields.items():
                if name in current:
                    stack.append((current[name], inner, _key(where, name), True))
    return sorted(out)


# --- the shapes the rules read -------------------------------------------------------------------

METADATA = obj(
    name=STRING,
    namespace=STRING,
    generateName=STRING,
    labels=map_of(STRING),
    annotations=map_of(STRING),
)
RESOURCES = obj(requests=map_of(QUANTITY), limits=map_of(QUANTITY))
CONTAINER = obj(
    name=STRING,
    image=STRING,
    ports=list_of(obj(containerPort=INT32, hostPort=INT32, name=STRING, protocol=STRING)),
    resources=RESOURCES,
    volumeMounts=list_of(obj(name=STRING, mountPath=STRING)),
)
POD_SPEC = obj(
    containers=list_of(CONTAINER),
    initContainers=list_of(CONTAINER),
    volumes=list_of(obj(name=STRING)),
    restartPolicy=STRING,
    dnsPolicy=STRING,
    hostNetwork=BOOLEAN,
    schedulerName=STRING,
    priorityClassName=STRING,
    nodeName=STRING,
)
POD_TEMPLATE = obj(metadata=METADATA, spec=POD_SPEC)
NETWORK_TOPOLOGY = obj(mode=STRING, highestTierAllowed=INT32, highestTierName=STRING)
POLICY = obj(event=STRING, events=list_of(STRING), action=STRING, exitCode=INT32, timeout=STRING)
TASK = obj(
    name=STRING,
    replicas=INT32,
    minAvailable=INT32,
    maxRetry=INT32,
    template=POD_TEMPLATE,
    policies=list_of(POLICY),
    dependsOn=obj(name=list_of(STRING), iteration=STRING),
    partitionPolicy=obj(
        totalPartitions=INT32,
        partitionSize=INT32,
        minPartitions=INT32,
        networkTopology=NETWORK_TOPOLOGY,
    ),
    topologyPolicy=STRING,
)
JOB_SPEC = obj(
    queue=STRING,
    schedulerName=STRING,
    minAvailable=INT32,
    maxRetry=INT32,
    minSuccess=INT32,
    ttlSecondsAfterFinished=INT32,
    priorityClassName=STRING,
    plugins=map_of(list_of(STRING)),
    policies=list_of(POLICY),
    volumes=list_of(obj(mountPath=STRING, volumeClaimName=STRING, volumeClaim=ANY_OBJECT)),
    networkTopology=NETWORK_TOPOLOGY,
    tasks=list_of(TASK),
)
JOB = obj(metadata=METADATA, spec=JOB_SPEC)
QUEUE = obj(
    metadata=METADATA,
    spec=obj(
        weight=INT32,
        parent=STRING,
        priority=INT32,
        reclaimable=BOOLEAN,
        capability=map_of(QUANTITY),
        deserved=map_of(QUANTITY),
        guarantee=obj(resource=map_of(QUANTITY)),
    ),
    status=obj(state=STRING, allocated=map_of(QUANTITY)),
)
POD = obj(metadata=METADATA, spec=POD_SPEC)
PODGROUP = obj(
    metadata=METADATA,
    spec=obj(
        queue=STRING,
        minMember=INT32,
        priorityClassName=STRING,
        minResources=map_of(QUANTITY),
        networkTopology=NETWORK_TOPOLOGY,
        subGroupPolicy=list_of(obj(name=STRING, networkTopology=NETWORK_TOPOLOGY)),
    ),
)

"""Volcano's validating admission rules for queues (its ``/queues/validate`` webhook, on create,
update and delete).

``validate_queue`` (create and update) and ``validate_queue_delete`` return the reasons to refuse,
in Volcano's words; empty admits. ``queues`` is every queue of the cluster by name (on update it
may hold the old version of the queue itself; it is never compared with itself).

As for jobs, the CRD schema's limits come first in the API server's wording (``spec.weight``
between 1 and 65535, ``spec.priority`` at least 0); then the webhook's checks in its order, each
stage stopping at its first failure: resource quantities (``guarantee <= deserved <=
capability``), state, hierarchy annotations; the parent (on create or when it changes); the
``root`` queue's resources (on update); the resource hierarchy (children within their parent).
Run after :func:`~stromboli.core.admission.mutate.mutate_queue`, as the API server does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from stromboli.core.admission import shape
from stromboli.core.api import constants as k
from stromboli.core.api.quantity import QuantityError, format_bytes, format_cpu, parse_quantity

DEFAULT_MAX_QUEUE_DEPTH = 5
MIN_RESOURCE = 0.1
"""Amounts below this are absent (Volcano's ``minResource``)."""

_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|[iI]nf(inity)?|NaN)$")
_INTEGER_RESOURCES = frozenset({"pods", "services", "replicationcontrollers", "resourcequotas"})
_PATH = "requestBody"

Queue = Mapping[str, Any]


def queue_not_found(name: str) -> str:
    """The lister's error for a missing queue."""
    return f'queue.scheduling.volcano.sh "{name}" not found'


def children_of(name: str, queues: Mapping[str, Queue]) -> list[str]:
    """Names of the queues whose ``spec.parent`` is ``name``."""
    return [child for child, queue in queues.items() if child != name and _parent(queue) == name]


def _spec(queue: Any) -> Mapping[str, Any]:
    """The queue's spec; a malformed one (only ever a stored queue: the one under review is
    shape-checked first) reads as empty."""
    spec = queue.get("spec") if isinstance(queue, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _parent(queue: Any) -> str:
    """``spec.parent``, ``""`` when unset or not a name."""
    parent = _spec(queue).get("parent")
    return parent if isinstance(parent, str) else ""


def queue_state(queue: Any) -> str:
    """``status.state`` of a stored queue, ``""`` when unset or malformed."""
    status = queue.get("status") if isinstance(queue, Mapping) else None
    state = status.get("state") if isinstance(status, Mapping) else None
    return state if isinstance(state, str) else ""


def _part(value: Any, name: str) -> Mapping[str, Any]:
    """``value[name]`` when both are mappings, else empty (see :func:`_spec`)."""
    inner = value.get(name) if isinstance(value, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def _name(queue: Queue) -> str:
    return str(_part(queue, "metadata").get("name") or "")


def _guarantee(queue: Queue) -> Mapping[str, Any]:
    return _part(_part(queue, "spec"), "guarantee").get("resource") or {}


def _invalid(path: str, value: Any, detail: str) -> str:
    shown = '"' + str(value).replace('"', '\\"') + '"' if isinstance(value, str) else str(value)
    return f"{path}: Invalid value: {shown}: {detail}"


# --- resource amounts, as Volcano's scheduler counts them ----------------------------------------


def _is_scalar(name: str) -> bool:
    if name.startswith(("hugepages-", "attachable-volumes-", "requests.hugepages-")):
        return True
    return "/" in name and not name.startswith(("kubernetes.io/", "count/"))


def amounts(resources: Mapping[str, Any] | None) -> dict[str, float]:
    """cpu in millicores, memory and pods in units, scalar resources in milli-units; other
    names (quota counters) are ignored. Unparseable quantities count as zero."""
    out: dict[str, float] = {}
    if not isinstance(resources, Mapping):
        return out
    for name, value in resources.items():
        try:
            quantity = parse_quantity(value)
        except QuantityError:
            continue
        if name == "cpu":
            out[name] = float(math.ceil(quantity * 1000))
        elif name in ("memory", "pods"):
            out[name] = float(math.ceil(quantity))
        elif name == "ephemeral-storage" or _is_scalar(name):
            out[name] = float(math.ceil(quantity * 1000))
    return out


def _add(total: dict[str, float], more: Mapping[str, float]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0.0) + value


def _less_partly(left: Mapping[str, float], right: Mapping[str, float]) -> bool:
    """Volcano's ``LessPartly`` with absent dimensions as zero: some dimension of ``left`` is
    below ``right``'s, or ``right`` names a scalar ``left`` does not have."""
    if left.get("cpu", 0.0) < right.get("cpu", 0.0):
        return True
    if left.get("memory", 0.0) < right.get("memory", 0.0):
        return True
    scalars = [n for n in right if n not in ("cpu", "memory")]
    if any(n not in left for n in scalars):
        return True
    return any(value < right.get(n, 0.0) for n, value in left.items() if n not in ("cpu", "memory"))


def format_amounts(resources: Mapping[str, float]) -> str:
    """``cpu 2000.00, memory 0.00, nvidia.com/gpu 1000.00`` (Volcano's Resource.String)."""
    text = f"cpu {resources.get('cpu', 0.0):.2f}, memory {resources.get('memory', 0.0):.2f}"
    for name in sorted(n for n in resources if n not in ("cpu", "memory")):
        text += f", {name} {resources[name]:.2f}"
    return text


def _format_one(name: str, value: float) -> str:
    if name == "cpu":
        return format_cpu(value)
    if name == "memory":
        return format_bytes(value)
    return f"{value:.2f}"


# --- field checks --------------------------------------------------------------------------------


def _bounds(path: str, value: Any, low: int, high: int | None = None) -> list[str]:
    if not isinstance(value, int) or isinstance(value, bool):
        return []
    if value < low:
        return [_invalid(path, value, f"{path} in body should be greater than or equal to {low}")]
    if high is not None and value > high:
        return [_invalid(path, value, f"{path} in body should be less than or equal to {high}")]
    return []


def schema_errors(queue: Queue) -> list[str]:
    """What the Queue CRD schema refuses (the API server's wording)."""
    spec = _spec(queue)
    errors = _bounds("spec.weight", spec.get("weight"), 1, k.MAX_QUEUE_WEIGHT)
    return errors + _bounds("spec.priority", spec.get("priority"), 0)


def _quantity_problems(path: str, resources: Mapping[str, Any]) -> list[str]:
    problems = []
    for name, value in resources.items():
        where = f"{path}.{name}"
        try:
            quantity = parse_quantity(value)
        except QuantityError:
            problems.append(_invalid(where, str(value), "must be a valid resource quantity"))
            continue
        if quantity < 0:
            problems.append(_invalid(where, str(value), "must be greater than or equal to 0"))
        elif (
            (name in _INTEGER_RESOURCES or _is_scalar(name))
            and not name.startswith("hugepages-")
            and quantity.denominator != 1
        ):
            problems.append(_invalid(where, str(value), "must be an integer"))
    return problems


def _compare(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def resource_problems(queue: Queue) -> list[str]:
    """Valid quantities, and guarantee ≤ deserved ≤ capability per resource present."""
    spec = _spec(queue)
    path = f"{_PATH}.spec"
    capability = spec.get("capability") or {}
    deserved = spec.get("deserved") or {}
    guarantee = _guarantee(queue)
    problems = _quantity_problems(f"{path}.capability", capability)
    problems += _quantity_problems(f"{path}.deserved", deserved)
    problems += _quantity_problems(f"{path}.guarantee.resource", guarantee)
    for name, wanted in guarantee.items():
        if name not in deserved:
            problems.append(
                _invalid(
                    f"{path}.deserved.{name}",
                    "<nil>",
                    f"deserved[{name}] must be >= guarantee[{name}]={wanted}",
                )
            )
            continue
        have, need = _compare(deserved[name]), _compare(wanted)
        if have is not None and need is not None and have < need:
            problems.append(
                _invalid(
                    f"{path}.deserved.{name}",
                    str(deserved[name]),
                    f"deserved[{name}]={deserved[name]} must be >= guarantee[{name}]={wanted}",
                )
            )
    for name, value in deserved.items():
        if name not in capability:
            continue
        have, limit = _compare(value), _compare(capability[name])
        if have is not None and limit is not None and have > limit:
            problems.append(
                _invalid(
                    f"{path}.deserved.{name}",
                    str(value),
                    f"deserved[{name}]={value} must be <= capability[{name}]={capability[name]}",
                )
            )
    return problems


def state_problems(queue: Queue) -> list[str]:
    state = queue_state(queue)
    if state and state not in (k.QueueState.OPEN, k.QueueState.CLOSED):
        return [_invalid(f"{_PATH}.spec.state", state, "queue state must be in [Open Closed]")]
    return []


def _float(text: str) -> float:
    if not _FLOAT.match(text):
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax')
    return float(text)


def hierarchy_problems(queue: Queue, queues: Mapping[str, Queue]) -> list[str]:
    """The legacy ``volcano.sh/hierarchy`` / ``-weights`` annotations."""
    annotations = _part(_part(queue, "metadata"), "annotations")
    hierarchy = annotations.get(k.HIERARCHY_KEY) or ""
    weights = annotations.get(k.HIERARCHY_WEIGHTS_KEY) or ""
    if not hierarchy and not weights:
        return []
    path = f"{_PATH}.metadata.annotations"
    if len(hierarchy.split("/")) != len(weights.split("/")):
        return [
            _invalid(
                path,
                hierarchy,
                f"{k.HIERARCHY_KEY} must have the same length with {k.HIERARCHY_WEIGHTS_KEY}",
            )
        ]
    for weight in weights.split("/"):
        try:
            value = _float(weight)
        except ValueError as error:
            detail = f"{weight} in the {weights} is invalid number: {error}"
            return [_invalid(path, weights, detail)]
        if value <= 0:
            return [_invalid(path, weights, f"{weight} in the {weights} must be larger than 0")]
    name = _name(queue)
    for other_name, other in queues.items():
        if other_name == name:
            continue
        other_path = _part(_part(other, "metadata"), "annotations").get(k.HIERARCHY_KEY)
        if isinstance(other_path, str) and other_path.startswith(hierarchy + "/"):
            return [
                _invalid(
                    path,
                    hierarchy,
                    f"{hierarchy} is not allowed to be in the sub path of {other_path} of queue "
                    f"{other_name}",
                )
            ]
    return []


# --- parents and the resource hierarchy ----------------------------------------------------------


def _allocated_pods(queue: Queue) -> int:
    value = _part(_part(queue, "status"), "allocated").get("pods")
    if value is None:
        return 0
    try:
        return math.ceil(parse_quantity(value))
    except QuantityError:
        return 0


def parent_cycle(name: str, parent: str, queues: Mapping[str, Queue]) -> list[str]:
    """The cycle met when following ``spec.parent`` up from queue ``name`` (whose parent is to
    be ``parent``), as ``[a, b, a]``; empty when the chain ends at ``root``, a missing queue or
    a parent that is not a name.

    ``queues`` may hold the old version of ``name`` itself; the walk never reads it (the new
    parent counts), so an update that closes a loop is seen. Each step visits a new name, so
    the walk ends within ``len(queues) + 1`` steps even when the stored queues already hold a
    cycle (written before this rule, or by a client that bypassed the webhook).
    """
    chain = [name]
    position = {name: 0}
    current: Any = parent
    while isinstance(current, str) and current and current != k.ROOT_QUEUE:
        if current in position:
            return [*chain[position[current] :], current]
        position[current] = len(chain)
        chain.append(current)
        above = queues.get(current)
        if not isinstance(above, Mapping):
            return []
        current = _parent(above)
    return []


def parent_problems(
    queue: Queue, queues: Mapping[str, Queue], max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH
) -> list[str]:
    """A parent other than ``root``: not itself, not too deep, existing, and not a leaf queue
    that already runs pods."""
    name = _name(queue)
    parent = _parent(queue)
    if not parent or parent == k.ROOT_QUEUE:
        return []
    if parent == name:
        return [f"queue {name} cannot use itself as parent"]
    cycle = parent_cycle(name, parent, queues)
    if cycle:
        detail = "queue parents form a cycle: " + " -> ".join(cycle)
        return [_invalid("spec.parent", parent, detail)]
    depth, current = 1, parent
    while current and current != k.ROOT_QUEUE:
        depth += 1
        if depth > max_queue_depth:
            return [f"queue {name} exceeds the maximum allowed depth of {max_queue_depth}"]
        above = queues.get(current)
        if above is None:
            missing = queue_not_found(current)
            return [f"failed to get parent queue {current} of queue {name}: {missing}"]
        current = _parent(above)
    parent_queue = queues[parent]
    if not children_of(parent, queues):
        pods = _allocated_pods(parent_queue)
        if pods:
            return [
                f"queue {parent} cannot be the parent queue of queue {name} because it has "
                f"allocated Pods: {pods}"
            ]
    return []


def _nearest_ancestor_capability(
    queue: Queue, name: str, queues: Mapping[str, Queue]
) -> float | None:
    parent = _parent(queue)
    seen: set[str] = set()
    while parent and parent != k.ROOT_QUEUE and parent not in seen:
        seen.add(parent)
        above = queues.get(parent)
        if above is None:
            return None
        value = amounts(_spec(above).get("capability")).get(name, 0.0)
        if value > 0:
            return value
        parent = _parent(above)
    return None


def _subtree_max_capability(queue: Queue, name: str, queues: Mapping[str, Queue]) -> float:
    """The queue's own capability of ``name`` if set, else the largest set in its subtree
    (each branch stops at its first capped queue). Walked with a stack and a visited set, so a
    deep or cyclic stored hierarchy neither overflows the stack nor loops."""
    index: dict[str, list[str]] = {}
    for child, other in queues.items():
        parent = _parent(other)
        if isinstance(parent, str) and parent != child:
            index.setdefault(parent, []).append(child)
    best = 0.0
    seen: set[str] = set()
    stack = [queue]
    while stack:
        current = stack.pop()
        value = amounts(_spec(current).get("capability")).get(name, 0.0)
        if value > 0:
            if current is queue:
                return value
            best = max(best, value)
            continue
        seen.add(_name(current))
        stack.extend(queues[c] for c in index.get(_name(current), ()) if c not in seen)
    return best


def _names_present(resources: Mapping[str, float]) -> list[str]:
    return [n for n, v in resources.items() if v >= MIN_RESOURCE]


def _sum_check(
    prefix: str,
    parent: Queue,
    members: list[Queue],
) -> str | None:
    """Σ guarantee and Σ deserved of ``members`` within the parent's, checked as they add up."""
    parent_guarantee = amounts(_guarantee(parent))
    parent_deserved = amounts(_spec(parent).get("deserved"))
    total_guarantee: dict[str, float] = {}
    total_deserved: dict[str, float] = {}
    for member in members:
        _add(total_guarantee, amounts(_guarantee(member)))
        if _less_partly(parent_guarantee, total_guarantee):
            return (
                f"{prefix} {_name(parent)} validation failed: sum of children's guarantee "
                f"({format_amounts(total_guarantee)}) exceeds parent's guarantee limit "
                f"({format_amounts(parent_guarantee)})"
            )
        _add(total_deserved, amounts(_spec(member).get("deserved")))
        if _less_partly(parent_deserved, total_deserved):
            return (
                f"{prefix} {_name(parent)} validation failed: sum of children's deserved "
                f"({format_amounts(total_deserved)}) exceeds parent's deserved limit "
                f"({format_amounts(parent_deserved)})"
            )
    return None


def resource_hierarchy_problems(queue: Queue, queues: Mapping[str, Queue]) -> list[str]:
    """A child's capability within its nearest capped ancestor's; siblings' guarantees and
    deserved shares within the parent's; the queue's capability at least its descendants'."""
    name = _name(queue)
    others = {n: q for n, q in queues.items() if n != name}
    others[name] = queue
    parent = _parent(queue)
    if parent and parent != k.ROOT_QUEUE:
        parent_queue = others.get(parent)
        if parent_queue is None:
            return [f"parent queue {parent} not found: {queue_not_found(parent)}"]
        mine = amounts(_spec(queue).get("capability"))
        for resource in _names_present(mine):
            limit = _nearest_ancestor_capability(queue, resource, others)
            if limit is not None and mine[resource] > limit:
                return [
                    f"queue {name} capability[{resource}]={_format_one(resource, mine[resource])} "
                    f"exceeds its ancestor's capability={_format_one(resource, limit)}"
                ]
        siblings = [others[s] for s in children_of(parent, others) if s != name]
        problem = _sum_check("parent queue", parent_queue, [*siblings, queue])
        if problem:
            return [problem]
    children = [others[c] for c in children_of(name, others)]
    if children:
        capability = amounts(_spec(queue).get("capability"))
        if _spec(queue).get("capability") is not None:
            for resource in _names_present(capability):
                most = max(_subtree_max_capability(c, resource, others) for c in children)
                if capability[resource] < most:
                    return [
                        f"queue {name} capability[{resource}]="
                        f"{_format_one(resource, capability[resource])} is smaller than its "
                        f"descendants' max capability={_format_one(resource, most)}"
                    ]
        problem = _sum_check("queue", queue, children)
        if problem:
            return [problem]
    return []


def _resources_changed(queue: Queue, old: Queue) -> bool:
    for field in ("capability", "deserved"):
        if amounts(_spec(queue).get(field)) != amounts(_spec(old).get(field)):
            return True
    return amounts(_guarantee(queue)) != amounts(_guarantee(old))


# --- entry points --------------------------------------------------------------------------------


def validate_queue(
    queue: Queue,
    queues: Mapping[str, Queue],
    old: Queue | None = None,
    *,
    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH,
    enable_root_queue_protection: bool = True,
    schema: bool = True,
) -> list[str]:
    """Reasons to refuse creating ``queue`` (``old`` is None) or updating ``old`` into it."""
    malformed = shape.problems(queue, shape.QUEUE)
    if malformed:
        return malformed
    if old is not None and shape.problems(old, shape.QUEUE):
        old = None  # a malformed stored version: check the queue as if it were new
    errors = schema_errors(queue) if schema else []
    if errors:
        return errors
    errors = resource_problems(queue) + state_problems(queue) + hierarchy_problems(queue, queues)
    if errors:
        return errors
    name = _name(queue)
    parent = _parent(queue)
    old_parent = _parent(old) if old is not None else None
    if old is None or old_parent != parent:
        errors = parent_problems(queue, queues, max_queue_depth)
        if errors:
            return errors
    if (
        enable_root_queue_protection
        and old is not None
        and name == k.ROOT_QUEUE
        and _resources_changed(queue, old)
    ):
        return [
            "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
        ]
    if name != k.ROOT_QUEUE and (
        old is None or old_parent != parent or _resources_changed(queue, old)
    ):
        return resource_hierarchy_problems(queue, queues)
    return []


def validate_queue_delete(
    name: str,
    queues: Mapping[str, Queue],
    *,
    enable_allocated_pods_check: bool = False,
) -> list[str]:
    """Reasons to refuse deleting queue ``name``: the built-in queues, queues with children,
    and (with the flag) queues that still run pods."""
    if name in (k.DEFAULT_QUEUE, k.ROOT_QUEUE):
        return [f"`{name}` queue can not be deleted"]
    queue = queues.get(name)
    if queue is None:
        return [queue_not_found(name)]
    if enable_allocated_pods_check:
        pods = _allocated_pods(queue)
        if pods:
            return [f"queue {name} cannot be deleted because it has allocated Pods: {pods}"]
    children = children_of(name, queues)
    if children:
        return [
            f"queue {name} can not be deleted because it has {len(children)} child queues: "
            + ", ".join(children)
        ]
    return []

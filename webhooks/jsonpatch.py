"""The JSON patch (RFC 6902) a mutating webhook answers with: the difference between the object
the API server sent and the object the mutating rule returned.

The rules in :mod:`stromboli.core.admission.mutate` return a whole new object, which keeps them
simple to test and to reuse in the simulator; the API server wants operations. Objects are
compared key by key so that a patch touches only what a rule changed (``add /spec/queue``, not
``replace /spec``); lists of equal length are compared item by item, other lists replaced.
"""

from __future__ import annotations

from typing import Any

Operation = dict[str, Any]


def _escape(token: str) -> str:
    """A key as a JSON pointer token (RFC 6901: ``~`` → ``~0``, ``/`` → ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


def json_diff(old: Any, new: Any, path: str = "") -> list[Operation]:
    """Operations that turn ``old`` into ``new``; empty when they are equal."""
    if old is new:  # a subtree the rule passed through untouched: nothing to walk
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[Operation] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            child = f"{path}/{_escape(key)}"
            if key not in old:
                ops.append({"op": "add", "path": child, "value": value})
            else:
                ops += json_diff(old[key], value, child)
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        ops = []
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            ops += json_diff(before, after, f"{path}/{index}")
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": path, "value": new}]

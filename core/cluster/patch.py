"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on plain JSON values.

The store applies these to its own private copy of an object; both functions leave their inputs
untouched, so a caller may reuse its patch document and the store may share unchanged subtrees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson


class PatchError(ValueError):
    """A patch that cannot be applied (bad pointer, failed ``test``, malformed operation)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` deletes a key, anything else replaces.

    Returns a new value; subtrees the patch does not touch are shared with ``target``.
    """
    if not isinstance(patch, Mapping):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _clone(value: Any) -> Any:
    """A deep copy of a JSON value, so later operations cannot mutate the caller's patch."""
    if isinstance(value, dict | list):
        return orjson.loads(orjson.dumps(value))
    return value


def _pointer(path: Any) -> list[str]:
    """Split a JSON pointer (RFC 6901) into unescaped reference tokens."""
    if not isinstance(path, str):
        raise PatchError(f"path {path!r} must be a string JSON pointer such as /metadata/labels")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"path {path!r} must start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"path {path!r}: {token!r} is not an array index")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise PatchError(f"path {path!r}: index {index} is out of range (length {len(container)})")
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    """The container holding the last token of ``path``; it must exist."""
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise PatchError(f"path {path!r}: {token!r} does not exist")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, path, allow_end=False)]
        else:
            raise PatchError(f"path {path!r}: cannot descend into a scalar at {token!r}")
    return current


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, allow_end=False)]
    raise PatchError(f"path {path!r}: cannot descend into a scalar")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError(f"path {path!r}: cannot add into a scalar")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    """Remove the value at ``path``; returns ``(doc, removed value)``."""
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document (path '')")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, allow_end=False))
    raise PatchError(f"path {path!r}: cannot remove from a scalar")


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: unlike Python's, ``true`` is not ``1`` and ``1`` equals ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def json_patch(
    target: Any, operations: Sequence[Mapping[str, Any]], *, in_place: bool = False
) -> Any:
    """RFC 6902: apply ``add/remove/replace/move/copy/test`` operations in order, atomically.

    ``target`` is deep-copied first, so a failing operation leaves it unchanged; a caller that
    owns a throw-away copy passes ``in_place=True`` to skip that copy.
    """
    if isinstance(operations, Mapping | str | bytes) or not isinstance(operations, Sequence):
        raise PatchError("a JSON patch must be a list of operations")
    doc = target if in_place else _clone(target)
    for number, operation in enumerate(operations):
        if not isinstance(operation, Mapping):
            raise PatchError(f"operation {number} must be an object, got {operation!r}")
        op = operation.get("op")
        path = operation.get("path")
        if not isinstance(path, str):
            raise PatchError(f"operation {number} ({op}) needs a string 'path'")
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"operation {number} ({op} {path}) needs a 'value'")
        if op == "add":
            doc = _add(doc, path, _clone(operation["value"]))
        elif op == "remove":
            doc, _ = _remove(doc, path)
        elif op == "replace":
            if path:
                _get(doc, path)  # must exist
                doc, _ = _remove(doc, path)
            doc = _add(doc, path, _clone(operation["value"]))
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise PatchError(f"operation {number} ({op} {path}) needs a string 'from'")
            if op == "move":
                if path != source and path.startswith(source + "/"):
                    raise PatchError(f"operation {number}: cannot move {source!r} into itself")
                doc, value = _remove(doc, source)
            else:
                value = _clone(_get(doc, source))
            doc = _add(doc, path, value)
        elif op == "test":
            if not _json_equal(_get(doc, path), operation["value"]):
                raise PatchError(
                    f"operation {number}: test failed, the value at {path!r} is not "
                    f"{operation['value']!r}"
                )
        else:
            raise PatchError(
                f"operation {number}: op {op!r} is not one of add, remove, replace, move, copy, "
                "test"
            )
    return doc

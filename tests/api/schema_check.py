"""Small checkers for generated CRD schemas, written for these tests.

``structural_problems`` applies the apiextensions/v1 structural-schema rules our generator must
meet; ``schema_problems`` is a minimal OpenAPI validator (types, enums, bounds, patterns,
required, and what the API server would prune) used to check that what our models accept the
CRDs accept too.
"""

from __future__ import annotations

import re
from typing import Any

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def structural_problems(node: Any, path: str = "") -> list[str]:
    """Every place where ``node`` breaks the structural-schema rules."""
    where = path or "<root>"
    if not isinstance(node, dict):
        return [f"{where}: schema node is not a mapping"]
    problems: list[str] = []
    if "$ref" in node or "$defs" in node or "definitions" in node:
        problems.append(f"{where}: $ref/$defs are not allowed")
    if node.get(INT_OR_STRING):
        if "type" in node:
            problems.append(f"{where}: int-or-string must not set type")
        if node.get("anyOf", INT_OR_STRING_ANY_OF) != INT_OR_STRING_ANY_OF:
            problems.append(f"{where}: int-or-string anyOf must be [integer, string]")
    else:
        for combinator in ("anyOf", "oneOf", "allOf", "not"):
            if combinator in node:
                problems.append(f"{where}: {combinator} is not allowed here")
        if "type" not in node and not node.get(PRESERVE):
            problems.append(f"{where}: no type")
    kind = node.get("type")
    if kind is not None and kind not in TYPES:
        problems.append(f"{where}: unknown type {kind!r}")
    if "nullable" in node and node["nullable"] is not True:
        problems.append(f"{where}: nullable must be true when present")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{where}: properties and additionalProperties are exclusive")
    if isinstance(node.get("additionalProperties"), bool):
        problems.append(f"{where}: additionalProperties must be a schema")
    if ("properties" in node or "additionalProperties" in node) and kind != "object":
        problems.append(f"{where}: properties on a non-object")
    if kind == "array" and "items" not in node:
        problems.append(f"{where}: array without items")
    if "items" in node and kind != "array":
        problems.append(f"{where}: items on a non-array")
    for name in node.get("required", ()):
        if name not in node.get("properties", {}):
            problems.append(f"{where}: required field {name!r} is not a property")
    for name, sub in node.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{name}" if path else name)
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_problems(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), dict):
        problems += structural_problems(node["items"], f"{path}[]")
    return problems


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "object": dict, "array": list}[kind])


def schema_problems(value: Any, node: dict[str, Any], path: str = "") -> list[str]:
    """Why the API server would reject ``value`` or prune parts of it under ``node``."""
    where = path or "<root>"
    if node.get(INT_OR_STRING):
        if not (_type_ok(value, "integer") or isinstance(value, str)):
            return [f"{where}: not an int-or-string"]
        if isinstance(value, str) and "pattern" in node and not re.search(node["pattern"], value):
            return [f"{where}: does not match {node['pattern']}"]
        return []
    kind = node.get("type")
    if kind is None:
        return []  # preserved, anything goes
    if not _type_ok(value, kind):
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    problems: list[str] = []
    if "enum" in node and value not in node["enum"]:
        problems.append(f"{where}: {value!r} not in {node['enum']}")
    if "minimum" in node and value < node["minimum"]:
        problems.append(f"{where}: below minimum")
    if "maximum" in node and value > node["maximum"]:
        problems.append(f"{where}: above maximum")
    if kind == "string":
        if "maxLength" in node and len(value) > node["maxLength"]:
            problems.append(f"{where}: too long")
        if "minLength" in node and len(value) < node["minLength"]:
            problems.append(f"{where}: too short")
        if "pattern" in node and not re.search(node["pattern"], value):
            problems.append(f"{where}: does not match {node['pattern']}")
    if kind == "array":
        if len(value) < node.get("minItems", 0):
            problems.append(f"{where}: too few items")
        for index, item in enumerate(value):
            problems += schema_problems(item, node["items"], f"{path}[{index}]")
    if kind == "object":
        properties = node.get("properties", {})
        for name in node.get("required", ()):
            if name not in value:
                problems.append(f"{where}: missing required {name!r}")
        for name, item in value.items():
            sub_path = f"{path}.{name}" if path else name
            if sub_path == "metadata":
                continue  # the API server handles root metadata itself; never pruned
            if name in properties:
                problems += schema_problems(item, properties[name], sub_path)
            elif isinstance(node.get("additionalProperties"), dict):
                problems += schema_problems(item, node["additionalProperties"], sub_path)
            elif not node.get(PRESERVE):
                problems.append(f"{sub_path}: would be pruned")
    return problems


def defaults_problems(node: Any, path: str = "") -> list[str]:
    """Defaults that their own schema node would reject."""
    if not isinstance(node, dict):
        return []
    problems = []
    if "default" in node:
        problems += schema_problems(node["default"], node, path)
    for name, sub in node.get("properties", {}).items():
        problems += defaults_problems(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        problems += defaults_problems(node.get(key), f"{path}.{key}")
    return problems

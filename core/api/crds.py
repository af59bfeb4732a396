"""CustomResourceDefinitions generated from our models, so the cluster and Python agree.

pydantic's JSON Schema is turned into a *structural* OpenAPI v3 schema, as
``apiextensions.k8s.io/v1`` requires: ``$ref`` inlined, ``Optional`` collapsed to its
non-null branch, every node typed, quantities as int-or-string, embedded Kubernetes objects
as preserved unknown fields. Names, scope, short names, printer columns and the status
subresource come from the registry table (``core.api.registry``, which lists them as Volcano's
own CRDs declare them), not from any copied YAML.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel

from stromboli.core.api.constants import APIEXTENSIONS_V1, HELM_RESOURCE_POLICY_ANNOTATION
from stromboli.core.api.models import (
    Command,
    CronJob,
    HyperNode,
    Job,
    JobFlow,
    JobTemplate,
    Numatopology,
    PodGroup,
    Queue,
)
from stromboli.core.api.registry import KindInfo, kind_info

_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _column(name: str, kind: str, path: str, priority: int = 0) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": kind, "jsonPath": path}
    if priority:
        column["priority"] = priority
    return column


@dataclass(frozen=True)
class CrdSource:
    """One CRD to generate: the model and the columns ``kubectl get`` shows."""

    model: type[BaseModel]
    columns: tuple[dict[str, Any], ...] = ()

    @property
    def info(self) -> KindInfo:
        fields = self.model.model_fields
        info = kind_info(fields["api_version"].default, fields["kind"].default)
        if info is None:  # pragma: no cover - the registry lists every model below
            raise LookupError(f"{self.model.__name__} is missing from the registry table")
        return info


CRD_SOURCES: tuple[CrdSource, ...] = (
    CrdSource(Queue, (_column("PARENT", "string", ".spec.parent"),)),
    CrdSource(
        PodGroup,
        (
            _column("STATUS", "string", ".status.phase"),
            _column("minMember", "integer", ".spec.minMember"),
            _column("RUNNINGS", "integer", ".status.running"),
            {**_AGE, "name": "AGE"},
            _column("QUEUE", "string", ".spec.queue", priority=1),
        ),
    ),
    CrdSource(
        Job,
        (
            _column("STATUS", "string", ".status.state.phase"),
            _column("minAvailable", "integer", ".status.minAvailable"),
            _column("RUNNINGS", "integer", ".status.running"),
            {**_AGE, "name": "AGE"},
            _column("QUEUE", "string", ".spec.queue", priority=1),
        ),
    ),
    CrdSource(CronJob),
    CrdSource(Command),
    CrdSource(JobFlow, (_column("Status", "string", ".status.state.phase"), _AGE)),
    CrdSource(JobTemplate),
    CrdSource(
        HyperNode,
        (
            _column("Tier", "integer", ".spec.tier"),
            _column("TierName", "string", ".spec.tierName"),
            _column("NodeCount", "integer", ".status.nodeCount"),
            _AGE,
        ),
    ),
    CrdSource(Numatopology),
)

# --- JSON Schema -> structural OpenAPI ----------------------------------------------------------

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"
_DROPPED = frozenset({"title", "additionalProperties", "$defs"})


def _describe(text: str) -> str:
    """Docstrings use reStructuredText literals; kubectl explain shows plain text."""
    return " ".join(text.replace("``", "`").split())


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """One pydantic JSON Schema node as a structural OpenAPI node."""
    node = dict(node)
    if "$ref" in node:
        target = defs[node.pop("$ref").rsplit("/", 1)[1]]
        return _merge_outer(_structural(target, defs), node)
    for combinator in ("anyOf", "allOf", "oneOf"):
        if combinator in node and not node.get(_INT_OR_STRING):
            branches = [b for b in node.pop(combinator) if b != {"type": "null"}]
            if len(branches) != 1:
                raise ValueError(f"cannot express a union of {len(branches)} types in a CRD")
            return _merge_outer(_structural(branches[0], defs), node)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or (key == "default" and value is None):
            continue
        if key == "description":
            out[key] = _describe(value)
        elif key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        else:
            out[key] = copy.deepcopy(value)  # enums and defaults: never shared between nodes
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = _structural(extra, defs)
    elif extra is True:
        out[_PRESERVE] = True
    if not out.get("type") and not out.get(_INT_OR_STRING) and not out.get(_PRESERVE):
        out[_PRESERVE] = True  # ``Any``: accept whatever is given
    return out


def _merge_outer(inner: dict[str, Any], outer: dict[str, Any]) -> dict[str, Any]:
    """A field's own description/default win over those of the type it refers to."""
    merged = dict(inner)
    for key, value in outer.items():
        if key in _DROPPED or (key == "default" and value is None):
            continue
        merged[key] = _describe(value) if key == "description" else copy.deepcopy(value)
    return merged


def openapi_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of a top-level model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema = _structural(raw, raw.get("$defs", {}))
    properties = schema["properties"]
    properties["apiVersion"] = {
        "type": "string",
        "description": "Versioned schema of this object; the server may convert it.",
    }
    properties["kind"] = {"type": "string", "description": "REST resource this object is."}
    properties["metadata"] = {"type": "object"}  # only name/generateName may be constrained here
    spec = model.model_fields.get("spec")
    if spec is not None and spec.default_factory is not None and "spec" in properties:
        properties["spec"]["default"] = {}  # so nested defaults apply to an object without spec
    schema["required"] = [name for name in schema.get("required", ()) if name in properties]
    if not schema["required"]:
        del schema["required"]
    return schema


# --- CRDs ----------------------------------------------------------------------------------------


def crd_for(source: CrdSource) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind."""
    info = source.info
    version: dict[str, Any] = {
        "name": info.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(source.model)},
    }
    if info.status_subresource:
        version["subresources"] = {"status": {}}
    if source.columns:
        version["additionalPrinterColumns"] = [dict(column) for column in source.columns]
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.kind.lower(),
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    return {
        "apiVersion": APIEXTENSIONS_V1,
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{info.plural}.{info.group}",
            "annotations": {HELM_RESOURCE_POLICY_ANNOTATION: "keep"},
        },
        "spec": {
            "group": info.group,
            "names": names,
            "scope": "Namespaced" if info.namespaced else "Cluster",
            "versions": [version],
        },
    }


def build_crds() -> list[dict[str, Any]]:
    """Every CRD Stromboli serves, in a stable order."""
    return [crd_for(source) for source in CRD_SOURCES]


def crd_filename(crd: dict[str, Any]) -> str:
    """``<group>_<plural>.yaml``, one file per CRD."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"


class _Dumper(yaml.SafeDumper):
    """Writes shared sub-schemas out in full: anchors and aliases confuse human readers."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_HEADER = "# Generated by `stromboli crds` from Stromboli's API models. Do not edit.\n"


def render_crd(crd: dict[str, Any]) -> str:
    """One CRD as a YAML document (with a generated-file header)."""
    body = yaml.dump(crd, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=100)
    return _HEADER + body


def render_crds() -> str:
    """All CRDs as one multi-document YAML stream, ready for ``kubectl apply -f -``."""
    return "---\n".join(render_crd(crd) for crd in build_crds())

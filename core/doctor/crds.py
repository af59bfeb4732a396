"""Our CRDs: each kind Stromboli serves is installed, established, served in our version and
stored with a schema that keeps every field we write (a field missing from the stored schema
is pruned by the API server without an error, the quietest way to break an upgrade)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from stromboli.core.api.crds import build_crds
from stromboli.core.doctor.findings import Finding, fail, ok, warn
from stromboli.core.doctor.view import ClusterView, mapping, meta, sequence, text

CHECK = "crds"
APPLY = "run: kubectl apply -f deploy/crds/ (or: stromboli crds | kubectl apply -f -)"
SHOWN_FIELDS = 3
KEPT_AT_ROOT = ("apiVersion", "kind", "metadata")
"""Fields the API server keeps whatever the schema says."""


def schema_digest(schema: Any) -> str:
    """A digest of a schema that ignores key order."""
    body = json.dumps(schema, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def pruned_fields(ours: Mapping[str, Any], theirs: Any, path: str = "") -> list[str]:
    """Paths of ``ours`` that ``theirs`` would prune. The walk follows our schema (finite and
    known), so a hostile stored schema cannot make it deep or long."""
    stored = mapping(theirs)
    if stored.get("x-kubernetes-preserve-unknown-fields") is True:
        return []
    missing: list[str] = []
    stored_properties = mapping(stored.get("properties"))
    for key, sub in mapping(ours.get("properties")).items():
        if not path and key in KEPT_AT_ROOT:
            continue
        where = f"{path}.{key}" if path else key
        if key not in stored_properties:
            missing.append(where)
            continue
        missing += pruned_fields(mapping(sub), stored_properties[key], where)
    if isinstance(ours.get("items"), Mapping):
        missing += pruned_fields(ours["items"], stored.get("items"), f"{path}[]")
    additional = ours.get("additionalProperties")
    if isinstance(additional, Mapping):
        missing += pruned_fields(additional, stored.get("additionalProperties"), f"{path}{{}}")
    return missing


def _established(crd: Any) -> bool:
    for condition in sequence(mapping(mapping(crd).get("status")).get("conditions")):
        cond = mapping(condition)
        if cond.get("type") == "Established":
            return cond.get("status") == "True"
    return False


def check_crd(expected: Mapping[str, Any], found: Any) -> list[Finding]:
    name = expected["metadata"]["name"]
    what = f"CustomResourceDefinition {name}"
    if found is None:
        return [fail(CHECK, f"{what} is missing", APPLY)]
    ours = expected["spec"]["versions"][0]
    version = ours["name"]
    spec = mapping(mapping(found).get("spec"))
    versions = {text(mapping(v).get("name")): mapping(v) for v in sequence(spec.get("versions"))}
    theirs = versions.get(version)
    if theirs is None:
        listed = ", ".join(sorted(v for v in versions if v)) or "none"
        return [fail(CHECK, f"{what} does not define version {version} (it has: {listed})", APPLY)]
    findings: list[Finding] = []
    if theirs.get("served") is not True:
        findings.append(fail(CHECK, f"{what}: version {version} is not served", APPLY))
    if theirs.get("storage") is not True:
        findings.append(fail(CHECK, f"{what}: version {version} is not the storage version", APPLY))
    if not _established(found):
        findings.append(
            fail(CHECK, f"{what} is not Established", f"run: kubectl describe crd {name}")
        )
    stored = [v for v in sequence(mapping(mapping(found).get("status")).get("storedVersions"))]
    stale = sorted(str(v) for v in stored if v != version)
    if stale:
        findings.append(
            warn(
                CHECK,
                f"{what}: objects may still be stored as {', '.join(stale)} "
                f"(status.storedVersions)",
                f"migrate them to {version}, then drop {', '.join(stale)} from "
                "status.storedVersions",
            )
        )
    want = ours["schema"]["openAPIV3Schema"]
    have = mapping(theirs.get("schema")).get("openAPIV3Schema")
    if schema_digest(want) != schema_digest(have):
        missing = sorted(pruned_fields(want, have))
        if missing:
            shown = ", ".join(missing[:SHOWN_FIELDS])
            more = f" and {len(missing) - SHOWN_FIELDS} more" if len(missing) > SHOWN_FIELDS else ""
            findings.append(
                fail(
                    CHECK,
                    f"{what}: the stored schema lacks {shown}{more}; the API server drops "
                    "those fields",
                    APPLY,
                )
            )
        else:
            findings.append(
                warn(
                    CHECK,
                    f"{what}: the stored schema differs from this version's (digest "
                    f"{schema_digest(have)}, expected {schema_digest(want)})",
                    APPLY,
                )
            )
    if not findings:
        findings.append(ok(CHECK, f"{what} ({version}) installed and up to date"))
    return findings


def check(view: ClusterView) -> list[Finding]:
    by_name = {text(meta(crd).get("name")): crd for crd in view.crds}
    findings: list[Finding] = []
    for expected in build_crds():
        findings += check_crd(expected, by_name.get(expected["metadata"]["name"]))
    return findings

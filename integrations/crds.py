"""Which framework kind a CustomResourceDefinition serves, read from the CRD itself.

The controller watches CRDs so that a framework installed (or removed) while it runs is
followed (or dropped) without a restart. A CRD is read here, purely: it is followed once
``Established``, through its *storage* version, and only when the adapters know that version
(the objects are shaped as stored; one read through another version would depend on a
conversion the adapter was not written for). A framework CRD stored in a version we do not
know is not followed, and the reason says which versions we read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from stromboli.core.api.registry import KindInfo
from stromboli.integrations.kinds import FRAMEWORK_KINDS

#: (API group, kind) → the framework kinds of that CRD, one per version the adapters read.
_BY_GROUP_KIND: Final[dict[tuple[str, str], tuple[KindInfo, ...]]] = {}
for _info in FRAMEWORK_KINDS:
    _key = (_info.group, _info.kind)
    _BY_GROUP_KIND[_key] = (*_BY_GROUP_KIND.get(_key, ()), _info)


@dataclass(frozen=True, slots=True)
class CrdReading:
    """What one framework CRD serves now."""

    name: str
    group: str
    kind: str
    #: The kind to follow; None while the CRD is not established or when it cannot be read.
    follow: KindInfo | None
    #: Why a CRD that is established is not followed ('' otherwise).
    problem: str = ""

    @property
    def versions(self) -> tuple[KindInfo, ...]:
        """Every framework kind (one per version we read) this CRD could serve."""
        return _BY_GROUP_KIND.get((self.group, self.kind), ())


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = _mapping(crd.get("status")).get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions
    )


def read_crd(crd: Mapping[str, Any]) -> CrdReading | None:
    """The reading of a framework CRD; None for a CRD of no framework kind."""
    spec = _mapping(crd.get("spec"))
    group, kind = spec.get("group"), _mapping(spec.get("names")).get("kind")
    if not isinstance(group, str) or not isinstance(kind, str):
        return None
    known = _BY_GROUP_KIND.get((group, kind))
    if not known:
        return None
    name = str(_mapping(crd.get("metadata")).get("name") or "")
    if not _established(crd):
        return CrdReading(name, group, kind, None)
    listed = spec.get("versions")
    versions = [v for v in listed if isinstance(v, Mapping)] if isinstance(listed, list) else []
    stored = next((v for v in versions if v.get("storage") is True), None)
    stored_name = str(stored.get("name")) if stored is not None else ""
    ours = ", ".join(info.api_version for info in known)
    match = next((info for info in known if info.version == stored_name), None)
    if match is None:
        stored_as = f"{group}/{stored_name}" if stored_name else "no storage version"
        return CrdReading(
            name,
            group,
            kind,
            None,
            f"CRD {name} stores {kind} as {stored_as}, a version the adapters do not read "
            f"(they read {ours}): {kind} is not followed",
        )
    if stored is None or stored.get("served") is not True:
        return CrdReading(
            name,
            group,
            kind,
            None,
            f"CRD {name} does not serve its storage version {match.api_version}: {kind} is "
            "not followed",
        )
    return CrdReading(name, group, kind, match)


__all__ = ["CrdReading", "read_crd"]

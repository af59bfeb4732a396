"""``topology.volcano.sh/v1alpha1``: HyperNode, one level of the network topology tree."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic.config import JsonValue

from stromboli.core.api.constants import TOPOLOGY_V1ALPHA1, MemberType
from stromboli.core.api.models.common import (
    ApiModel,
    Condition,
    DNSSubdomain,
    Int64,
    LabelSelector,
    Resource,
    field_error,
)


class ExactMatch(ApiModel):
    name: DNSSubdomain


class RegexMatch(ApiModel):
    pattern: str = Field(min_length=1)


_NO_SELECTOR = "member selector must have one of exactMatch, regexMatch, or labelMatch"
_SEVERAL_SELECTORS = (
    "cannot specify more than one selector type among exactMatch, regexMatch and labelMatch"
)
_SELECTOR_RULES: list[JsonValue] = [
    {
        "rule": "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)",
        "message": _NO_SELECTOR,
    },
    {
        "rule": "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0)"
        " + (has(self.labelMatch) ? 1 : 0) <= 1",
        "message": _SEVERAL_SELECTORS,
    },
]


class MemberSelector(ApiModel):
    """Picks members by exact name, by regular expression or (nodes only) by labels."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _SELECTOR_RULES})

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> MemberSelector:
        chosen = sum(
            part is not None for part in (self.exact_match, self.regex_match, self.label_match)
        )
        if chosen == 0:
            raise field_error("selector", _NO_SELECTOR)
        if chosen > 1:
            raise field_error("selector", _SEVERAL_SELECTORS)
        return self


class MemberSpec(ApiModel):
    type: MemberType
    selector: MemberSelector

    @model_validator(mode="after")
    def _labels_for_nodes(self) -> MemberSpec:
        if self.selector.label_match is not None and self.type is not MemberType.NODE:
            raise field_error("selector", "labelMatch may only select members of type Node")
        return self


class HyperNodeSpec(ApiModel):
    tier: Int64 = Field(ge=0, description="Level in the tree; lower tiers are closer together.")
    tier_name: str | None = Field(None, max_length=253)
    members: list[MemberSpec] = Field(min_length=1)


class HyperNodeStatus(ApiModel):
    conditions: list[Condition] | None = None
    node_count: Int64 | None = None


class HyperNode(Resource):
    """A group of nodes or HyperNodes sharing a network tier (rack, spine, ...)."""

    api_version: Literal["topology.volcano.sh/v1alpha1"] = TOPOLOGY_V1ALPHA1
    kind: Literal["HyperNode"] = "HyperNode"
    spec: HyperNodeSpec
    status: HyperNodeStatus | None = None

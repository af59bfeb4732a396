"""Building blocks shared by every API model: base classes, field types, object metadata.

Field types carry both their validation (with error messages that name the offending value)
and the OpenAPI fragment the CRD generator emits for them, so that the models stay the single
source of truth for the wire format.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from stromboli.core.api.quantity import is_quantity

# --- Base classes ------------------------------------------------------------------------------


class ApiModel(BaseModel):
    """Part of one of our CRDs: camelCase on the wire, unknown fields rejected (typos fail)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        serialize_by_alias=True,
    )


class LooseModel(ApiModel):
    """A Kubernetes type we only read parts of: unknown fields are kept as given."""

    model_config = ConfigDict(extra="allow")


def field_error(kind: str, detail: str) -> PydanticCustomError:
    """A validation error whose message is exactly ``detail`` (no ``Value error,`` prefix)."""
    return PydanticCustomError(kind, "{detail}", {"detail": detail})


# --- Scalars -------------------------------------------------------------------------------------

Int32 = Annotated[int, Strict(), Field(json_schema_extra={"format": "int32"})]
Int64 = Annotated[int, Strict(), Field(json_schema_extra={"format": "int64"})]
Bool = Annotated[bool, Strict()]


def _to_rfc3339(value: Any) -> Any:
    """YAML loaders turn unquoted timestamps into ``datetime``; put them back into wire form."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


Timestamp = Annotated[
    str,
    BeforeValidator(_to_rfc3339),
    Field(json_schema_extra={"format": "date-time"}),
]

_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)")


def _check_duration(value: str) -> str:
    if _DURATION.fullmatch(value) is None:
        raise field_error(
            "duration",
            f"{value!r} is not a valid duration (expected a Go duration such as 90s, 10m or 1h30m)",
        )
    return value


Duration = Annotated[str, AfterValidator(_check_duration)]


# --- Names ---------------------------------------------------------------------------------------

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(?:\.{_LABEL})*"
_LABEL_RE = re.compile(_LABEL)
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN)


def _name_type(pattern: re.Pattern[str], limit: int, what: str, allow_empty: bool) -> Any:
    """An annotated ``str`` checked as a DNS-1123 name, with the same rule in the CRD schema."""

    def check(value: str) -> str:
        if allow_empty and value == "":
            return value
        if len(value) > limit or pattern.fullmatch(value) is None:
            raise field_error(
                "dns_name",
                f"{value!r} is not a valid DNS-1123 {what}: use at most {limit} lowercase "
                "letters, digits and '-'"
                + (" or '.'" if "." in pattern.pattern else "")
                + ", starting and ending with a letter or digit",
            )
        return value

    body = pattern.pattern
    schema_pattern = f"^({body})?$" if allow_empty else f"^{body}$"
    return Annotated[
        str,
        AfterValidator(check),
        Field(json_schema_extra={"maxLength": limit, "pattern": schema_pattern}),
    ]


if TYPE_CHECKING:  # to a type checker these are strings; pydantic sees the checks
    DNSLabel = str
    DNSSubdomain = str
    OptionalDNSLabel = str
    OptionalDNSSubdomain = str
else:
    DNSLabel = _name_type(_LABEL_RE, 63, "label", allow_empty=False)
    DNSSubdomain = _name_type(_SUBDOMAIN_RE, 253, "subdomain", allow_empty=False)
    #: A label where ``""`` means unset (defaulted later by a webhook or controller).
    OptionalDNSLabel = _name_type(_LABEL_RE, 63, "label", allow_empty=True)
    #: A subdomain where ``""`` means unset (defaulted later by a webhook or controller).
    OptionalDNSSubdomain = _name_type(_SUBDOMAIN_RE, 253, "subdomain", allow_empty=True)


# --- Quantities and free-form objects ------------------------------------------------------------

QUANTITY_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
    "pattern": r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE])?$",
}


def _check_quantity(value: Any) -> Any:
    if is_quantity(value):
        return value
    raise field_error(
        "quantity",
        f"{value!r} is not a valid quantity "
        "(expected a number with an optional suffix such as 500m, 2Gi, 1.5 or 1e3)",
    )


Quantity = Annotated[
    str | int | float, PlainValidator(_check_quantity), WithJsonSchema(QUANTITY_SCHEMA)
]
"""A resource amount, kept exactly as written; only its syntax is checked here."""

ResourceList = dict[str, Quantity]

FREE_FORM_SCHEMA: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

FreeForm = Annotated[dict[str, Any], WithJsonSchema(FREE_FORM_SCHEMA)]
"""An embedded Kubernetes object (pod template, affinity, PVC spec) passed through untouched."""


# --- Metadata and references ---------------------------------------------------------------------


class OwnerReference(ApiModel):
    """Points at the object that owns this one (garbage collection, Command targets)."""

    api_version: str
    kind: str
    name: str
    uid: str | None = None
    controller: Bool | None = None
    block_owner_deletion: Bool | None = None


class ObjectReference(LooseModel):
    """A loose pointer at any object (CronJob ``status.active``)."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class ObjectMeta(LooseModel):
    """Standard object metadata; fields we do not read (managedFields, ...) are kept."""

    name: DNSSubdomain | None = None
    generate_name: str | None = None
    namespace: DNSLabel | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class LabelSelectorRequirement(ApiModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(ApiModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Condition(ApiModel):
    """The standard ``metav1.Condition`` (HyperNode status)."""

    type: str
    status: str
    observed_generation: Int64 | None = None
    last_transition_time: Timestamp | None = None
    reason: str | None = None
    message: str | None = None


def _require_name(meta: ObjectMeta) -> None:
    if not meta.name and not meta.generate_name:
        raise field_error(
            "missing_name", "metadata.name is required (or set metadata.generateName)"
        )


class Resource(ApiModel):
    """A top-level object of one of our CRDs: typed spec, typo-proof."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="after")
    def _named(self) -> Resource:
        _require_name(self.metadata)
        return self


class LooseResource(LooseModel):
    """A top-level core object: the parts the scheduler reads are typed, the rest kept."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="after")
    def _named(self) -> LooseResource:
        _require_name(self.metadata)
        return self

"""Every kind Stromboli knows, and the one entry point that validates an object of any of them.

The store uses the table (plural, scope, status subresource; kept in ``kinds.py`` so that a
client such as the CLI needs no models to use it); the simulator loader and the webhook call
:func:`validate_object`, so that a YAML file and an admission request are checked by the same
models and fail with the same messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from stromboli.core.api import kinds as _kinds
from stromboli.core.api.kinds import (
    KINDS,
    KindInfo,
    add_kind,
    kind_by_plural,
    kind_info,
    known_kinds,
)
from stromboli.core.api.models import (
    Command,
    CronJob,
    HyperNode,
    Job,
    JobFlow,
    JobTemplate,
    KubeObject,
    Namespace,
    Node,
    Numatopology,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceQuota,
)

__all__ = [
    "KINDS",
    "InvalidObjectError",
    "KindInfo",
    "field_path",
    "kind_by_plural",
    "kind_info",
    "known_kinds",
    "model_for",
    "register_kind",
    "validate_object",
]

#: The lookup tables of ``kinds.py`` (the same objects), for callers that reach in.
_BY_KIND = _kinds._BY_KIND
_BY_PLURAL = _kinds._BY_PLURAL

_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    (model.model_fields["api_version"].default, model.model_fields["kind"].default): model
    for model in (
        Queue,
        PodGroup,
        Job,
        CronJob,
        Command,
        JobFlow,
        JobTemplate,
        HyperNode,
        Numatopology,
        Pod,
        Node,
        Namespace,
        PriorityClass,
        ResourceQuota,
    )
}


def register_kind(info: KindInfo, model: type[BaseModel] | None = None) -> None:
    """Make a kind known (an integration's CRD, say); without a model only metadata is checked."""
    add_kind(info)
    if model is not None:
        _MODELS[info.api_version, info.kind] = model


def model_for(api_version: str, kind: str) -> type[BaseModel] | None:
    """The typed model of a kind, or ``None`` when only its metadata is checked (or unknown)."""
    return _MODELS.get((api_version, kind))


# --- Validation ----------------------------------------------------------------------------------


class InvalidObjectError(ValueError):
    """An object that does not match its kind's schema; the message says where and why.

    ``problems`` holds one ``(field path, message)`` pair per error, for callers (the
    webhook) that report them separately.
    """

    def __init__(
        self,
        message: str,
        *,
        where: str = "",
        kind: str = "",
        name: str = "",
        problems: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.where = where
        self.kind = kind
        self.name = name
        self.problems = tuple(problems)


def field_path(loc: Iterable[int | str]) -> str:
    """``('spec', 'tasks', 0, 'replicas')`` as ``spec.tasks[0].replicas``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _problems(error: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        message = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
        problems.append((field_path(item["loc"]), message))
    return problems


def _display_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        if isinstance(meta.get("name"), str) and meta["name"]:
            return meta["name"]
        if isinstance(meta.get("generateName"), str) and meta["generateName"]:
            return meta["generateName"] + "*"
    return "<unnamed>"


def validate_object(obj: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Check ``obj`` against its kind's model and return it with the CRD defaults applied.

    The result is plain JSON-able data (what the API server would store): unknown metadata
    and free-form parts (pod templates) are kept as given, unset optional fields are left
    out. ``where`` (``"file.yaml document 3"``) prefixes every error message.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(obj, Mapping):
        raise InvalidObjectError(
            f"{prefix}expected a Kubernetes object (a mapping), got {type(obj).__name__}",
            where=where,
        )
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        api_version = api_version if isinstance(api_version, str) else ""
        kind = kind if isinstance(kind, str) else ""
    name = _display_name(obj)
    model = _MODELS.get((api_version, kind))
    if model is None:
        if kind_info(api_version, kind) is None:
            raise InvalidObjectError(
                f'{prefix}{kind or "<no kind>"} "{name}": {_unsupported(api_version, kind)}',
                where=where,
                kind=kind,
                name=name,
            )
        model = KubeObject
    try:
        instance = model.model_validate(obj)
    except ValidationError as error:
        problems = _problems(error)
        details = "; ".join(f"{path}: {message}" if path else message for path, message in problems)
        raise InvalidObjectError(
            f'{prefix}{kind} "{name}": {details}',
            where=where,
            kind=kind,
            name=name,
            problems=problems,
        ) from None
    return instance.model_dump(by_alias=True, exclude_none=True, mode="json")


def _unsupported(api_version: str, kind: str) -> str:
    if not api_version or not kind:
        missing = " and ".join(
            field for field, value in (("apiVersion", api_version), ("kind", kind)) if not value
        )
        return f"{missing} missing; every object needs both"
    others = sorted(info.api_version for info in known_kinds() if info.kind == kind)
    hint = f" (known as {', '.join(others)})" if others else ""
    return f"kind {kind} of apiVersion {api_version} is not supported{hint}"

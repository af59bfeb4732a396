"""The admission.k8s.io AdmissionReview wire format: the request the API server sends, the
verdict a rule gives, and the response that carries it back.

Decoding checks only what the server needs to answer at all (a ``request`` with a ``uid``); the
rest is read leniently, as the API server is the only client. A refusal carries the webhook's
message in ``status.message`` with code 400, the code the API server itself uses for a refusal
without one (Volcano sets none); a mutation carries a base64 JSON patch.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson

from stromboli.webhooks.jsonpatch import Operation

ADMISSION_V1 = "admission.k8s.io/v1"
ADMISSION_VERSIONS = (ADMISSION_V1, "admission.k8s.io/v1beta1")


class ReviewError(ValueError):
    """A body that is not an AdmissionReview request: answered with HTTP 400, not a verdict."""


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """What one AdmissionReview asks about."""

    uid: str
    api_version: str
    group: str
    version: str
    kind: str
    resource: str
    operation: str
    name: str = ""
    namespace: str = ""
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None


@dataclass(slots=True)
class Verdict:
    """A rule's answer: allowed or not, why, and what to change."""

    allowed: bool
    message: str = ""
    code: int = 200
    patch: list[Operation] = field(default_factory=list)

    @classmethod
    def allow(cls, patch: list[Operation] | None = None) -> Verdict:
        return cls(True, patch=patch or [])

    @classmethod
    def deny(cls, message: str, code: int = 400) -> Verdict:
        return cls(False, message=message, code=code)


def _object(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"request.{where} must be a JSON object, got {type(value).__name__}")
    return value


def _text(value: Any, where: str) -> str:
    """A string field of the request ("" when absent); any other type is refused by name,
    rather than turned into text (the string of a huge object is itself huge)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ReviewError(f"request.{where} must be a string, got {type(value).__name__}")
    return value


def decode_review(body: bytes) -> AdmissionRequest:
    """The request of an AdmissionReview body; :class:`ReviewError` says what is wrong."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise ReviewError(f"the body is not JSON: {err}") from None
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview":
        raise ReviewError("the body is not an AdmissionReview (kind must be AdmissionReview)")
    api_version = review.get("apiVersion")
    if api_version not in ADMISSION_VERSIONS:
        raise ReviewError(
            f"AdmissionReview apiVersion {api_version!r} is not served; "
            f"expected one of {', '.join(ADMISSION_VERSIONS)}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("the AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("the AdmissionReview request has no uid")
    kind = request.get("kind") or {}
    resource = request.get("resource") or {}
    if not isinstance(kind, dict) or not isinstance(resource, dict):
        raise ReviewError("request.kind and request.resource must be objects")
    return AdmissionRequest(
        uid=uid,
        api_version=api_version,
        group=_text(kind.get("group"), "kind.group")
        or _text(resource.get("group"), "resource.group"),
        version=_text(kind.get("version"), "kind.version")
        or _text(resource.get("version"), "resource.version"),
        kind=_text(kind.get("kind"), "kind.kind"),
        resource=_text(resource.get("resource"), "resource.resource"),
        operation=_text(request.get("operation"), "operation"),
        name=_text(request.get("name"), "name"),
        namespace=_text(request.get("namespace"), "namespace"),
        object=_object(request.get("object"), "object"),
        old_object=_object(request.get("oldObject"), "oldObject"),
    )


def encode_response(request: AdmissionRequest, verdict: Verdict) -> bytes:
    """The AdmissionReview that answers ``request`` with ``verdict``."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {
            "status": "Failure",
            "message": verdict.message,
            "code": verdict.code,
        }
    elif verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(verdict.patch)).decode("ascii")
    return orjson.dumps(
        {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}
    )


def error_response(request: AdmissionRequest, message: str) -> bytes:
    """A refusal with code 500 that needs nothing but the request's uid: the answer of last
    resort when a verdict could not be encoded."""
    response = {
        "uid": request.uid,
        "allowed": False,
        "status": {"status": "Failure", "message": message, "code": 500},
    }
    return orjson.dumps(
        {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}
    )

"""Errors shaped like the API server's ``Status`` responses.

Both store backends raise these, so code above the store (scheduler, controller, webhook) handles a
conflict or a missing object the same way whether it talks to etcd or to memory. Each carries the
HTTP code, the machine-readable ``reason`` and a message worded like the API server's, and turns
into or out of a ``v1 Status`` object for the Kubernetes backend and the webhook.
"""

from __future__ import annotations

from typing import Any, ClassVar


def group_of(api_version: str) -> str:
    """The API group of ``apiVersion`` (``""`` for the core group ``v1``)."""
    group, _, _ = api_version.rpartition("/")
    return group


def qualified_resource(plural: str, api_version: str) -> str:
    """``pods`` in the core group, else ``podgroups.scheduling.volcano.sh``, as in messages."""
    group = group_of(api_version)
    return f"{plural}.{group}" if group else plural


def qualified_kind(kind: str, api_version: str) -> str:
    """``Pod`` for the core group, ``PodGroup.scheduling.volcano.sh`` otherwise, as in messages."""
    group = group_of(api_version)
    return f"{kind}.{group}" if group else kind


class ApiError(Exception):
    """A request the API server refused; ``code`` is the HTTP status, ``reason`` its name."""

    default_code: ClassVar[int] = 500
    default_reason: ClassVar[str] = "InternalError"

    def __init__(
        self,
        code: int | None = None,
        reason: str | None = None,
        message: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        self.code = self.default_code if code is None else code
        self.reason = self.default_reason if reason is None else reason
        self.message = message
        self.details = details
        super().__init__(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.reason!r}, {self.message!r})"

    def status(self) -> dict[str, Any]:
        """The ``v1 Status`` object the API server would send for this error."""
        status: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status

    @staticmethod
    def from_status(status: dict[str, Any]) -> ApiError:
        """Rebuild the matching error from a ``v1 Status`` (what a real API server returned)."""
        code = int(status.get("code") or 500)
        reason = str(status.get("reason") or "")
        message = str(status.get("message") or "")
        details = status.get("details")
        cls = _BY_REASON.get((code, reason))
        if cls is not None:
            return cls(message, details=details)
        return ApiError(code, reason or "Unknown", message, details)


class TypedApiError(ApiError):
    """An error whose code and reason are fixed by its class; only the message varies."""

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(None, None, message, details)


class BadRequestError(TypedApiError):
    """400: the request itself is malformed (an unparsable selector, an unknown patch type)."""

    default_code = 400
    default_reason = "BadRequest"


class NotFoundError(TypedApiError):
    """404: no such object (or no such resource type)."""

    default_code = 404
    default_reason = "NotFound"

    @classmethod
    def for_object(cls, resource: str, name: str) -> NotFoundError:
        return cls(f'{resource} "{name}" not found', details={"name": name, "kind": resource})


class AlreadyExistsError(TypedApiError):
    """409 AlreadyExists: a create for a name that is taken."""

    default_code = 409
    default_reason = "AlreadyExists"

    @classmethod
    def for_object(cls, resource: str, name: str) -> AlreadyExistsError:
        return cls(f'{resource} "{name}" already exists', details={"name": name, "kind": resource})


class ConflictError(TypedApiError):
    """409 Conflict: the write lost an optimistic-concurrency race or broke a precondition.

    Re-read the object and retry; that is what the message tells the user too.
    """

    default_code = 409
    default_reason = "Conflict"

    @classmethod
    def for_object(cls, resource: str, name: str, why: str | None = None) -> ConflictError:
        why = why or (
            "the object has been modified; please apply your changes to the latest version "
            "and try again"
        )
        return cls(
            f'Operation cannot be fulfilled on {resource} "{name}": {why}',
            details={"name": name, "kind": resource},
        )


class InvalidError(TypedApiError):
    """422 Invalid: the object fails validation; ``causes`` lists the fields at fault."""

    default_code = 422
    default_reason = "Invalid"

    @classmethod
    def for_object(cls, kind: str, name: str, *causes: str) -> InvalidError:
        return cls(
            f'{kind} "{name}" is invalid: {", ".join(causes)}',
            details={"name": name, "kind": kind, "causes": [{"message": c} for c in causes]},
        )


class GoneError(TypedApiError):
    """410 Expired: a watch asked for history older than what is retained; re-list, then watch."""

    default_code = 410
    default_reason = "Expired"


class TooManyRequestsError(TypedApiError):
    """429: the request may succeed later (an eviction blocked by a PodDisruptionBudget)."""

    default_code = 429
    default_reason = "TooManyRequests"


class UnsupportedMediaTypeError(TypedApiError):
    """415: a patch type this backend does not accept."""

    default_code = 415
    default_reason = "UnsupportedMediaType"


class InternalError(TypedApiError):
    """500: the server could not handle a request it understood."""

    default_code = 500
    default_reason = "InternalError"


_BY_REASON: dict[tuple[int, str], type[TypedApiError]] = {
    (400, "BadRequest"): BadRequestError,
    (404, "NotFound"): NotFoundError,
    (409, "AlreadyExists"): AlreadyExistsError,
    (409, "Conflict"): ConflictError,
    (422, "Invalid"): InvalidError,
    (410, "Expired"): GoneError,
    (410, "Gone"): GoneError,
    (429, "TooManyRequests"): TooManyRequestsError,
    (415, "UnsupportedMediaType"): UnsupportedMediaTypeError,
    (500, "InternalError"): InternalError,
}

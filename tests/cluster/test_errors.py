"""API errors: codes, reasons, messages and the v1 Status round trip."""

from __future__ import annotations

import pytest

from stromboli.core.cluster.errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    GoneError,
    InvalidError,
    NotFoundError,
    TooManyRequestsError,
    qualified_kind,
    qualified_resource,
)


@pytest.mark.parametrize(
    ("cls", "code", "reason"),
    [
        (BadRequestError, 400, "BadRequest"),
        (NotFoundError, 404, "NotFound"),
        (AlreadyExistsError, 409, "AlreadyExists"),
        (ConflictError, 409, "Conflict"),
        (InvalidError, 422, "Invalid"),
        (GoneError, 410, "Expired"),
        (TooManyRequestsError, 429, "TooManyRequests"),
    ],
)
def test_codes_and_reasons(cls: type[ApiError], code: int, reason: str) -> None:
    error = cls("boom")  # type: ignore[call-arg]
    assert (error.code, error.reason, error.message) == (code, reason, "boom")
    assert isinstance(error, ApiError)


def test_qualified_resource_core_and_group() -> None:
    assert qualified_resource("pods", "v1") == "pods"
    assert (
        qualified_resource("podgroups", "scheduling.volcano.sh/v1beta1")
        == "podgroups.scheduling.volcano.sh"
    )


def test_qualified_kind() -> None:
    assert qualified_kind("Pod", "v1") == "Pod"
    assert qualified_kind("Job", "batch.volcano.sh/v1alpha1") == "Job.batch.volcano.sh"


def test_not_found_message() -> None:
    assert str(NotFoundError.for_object("pods", "x")) == 'pods "x" not found'


def test_already_exists_message() -> None:
    assert str(AlreadyExistsError.for_object("queues.scheduling.volcano.sh", "q")) == (
        'queues.scheduling.volcano.sh "q" already exists'
    )


def test_conflict_message_like_api_server() -> None:
    error = ConflictError.for_object("podgroups.scheduling.volcano.sh", "x")
    assert error.message == (
        'Operation cannot be fulfilled on podgroups.scheduling.volcano.sh "x": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )


def test_invalid_lists_causes() -> None:
    error = InvalidError.for_object("Pod", "p", "metadata.name: Required value", "spec: bad")
    assert error.message == 'Pod "p" is invalid: metadata.name: Required value, spec: bad'
    assert error.details is not None
    assert len(error.details["causes"]) == 2


def test_status_shape() -> None:
    status = NotFoundError.for_object("pods", "x").status()
    assert status["kind"] == "Status"
    assert status["status"] == "Failure"
    assert status["code"] == 404
    assert status["reason"] == "NotFound"
    assert status["details"]["name"] == "x"


@pytest.mark.parametrize(
    "error",
    [
        NotFoundError("a"),
        ConflictError("b"),
        AlreadyExistsError("c"),
        GoneError("d"),
        TooManyRequestsError("e"),
        InvalidError("f"),
    ],
)
def test_status_round_trip_keeps_class(error: ApiError) -> None:
    back = ApiError.from_status(error.status())
    assert type(back) is type(error)
    assert back.message == error.message


def test_from_status_gone_reason() -> None:
    assert isinstance(ApiError.from_status({"code": 410, "reason": "Gone"}), GoneError)


def test_from_status_unknown_reason_stays_generic() -> None:
    error = ApiError.from_status({"code": 503, "reason": "ServiceUnavailable", "message": "m"})
    assert type(error) is ApiError
    assert (error.code, error.reason, error.message) == (503, "ServiceUnavailable", "m")

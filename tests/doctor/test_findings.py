from __future__ import annotations

import pytest

from stromboli.core.doctor.findings import Finding, Severity, exit_code, fail, ok, warn


def test_a_line_is_severity_check_message_and_fix() -> None:
    line = fail("webhook", "MutatingWebhookConfiguration x has no caBundle", "run: y").line()
    assert line == "FAIL  webhook: MutatingWebhookConfiguration x has no caBundle — run: y"


def test_an_ok_line_has_no_fix() -> None:
    assert ok("crds", "all good").line() == "OK    crds: all good"


@pytest.mark.parametrize(
    ("severities", "strict", "code"),
    [
        ((), False, 0),
        ((Severity.OK,), False, 0),
        ((Severity.OK, Severity.WARN), False, 0),
        ((Severity.OK, Severity.WARN), True, 1),
        ((Severity.FAIL,), False, 1),
        ((Severity.OK, Severity.FAIL, Severity.WARN), False, 1),
    ],
)
def test_exit_code(severities: tuple[Severity, ...], strict: bool, code: int) -> None:
    findings = [Finding(s, "x", "y") for s in severities]
    assert exit_code(findings, strict) == code


def test_document_names_every_field() -> None:
    assert warn("rbac", "m", "f").document() == {
        "severity": "WARN",
        "check": "rbac",
        "message": "m",
        "fix": "f",
    }

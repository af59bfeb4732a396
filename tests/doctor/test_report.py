"""The whole report over hostile views: any object a user could store, in any list, gives
findings (naming what is wrong) and never stops the report."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.doctor.findings import Severity, exit_code
from stromboli.core.doctor.report import diagnose, render_json, render_text

from .builders import healthy_view

LISTS = (
    "crds",
    "mutating_configurations",
    "validating_configurations",
    "services",
    "endpoint_slices",
    "secrets",
    "deployments",
    "namespaces",
    "service_accounts",
)
KEYS = st.sampled_from(
    [
        "metadata",
        "name",
        "namespace",
        "labels",
        "spec",
        "status",
        "webhooks",
        "clientConfig",
        "caBundle",
        "service",
        "versions",
        "schema",
        "openAPIV3Schema",
        "properties",
        "data",
        "tls.crt",
        "template",
        "containers",
        "image",
        "args",
        "endpoints",
        "conditions",
        "ready",
        "ports",
        "port",
        "namespaceSelector",
        "matchExpressions",
        "operator",
        "rules",
        "x",
    ]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)


def _bug_lines(findings: list[Any]) -> list[str]:
    return [f.message for f in findings if "could not read:" in f.message]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LISTS), st.lists(JSON, min_size=1, max_size=3), st.booleans())
def test_hostile_objects_never_stop_a_check(attribute: str, junk: list[Any], replace: bool) -> None:
    view = healthy_view()
    objects = getattr(view, attribute)
    if replace and objects:
        objects[0] = junk[0]
        objects += junk[1:]
    else:
        objects += junk
    findings = diagnose(view)
    assert _bug_lines(findings) == []
    assert render_text(findings).count("\n") == len(findings) - 1


def test_a_healthy_view_has_no_fail() -> None:
    findings = diagnose(healthy_view())
    assert exit_code(findings) == 0
    assert {f.check for f in findings} == {
        "crds",
        "rbac",
        "webhook",
        "certificates",
        "operators",
        "enrolment",
    }
    assert '"exitCode": 0' in render_json(findings, 0)


def test_an_unreadable_kind_is_one_fail_and_its_checks_are_skipped() -> None:
    view = healthy_view()
    view.unread["CustomResourceDefinition"] = "forbidden: cannot list"
    findings = diagnose(view)
    assert findings[0].severity is Severity.FAIL
    assert findings[0].message == "could not list CustomResourceDefinition: forbidden: cannot list"
    assert all(f.check != "crds" for f in findings)


def test_an_unreadable_secret_skips_the_checks_that_read_it() -> None:
    view = healthy_view()
    view.unread["Secret"] = "forbidden"
    checks = {f.check for f in diagnose(view)}
    assert "certificates" not in checks and "webhook" not in checks
    assert {"crds", "rbac", "operators", "enrolment", "doctor"} <= checks


def test_a_check_that_raises_is_a_fail_line_and_the_rest_still_runs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from stromboli.core.doctor import report

    def broken(view):  # type: ignore[no-untyped-def]
        raise KeyError("surprise")

    checks = [
        (family, broken if family == "crds" else check, needs)
        for family, check, needs in report.CHECKS
    ]
    monkeypatch.setattr(report, "CHECKS", tuple(checks))
    findings = diagnose(healthy_view())
    crd_lines = [f for f in findings if f.check == "crds"]
    assert [f.severity for f in crd_lines] == [Severity.FAIL]
    assert "KeyError" in crd_lines[0].message
    assert any(f.check == "enrolment" for f in findings)

from __future__ import annotations

import pytest

from stromboli.core.doctor import enrolment
from stromboli.core.doctor.enrolment import SelectorError, selects
from stromboli.core.doctor.findings import Severity

from .builders import NS, healthy_view, namespace

PODS_MUTATE = "volcano-admission-service-pods-mutate"
ENROL = {"stromboli.dev/enroll": "true"}


def _pods_mutate(view):  # type: ignore[no-untyped-def]
    return next(c for c in view.mutating_configurations if c["metadata"]["name"] == PODS_MUTATE)


def test_nothing_enrolled_is_ok() -> None:
    [finding] = enrolment.check(healthy_view())
    assert finding.severity is Severity.OK
    assert finding.message.startswith("no namespace is enrolled")


def test_an_enrolled_namespace_seen_by_the_enrolled_webhook() -> None:
    view = healthy_view()
    view.namespaces.append(namespace("ml", **ENROL))
    [finding] = enrolment.check(view)
    assert finding.severity is Severity.OK
    assert finding.message == (
        f"namespace ml is enrolled; {PODS_MUTATE} (enrolled.mutatepod.volcano.sh) sees its pods"
    )


def test_an_enrolled_namespace_without_the_pod_webhook_fails() -> None:
    view = healthy_view()
    view.namespaces.append(namespace("ml", **ENROL))
    view.mutating_configurations.remove(_pods_mutate(view))
    [finding] = enrolment.check(view)
    assert finding.severity is Severity.FAIL
    assert finding.message.startswith(
        f"namespace ml is enrolled but MutatingWebhookConfiguration {PODS_MUTATE} is missing"
    )


def test_a_webhook_not_scoped_to_it_fails() -> None:
    view = healthy_view()
    view.namespaces.append(namespace("ml", **ENROL))
    for webhook in _pods_mutate(view)["webhooks"]:
        webhook["namespaceSelector"] = {"matchLabels": {"team": "other"}}
    [finding] = enrolment.check(view)
    assert finding.severity is Severity.FAIL
    assert finding.message == f"namespace ml is enrolled but no webhook of {PODS_MUTATE} selects it"


def test_a_webhook_that_does_not_send_creates_does_not_count() -> None:
    view = healthy_view()
    view.namespaces.append(namespace("ml", **ENROL))
    for webhook in _pods_mutate(view)["webhooks"]:
        webhook["rules"][0]["operations"] = ["UPDATE"]
    assert enrolment.check(view)[0].severity is Severity.FAIL


@pytest.mark.parametrize("name", [NS, "kube-system"])
def test_our_namespace_and_kube_system_are_never_enrolled(name: str) -> None:
    view = healthy_view()
    view.namespaces = [n for n in view.namespaces if n["metadata"]["name"] != name]
    view.namespaces.append(namespace(name, **ENROL))
    [finding] = enrolment.check(view)
    assert finding.severity is Severity.WARN
    assert "never sees pods of its own namespace or kube-system" in finding.message


@pytest.mark.parametrize("value", ["True", "yes", "1", ""])
def test_a_label_value_other_than_true_warns(value: str) -> None:
    view = healthy_view()
    view.namespaces.append(namespace("ml", **{"stromboli.dev/enroll": value}))
    warned = [f for f in enrolment.check(view) if f.severity is Severity.WARN]
    assert len(warned) == 1 and f"={value!r}" in warned[0].message


def test_a_malformed_selector_fails_naming_the_configuration() -> None:
    view = healthy_view()
    view.namespaces.append(namespace("ml", **ENROL))
    _pods_mutate(view)["webhooks"][0]["namespaceSelector"] = {
        "matchExpressions": [{"key": "a", "operator": "Near"}]
    }
    [finding] = enrolment.check(view)
    assert finding.severity is Severity.FAIL
    assert PODS_MUTATE in finding.message and "'Near'" in finding.message


@pytest.mark.parametrize(
    ("selector", "labels", "matched"),
    [
        (None, {}, True),
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"a": "2"},
            True,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
            {"a": "1"},
            False,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ],
)
def test_selects(selector: object, labels: dict[str, str], matched: bool) -> None:
    assert selects(selector, labels) is matched


def test_selects_refuses_a_selector_that_is_not_an_object() -> None:
    with pytest.raises(SelectorError):
        selects(["a"], {})

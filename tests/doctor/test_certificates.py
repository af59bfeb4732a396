from __future__ import annotations

import datetime as dt

import pytest

from stromboli.core.doctor import certificates
from stromboli.core.doctor.certificates import CertificateError, parse_bundle, trusted
from stromboli.core.doctor.findings import Severity
from stromboli.webhooks.tls import SECRET_NAME

from .builders import NOW, NS, WEBHOOK_ARGS, b64, deployment, healthy_view, pem_pair, secret

WHERE = f"Secret {NS}/{SECRET_NAME}"


def with_cert(not_before: dt.datetime, not_after: dt.datetime):  # type: ignore[no-untyped-def]
    view = healthy_view()
    view.secrets = [secret(*pem_pair(not_before, not_after))]
    return view


def test_a_valid_certificate_and_ca_are_ok() -> None:
    findings = certificates.check(healthy_view())
    assert [f.severity for f in findings] == [Severity.OK, Severity.OK]
    assert findings[0].message.startswith(f"serving certificate in {WHERE} valid until")


@pytest.mark.parametrize(
    ("days_left", "severity", "said"),
    [
        (400, Severity.OK, "valid until"),
        (31, Severity.OK, "valid until"),
        (29, Severity.WARN, "expires in 28 days"),
        (1, Severity.WARN, "expires in 0 days"),
        (-1, Severity.FAIL, "expired on"),
    ],
)
def test_expiry(days_left: int, severity: Severity, said: str) -> None:
    not_after = NOW + dt.timedelta(days=days_left) - dt.timedelta(hours=1)
    [serving, _ca] = certificates.check(with_cert(NOW - dt.timedelta(days=400), not_after))
    assert serving.severity is severity
    assert said in serving.message
    if severity is not Severity.OK:
        assert f"delete secret {SECRET_NAME}" in serving.fix


def test_not_yet_valid_fails() -> None:
    view = with_cert(NOW + dt.timedelta(days=1), NOW + dt.timedelta(days=300))
    [serving, _ca] = certificates.check(view)
    assert serving.severity is Severity.FAIL
    assert "is not valid before" in serving.message


@pytest.mark.parametrize(
    ("value", "said"),
    [(None, "is missing"), ("%%%", "is not base64"), (b64(b"not pem"), "not a PEM certificate")],
)
def test_a_certificate_that_does_not_parse_is_named(value: object, said: str) -> None:
    view = healthy_view()
    view.secrets[0]["data"]["tls.crt"] = value
    failed = [f.message for f in certificates.check(view) if f.severity is Severity.FAIL]
    assert len(failed) == 1
    assert failed[0].startswith(f"{WHERE} data.tls.crt")
    assert said in failed[0]


def test_a_missing_secret_fails() -> None:
    view = healthy_view()
    view.secrets = []
    [finding] = certificates.check(view)
    assert finding.severity is Severity.FAIL
    assert finding.message == f"{WHERE} (the webhook's serving certificate) is missing"


def test_a_mounted_secret_is_read_from_the_volume() -> None:
    view = healthy_view()
    args = [*WEBHOOK_ARGS, "--tls-cert-file=/etc/stromboli/webhook-tls/tls.crt"]
    hook = deployment("stromboli-webhook", args=args)
    hook["spec"]["template"]["spec"]["volumes"] = [
        {"name": "tls", "secret": {"secretName": "mine"}}
    ]
    view.deployments[2] = hook
    view.secrets = [secret(*pem_pair(), name="mine")]
    findings = certificates.check(view)
    assert [f.severity for f in findings] == [Severity.OK, Severity.OK]
    assert "Secret volcano-system/mine" in findings[0].message


def test_a_webhook_at_a_url_is_judged_by_what_it_presented() -> None:
    view = healthy_view()
    view.deployments[2] = deployment(
        "stromboli-webhook", args=[*WEBHOOK_ARGS, "--webhook-url=https://10.0.0.9:8443"]
    )
    _, leaf = pem_pair(NOW - dt.timedelta(days=90), NOW - dt.timedelta(days=2))
    view.peer_certificates["https://10.0.0.9:8443"] = leaf
    assert any(
        f.severity is Severity.FAIL
        and "serving certificate of https://10.0.0.9:8443 expired" in f.message
        for f in certificates.check(view)
    )
    view.peer_certificates["https://10.0.0.9:8443"] = "TLS handshake failed: refused"
    assert any(
        f.severity is Severity.FAIL
        and "no certificate read from https://10.0.0.9:8443" in f.message
        for f in certificates.check(view)
    )


def test_no_webhook_no_certificate_checks() -> None:
    view = healthy_view()
    view.deployments = view.deployments[:2]
    assert certificates.check(view) == []


def test_parse_bundle_refuses_huge_input() -> None:
    with pytest.raises(CertificateError, match="too large"):
        parse_bundle(b"A" * (2 << 20))


def test_trusted_accepts_the_signer_and_a_self_signed_leaf() -> None:
    ca, leaf = pem_pair()
    assert trusted(ca, leaf) == ""
    assert trusted(ca + leaf, leaf) == ""
    other, _ = pem_pair(ca_name="other")
    assert trusted(other, leaf).startswith("no certificate of the caBundle signed")
    assert trusted(leaf, leaf) == ""

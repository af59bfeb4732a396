"""Certificates: the webhook's serving certificate and its CA parse, are valid now and for a
while yet, and the CA in each webhook configuration's ``caBundle`` is the one that signed the
certificate the server presents (else the API server rejects every call: with
``failurePolicy: Fail`` that refuses every vcjob)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from stromboli.core.doctor.findings import Finding, fail, ok, warn
from stromboli.core.doctor.install import settings
from stromboli.core.doctor.view import ClusterView, mapping, restart

CHECK = "certificates"
WARN_BEFORE: Final = dt.timedelta(days=30)
MAX_PEM_BYTES: Final = 1 << 20
"""A bundle larger than this is not a certificate bundle; it is not parsed."""


class CertificateError(ValueError):
    """A certificate or bundle that does not parse; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Certificate:
    subject: str
    not_before: dt.datetime
    not_after: dt.datetime
    parsed: x509.Certificate


def parse_bundle(pem: bytes) -> list[Certificate]:
    """Every certificate of a PEM bundle; :class:`CertificateError` if there is none or one
    does not parse."""
    if len(pem) > MAX_PEM_BYTES:
        raise CertificateError(f"{len(pem)} bytes is too large for a certificate bundle")
    try:
        loaded = x509.load_pem_x509_certificates(pem)
    except ValueError as err:
        raise CertificateError(f"not a PEM certificate ({err})") from None
    return [
        Certificate(c.subject.rfc4514_string(), c.not_valid_before_utc, c.not_valid_after_utc, c)
        for c in loaded
    ]


def decode_base64(value: object, where: str) -> bytes:
    if not isinstance(value, str) or not value:
        raise CertificateError(f"{where} is missing")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise CertificateError(f"{where} is not base64") from None


def signed_by(cert: x509.Certificate, authority: x509.Certificate) -> bool:
    """Whether ``authority``'s key made ``cert``'s signature."""
    if cert.issuer != authority.subject:
        return False
    key = authority.public_key()
    algorithm = cert.signature_hash_algorithm
    try:
        if isinstance(key, rsa.RSAPublicKey) and algorithm is not None:
            key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey) and algorithm is not None:
            key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
        else:
            cert.verify_directly_issued_by(authority)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def trusted(ca_bundle: bytes, served: bytes) -> str:
    """Why a client trusting ``ca_bundle`` would reject ``served`` ("" when it would not)."""
    authorities = parse_bundle(ca_bundle)
    leaf = parse_bundle(served)[0].parsed
    if any(signed_by(leaf, ca.parsed) or ca.parsed == leaf for ca in authorities):
        return ""
    issuer = leaf.issuer.rfc4514_string()
    return f"no certificate of the caBundle signed the serving certificate (issuer {issuer})"


def expiry_finding(what: str, cert: Certificate, now: dt.datetime, fix: str) -> Finding:
    if cert.not_before > now:
        return fail(CHECK, f"{what} is not valid before {cert.not_before:%Y-%m-%d %H:%M}Z", fix)
    left = cert.not_after - now
    until = f"{cert.not_after:%Y-%m-%d}"
    if left <= dt.timedelta(0):
        return fail(CHECK, f"{what} expired on {until}", fix)
    if left < WARN_BEFORE:
        return warn(CHECK, f"{what} expires in {left.days} days ({until})", fix)
    return ok(CHECK, f"{what} valid until {until}")


def renew_fix(view: ClusterView, secret: str) -> str:
    ns = view.namespace
    return (
        f"renew it: kubectl -n {ns} delete secret {secret} && "
        f"{restart(view)} "
        "(a generated one is made again), or replace the Secret you manage"
    )


def check(view: ClusterView) -> list[Finding]:
    wanted = settings(view)
    if not wanted.installed:
        return []
    findings: list[Finding] = []
    if wanted.secret_name:
        secret = view.find(view.secrets, wanted.secret_name, wanted.namespace)
        where = f"Secret {wanted.namespace}/{wanted.secret_name}"
        fix = renew_fix(view, wanted.secret_name)
        if secret is None:
            findings.append(
                fail(
                    CHECK,
                    f"{where} (the webhook's serving certificate) is missing",
                    f"run: {restart(view)} (the first replica creates it)",
                )
            )
        else:
            data = mapping(mapping(secret).get("data"))
            for key, label in (("tls.crt", "serving certificate"), ("ca.crt", "CA certificate")):
                try:
                    bundle = parse_bundle(decode_base64(data.get(key), f"{where} data.{key}"))
                except CertificateError as err:
                    text_ = str(err)
                    if not text_.startswith(where):
                        text_ = f"{where} data.{key}: {text_}"
                    findings.append(fail(CHECK, text_, fix))
                    continue
                findings.append(expiry_finding(f"{label} in {where}", bundle[0], view.now, fix))
    for url, presented in sorted(view.peer_certificates.items()):
        if isinstance(presented, str):
            findings.append(
                fail(
                    CHECK,
                    f"no certificate read from {url}: {presented}",
                    "check the server at that URL is up",
                )
            )
            continue
        try:
            leaf = parse_bundle(presented)[0]
        except CertificateError as err:
            findings.append(
                fail(CHECK, f"the certificate {url} presents: {err}", "check its TLS files")
            )
            continue
        findings.append(
            expiry_finding(
                f"serving certificate of {url}", leaf, view.now, "renew the webhook's TLS files"
            )
        )
    return findings


def secret_certificate(view: ClusterView) -> bytes | None:
    """The serving certificate from the webhook's Secret, if one is there and decodes."""
    wanted = settings(view)
    secret = (
        view.find(view.secrets, wanted.secret_name, wanted.namespace)
        if wanted.secret_name
        else None
    )
    if secret is None:
        return None
    try:
        return decode_base64(mapping(mapping(secret).get("data")).get("tls.crt"), "tls.crt")
    except CertificateError:
        return None

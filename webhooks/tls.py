"""Serving certificates for the admission webhook.

The API server only calls a webhook over HTTPS, and checks its certificate against the
``caBundle`` of the webhook configuration. A deployment either mounts its own files
(``--tls-cert-file``, ``--tls-private-key-file``, ``--ca-cert-file``, as Volcano's chart does
with a generated Secret) or lets the server make a throw-away CA and a serving certificate for
the Service's DNS names and loopback at start-up; the server then puts that CA in the webhook
configurations it registers, so nothing else needs to know it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=3650)
"""Generated certificates live as long as the process that made them, which is usually less
than this; the long span only keeps a long-running replica from expiring under its clients."""


@dataclass(frozen=True, slots=True)
class ServingCertificate:
    """PEM bytes of a serving certificate (chain), its key, and the CA that signs it."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes

    def ssl_context(self) -> ssl.SSLContext:
        """A TLS 1.2+ server context for these bytes (Python loads keys only from files, so
        they pass through a private temporary directory that is removed at once)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with tempfile.TemporaryDirectory(prefix="stromboli-webhook-") as directory:
            cert = Path(directory) / "tls.crt"
            key = Path(directory) / "tls.key"
            cert.write_bytes(self.cert_pem)
            key.touch(mode=0o600)
            key.write_bytes(self.key_pem)
            context.load_cert_chain(cert, key)
        return context


def service_hosts(service: str, namespace: str) -> list[str]:
    """The names the API server may use for a Service, plus loopback."""
    hosts = ["localhost", "127.0.0.1"]
    if service and namespace:
        hosts[:0] = [
            service,
            f"{service}.{namespace}",
            f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local",
        ]
    return hosts


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_usage(*, sign_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=sign_certificates,
        crl_sign=sign_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def self_signed(hosts: list[str], common_name: str = "stromboli-webhook") -> ServingCertificate:
    """A new CA and a serving certificate signed by it, valid for ``hosts`` (DNS names or IP
    addresses). ECDSA P-256: quick to make, accepted by Go's TLS stack."""
    now = dt.datetime.now(dt.UTC)
    start = now - dt.timedelta(hours=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{common_name}-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(sign_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0] if hosts else common_name))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(sign_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCertificate(
        cert.public_bytes(serialization.Encoding.PEM),
        _pem_key(key),
        ca.public_bytes(serialization.Encoding.PEM),
    )


def load_files(cert_file: str, key_file: str, ca_file: str | None) -> ServingCertificate:
    """Certificates from files. Without a CA file the certificate file stands in for it,
    which suits a self-signed certificate or a chain that ends with its CA."""
    cert = Path(cert_file).read_bytes()
    ca = Path(ca_file).read_bytes() if ca_file else cert
    return ServingCertificate(cert, Path(key_file).read_bytes(), ca)

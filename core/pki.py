"""Throw-away certificate authorities: serving, client and peer certificates, SA keys.

The test control plane gets its CA, serving, client and service-account keys here, and the
admission webhook its self-made CA and serving certificate. Everything is ECDSA P-256 (fast to
generate, accepted by etcd, kube-apiserver and Go's TLS stack). Files are written PEM-encoded
with 0600 keys.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_VALIDITY = _dt.timedelta(days=30)
_BACKDATE = _dt.timedelta(hours=1)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, as PEM bytes and (once written) as files."""

    cert_pem: bytes
    key_pem: bytes
    cert_path: Path | None = None
    key_path: Path | None = None

    def write(self, directory: Path, name: str) -> KeyPair:
        cert = _write(directory / f"{name}.crt", self.cert_pem)
        key = _write(directory / f"{name}.key", self.key_pem, private=True)
        return KeyPair(self.cert_pem, self.key_pem, cert, key)


class CertificateAuthority:
    """A throw-away CA that signs serving and client certificates."""

    def __init__(
        self,
        common_name: str = "stromboli-devcluster-ca",
        validity: _dt.timedelta = DEFAULT_VALIDITY,
    ) -> None:
        """``validity``: how long the CA and every certificate it issues stay valid."""
        self._validity = validity
        self._key = _new_key()
        now = _dt.datetime.now(_dt.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self._key)

    def write(self, directory: Path, name: str = "ca") -> KeyPair:
        return KeyPair(self.cert_pem, self.key_pem).write(directory, name)

    def _issue(
        self,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
        server: bool = False,
        client: bool = False,
    ) -> KeyPair:
        key = _new_key()
        now = _dt.datetime.now(_dt.UTC)
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + self._validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def issue_serving(self, common_name: str, hosts: tuple[str, ...] | list[str]) -> KeyPair:
        """A TLS server certificate valid for ``hosts`` (DNS names and/or IP addresses)."""
        return self._issue(common_name, hosts=tuple(hosts), server=True)

    def issue_client(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> KeyPair:
        """A client certificate that kube-apiserver maps to ``user`` in ``groups``."""
        return self._issue(user, organizations=tuple(groups), client=True)

    def issue_peer(self, common_name: str, hosts: tuple[str, ...] | list[str]) -> KeyPair:
        """A certificate usable both as server and as client (etcd-style peers)."""
        return self._issue(common_name, hosts=tuple(hosts), server=True, client=True)


def write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    """The key pair kube-apiserver signs and verifies service-account tokens with."""
    key = _new_key()
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return (
        _write(directory / "sa.key", _key_pem(key), private=True),
        _write(directory / "sa.pub", pub),
    )

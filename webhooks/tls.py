"""Serving certificates for the admission webhook.

The API server only calls a webhook over HTTPS, and checks its certificate against the
``caBundle`` of the webhook configuration. A deployment either mounts its own files
(``--tls-cert-file``, ``--tls-private-key-file``, ``--ca-cert-file``, as Volcano's chart does
with a generated Secret) or lets the server make a throw-away CA and a serving certificate for
the Service's DNS names and loopback at start-up; the server then puts that CA in the webhook
configurations it registers, so nothing else needs to know it.

Several replicas must serve one certificate, since the configurations carry one CA bundle. In
the cluster (``--webhook-namespace`` given) the generated pair is therefore kept in a Secret,
``volcano-admission-secret`` as Volcano's chart names it (``tls.crt``, ``tls.key``,
``ca.crt``): the first replica creates it, the others (and every restart) read it, and a
cluster moving from Volcano keeps serving the certificate it already has.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import logging
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stromboli.core.cluster.errors import AlreadyExistsError, NotFoundError
from stromboli.core.cluster.store import ClusterStore, Obj
from stromboli.core.pki import CertificateAuthority

log = logging.getLogger(__name__)

SECRET_NAME = "volcano-admission-secret"
SECRET_KEYS = ("tls.crt", "tls.key", "ca.crt")

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


def self_signed(hosts: list[str], common_name: str = "stromboli-webhook") -> ServingCertificate:
    """A new CA and a serving certificate signed by it, valid for ``hosts`` (DNS names or IP
    addresses)."""
    ca = CertificateAuthority(f"{common_name}-ca", validity=VALIDITY)
    pair = ca.issue_serving(hosts[0] if hosts else common_name, hosts)
    return ServingCertificate(pair.cert_pem, pair.key_pem, ca.cert_pem)


def load_files(cert_file: str, key_file: str, ca_file: str | None) -> ServingCertificate:
    """Certificates from files. Without a CA file the certificate file stands in for it,
    which suits a self-signed certificate or a chain that ends with its CA."""
    cert = Path(cert_file).read_bytes()
    ca = Path(ca_file).read_bytes() if ca_file else cert
    return ServingCertificate(cert, Path(key_file).read_bytes(), ca)


def certificate_secret(name: str, namespace: str, certificate: ServingCertificate) -> Obj:
    def encoded(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": encoded(certificate.cert_pem),
            "tls.key": encoded(certificate.key_pem),
            "ca.crt": encoded(certificate.ca_pem),
        },
    }


def from_secret(secret: Obj) -> ServingCertificate:
    """The pair a Secret holds; :class:`ValueError` names the Secret and the missing key."""
    meta = secret.get("metadata") or {}
    where = f"Secret {meta.get('namespace')}/{meta.get('name')}"
    data = secret.get("data") or {}
    found = []
    for key in SECRET_KEYS:
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where}: data.{key} is missing; it needs {', '.join(SECRET_KEYS)}")
        try:
            found.append(base64.b64decode(value, validate=True))
        except binascii.Error:
            raise ValueError(f"{where}: data.{key} is not base64") from None
    return ServingCertificate(*found)


async def shared_certificate(
    store: ClusterStore, namespace: str, name: str, hosts: list[str]
) -> ServingCertificate:
    """The certificate every replica serves: read from the Secret, or generated and stored
    there by whichever replica comes first."""
    try:
        secret = await store.get("v1", "Secret", name, namespace)
    except NotFoundError:
        made = self_signed(hosts)
        try:
            await store.create(certificate_secret(name, namespace, made))
        except AlreadyExistsError:
            secret = await store.get("v1", "Secret", name, namespace)  # another replica won
        else:
            log.info("stored a new serving certificate in Secret %s/%s", namespace, name)
            return made
    return from_secret(secret)

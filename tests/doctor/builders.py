"""In-memory cluster objects for the doctor's pure checks: a healthy install as deploy/
makes it, and certificates with chosen validity."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from stromboli.core.api.crds import build_crds
from stromboli.core.doctor import rbac
from stromboli.core.doctor.view import ClusterView
from stromboli.webhooks.registration import ClientTarget, webhook_configuration
from stromboli.webhooks.services import DEFAULT_ENABLED_ADMISSION, enabled_services
from stromboli.webhooks.tls import SECRET_NAME

NS = "volcano-system"
SERVICE = "volcano-admission-service"
NOW = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def pem_pair(
    not_before: dt.datetime = NOW - dt.timedelta(days=1),
    not_after: dt.datetime = NOW + dt.timedelta(days=365),
    ca_name: str = "doctor-ca",
) -> tuple[bytes, bytes]:
    """(CA PEM, serving certificate PEM signed by it) with the serving cert's validity."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(days=10))
        .not_valid_after(NOW + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(SERVICE))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(ca_key, hashes.SHA256())
    )
    encoding = serialization.Encoding.PEM
    return ca.public_bytes(encoding), leaf.public_bytes(encoding)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secret(ca_pem: bytes, cert_pem: bytes, name: str = SECRET_NAME) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "data": {"tls.crt": b64(cert_pem), "tls.key": b64(b"key"), "ca.crt": b64(ca_pem)},
    }


def established(crd: dict[str, Any]) -> dict[str, Any]:
    crd = copy.deepcopy(crd)
    version = crd["spec"]["versions"][0]["name"]
    crd["status"] = {
        "conditions": [{"type": "Established", "status": "True"}],
        "storedVersions": [version],
    }
    return crd


def deployment(
    name: str,
    namespace: str = NS,
    args: list[str] | None = None,
    image: str = "stromboli:0.1.0",
    ready: int = 2,
    account: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": image, "args": args or []}]}
    if account:
        spec["serviceAccountName"] = account
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": spec}},
        "status": {"readyReplicas": ready},
    }


WEBHOOK_ARGS = [
    "webhook-manager",
    "--webhook-namespace=volcano-system",
    f"--webhook-service-name={SERVICE}",
    f"--enabled-admission={DEFAULT_ENABLED_ADMISSION}",
]


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def healthy_view() -> ClusterView:
    """Everything deploy/ installs, registered and Ready, every access allowed."""
    ca_pem, cert_pem = pem_pair()
    view = ClusterView(namespace=NS, now=NOW)
    view.crds = [established(crd) for crd in build_crds()]
    target = ClientTarget(namespace=NS, service_name=SERVICE)
    for service in enabled_services(DEFAULT_ENABLED_ADMISSION):
        config = webhook_configuration(service, target, ca_pem)
        config["metadata"]["uid"] = service.path
        if service.mutating:
            view.mutating_configurations.append(config)
        else:
            view.validating_configurations.append(config)
    view.services = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NS},
            "spec": {"ports": [{"port": 443}]},
        }
    ]
    view.endpoint_slices = [
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-abc",
                "namespace": NS,
                "labels": {"kubernetes.io/service-name": SERVICE},
            },
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
                {"addresses": ["10.0.0.2"]},
            ],
        }
    ]
    view.secrets = [secret(ca_pem, cert_pem)]
    view.deployments = [
        deployment("stromboli-scheduler", args=["scheduler"]),
        deployment("stromboli-controller", args=["controller"]),
        deployment("stromboli-webhook", args=WEBHOOK_ARGS),
    ]
    view.namespaces = [namespace(NS), namespace("default"), namespace("kube-system")]
    view.service_accounts = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": f"stromboli-{c}"}}
        for c in ("scheduler", "controller", "webhook")
    ]
    view.access = dict.fromkeys(rbac.all_questions(view), True)
    return view

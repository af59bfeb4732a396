"""``stromboli doctor`` against a real API server: a healthy install (deploy/'s manifests, the
webhook's pods bound to kwok nodes and Ready behind their Service, its Secret and the
configurations it would register) reports no FAIL and exits 0; each breakage is named on its
own line and exits 1, and putting it back makes the report clean again."""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane, KubeAPIError
from stromboli.core.pki import CertificateAuthority
from stromboli.webhooks.registration import ClientTarget, webhook_configuration
from stromboli.webhooks.services import DEFAULT_ENABLED_ADMISSION, enabled_services
from stromboli.webhooks.tls import (
    SECRET_NAME,
    ServingCertificate,
    certificate_secret,
    self_signed,
    service_hosts,
)

from .conftest import own_control_plane
from .framework_crds import install_framework_crds

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
STROMBOLI = Path(sys.executable).with_name("stromboli")
NS = "volcano-system"
SERVICE = "volcano-admission-service"
CONFIGS = "/apis/admissionregistration.k8s.io/v1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SECRET = f"/api/v1/namespaces/{NS}/secrets/{SECRET_NAME}"
WEBHOOK_DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/stromboli-webhook"


def doctor(cp: ControlPlane, *extra: str) -> tuple[int, list[dict[str, str]]]:
    done = subprocess.run(
        [str(STROMBOLI), "doctor", "--kubeconfig", str(cp.kubeconfig_path), "-o", "json", *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout, done.stderr
    body = json.loads(done.stdout)
    assert body["exitCode"] == done.returncode
    return done.returncode, body["findings"]


def failing(findings: list[dict[str, str]], severity: str = "FAIL") -> list[str]:
    return [f"{f['check']}: {f['message']}" for f in findings if f["severity"] == severity]


def bind_pending(cp: ControlPlane, namespace: str, selector: str) -> None:
    nodes = [n["metadata"]["name"] for n in cp.client.get("/api/v1/nodes")["items"]]
    pods = cp.client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)["items"]
    for i, pod in enumerate(pods):
        if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        name = pod["metadata"]["name"]
        cp.client.post(
            f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % len(nodes)]},
            },
        )


def wait_webhook_ready(cp: ControlPlane, replicas: int = 2) -> None:
    """Bind the webhook's pods (no kube-scheduler here) until the Deployment is Ready."""
    deadline = time.monotonic() + 90
    selector = "app.kubernetes.io/component=webhook"
    while time.monotonic() < deadline:
        bind_pending(cp, NS, selector)
        status = cp.client.get(WEBHOOK_DEPLOYMENT).get("status") or {}
        slices = cp.client.get(
            f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
            labelSelector=f"kubernetes.io/service-name={SERVICE}",
        )["items"]
        ready = sum(
            len(ep.get("addresses") or [])
            for eps in slices
            for ep in eps.get("endpoints") or []
            if (ep.get("conditions") or {}).get("ready", True)
        )
        if (status.get("readyReplicas") or 0) >= replicas and ready >= replicas:
            return
        time.sleep(0.5)
    raise TimeoutError(f"stromboli-webhook not ready: {cp.client.get(WEBHOOK_DEPLOYMENT)!r:.1500}")


def put_secret(cp: ControlPlane, certificate: ServingCertificate) -> None:
    cp.client.delete(SECRET)
    cp.client.create(certificate_secret(SECRET_NAME, NS, certificate))


def register(cp: ControlPlane, ca_pem: bytes) -> list[str]:
    target = ClientTarget(namespace=NS, service_name=SERVICE)
    paths = []
    for service in enabled_services(DEFAULT_ENABLED_ADMISSION):
        configuration = webhook_configuration(service, target, ca_pem)
        cp.client.apply(configuration)
        plural = "mutating" if service.mutating else "validating"
        paths.append(f"{CONFIGS}/{plural}webhookconfigurations/{service.configuration_name}")
    return paths


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """This module's own control plane (it judges the whole cluster)."""
    yield from own_control_plane(tmp_path_factory)


@pytest.fixture(scope="module")
def install(control_plane: ControlPlane) -> Iterator[dict[str, Any]]:
    cp = control_plane
    cp.apply_manifests(DEPLOY / "namespace.yaml")
    cp.apply_manifests(build_crds())
    cp.apply_manifests(DEPLOY / "rbac.yaml")
    cp.apply_manifests(DEPLOY / "webhook.yaml")
    certificate = self_signed(service_hosts(SERVICE, NS))
    put_secret(cp, certificate)
    configurations = register(cp, certificate.ca_pem)
    wait_webhook_ready(cp)
    try:
        yield {"certificate": certificate, "configurations": configurations}
    finally:
        # The configurations send vcjobs and queues nowhere (failurePolicy Fail): never leave
        # them for the other tests of the session.
        for path in configurations:
            cp.client.delete(path)
        cp.client.delete(WEBHOOK_DEPLOYMENT)
        cp.client.delete(SECRET)


@pytest.fixture
def healthy(install: dict[str, Any], control_plane: ControlPlane) -> Iterator[dict[str, Any]]:
    """Each test breaks one thing; afterwards the install is healthy again (checked)."""
    yield install
    cp = control_plane
    cp.apply_manifests(build_crds())
    put_secret(cp, install["certificate"])
    register(cp, install["certificate"].ca_pem)
    cp.apply_manifests(DEPLOY / "webhook.yaml")
    wait_webhook_ready(cp)
    code, findings = doctor(cp)
    assert code == 0, failing(findings)


def test_a_healthy_install_reports_every_family_and_exits_0(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    code, findings = doctor(control_plane)
    assert code == 0, failing(findings)
    assert not failing(findings), failing(findings)
    assert {f["check"] for f in findings} == {
        "crds",
        "rbac",
        "webhook",
        "certificates",
        "operators",
        "enrolment",
    }
    oks = [f["message"] for f in findings if f["severity"] == "OK"]
    assert any("podgroups.scheduling.volcano.sh" in m for m in oks)
    assert any("stromboli-webhook (webhook) may do all" in m for m in oks)
    assert any(
        "volcano-admission-service-pods-mutate" in m and "2 ready endpoints" in m for m in oks
    )
    text = subprocess.run(
        [str(STROMBOLI), "doctor", "--kubeconfig", str(control_plane.kubeconfig_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert text.returncode == 0
    assert all(line.split()[0] in ("OK", "WARN") for line in text.stdout.splitlines())


def test_a_missing_crd_is_named(healthy: dict[str, Any], control_plane: ControlPlane) -> None:
    control_plane.client.delete(f"{CRDS}/hypernodes.topology.volcano.sh")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            control_plane.client.get(f"{CRDS}/hypernodes.topology.volcano.sh")
        except KubeAPIError as err:
            if err.status == 404:
                break
        time.sleep(0.2)
    code, findings = doctor(control_plane)
    assert code == 1
    assert failing(findings) == [
        "crds: CustomResourceDefinition hypernodes.topology.volcano.sh is missing"
    ]


def test_a_crd_whose_schema_drops_our_fields_is_named(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    crd = control_plane.client.get(f"{CRDS}/podgroups.scheduling.volcano.sh")
    weird = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"queue": {"type": "string"}}}},
    }
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": weird}
    control_plane.client.put(f"{CRDS}/podgroups.scheduling.volcano.sh", crd)
    code, findings = doctor(control_plane)
    assert code == 1
    [line] = failing(findings)
    assert line.startswith("crds: CustomResourceDefinition podgroups.scheduling.volcano.sh: ")
    assert "spec.minMember" in line and "drops those fields" in line


def test_a_webhook_service_without_endpoints_and_a_missing_service_are_named(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    cp = control_plane
    cp.client.patch(WEBHOOK_DEPLOYMENT, {"spec": {"replicas": 0}})
    cp.client.wait_for(
        WEBHOOK_DEPLOYMENT,
        lambda d: not (d.get("status") or {}).get("readyReplicas"),
        timeout=60,
    )
    deadline = time.monotonic() + 60
    while True:
        code, findings = doctor(cp)
        if any("no ready endpoints" in line for line in failing(findings)):
            break
        assert time.monotonic() < deadline, failing(findings)
        time.sleep(0.5)
    assert code == 1
    lines = failing(findings)
    assert "webhook: Deployment volcano-system/stromboli-webhook has no ready replica" in lines
    assert any(
        line.startswith(
            "webhook: MutatingWebhookConfiguration volcano-admission-service-pods-mutate "
            "webhooks[0] (mutatepod.volcano.sh) points at Service "
            "volcano-system/volcano-admission-service, which has no ready endpoints"
        )
        for line in lines
    ), lines
    cp.client.delete(f"/api/v1/namespaces/{NS}/services/{SERVICE}")
    code, findings = doctor(cp)
    assert code == 1
    assert any("which does not exist" in line for line in failing(findings))


def test_a_configuration_without_ca_bundle_is_named(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    path = f"{CONFIGS}/mutatingwebhookconfigurations/volcano-admission-service-pods-mutate"
    config = control_plane.client.get(path)
    for webhook in config["webhooks"]:
        webhook["clientConfig"].pop("caBundle")
    control_plane.client.put(path, config)
    code, findings = doctor(control_plane)
    assert code == 1
    [line] = failing(findings)
    assert line == (
        "webhook: MutatingWebhookConfiguration volcano-admission-service-pods-mutate "
        "webhooks[0] (mutatepod.volcano.sh) has no caBundle"
    )
    fix = next(f["fix"] for f in findings if f["severity"] == "FAIL")
    assert "rollout restart deployment/stromboli-webhook" in fix


def test_an_expiring_certificate_warns_and_another_ca_fails(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    soon = CertificateAuthority("soon-ca", validity=dt.timedelta(days=10))
    pair = soon.issue_serving(SERVICE, service_hosts(SERVICE, NS))
    put_secret(control_plane, ServingCertificate(pair.cert_pem, pair.key_pem, soon.cert_pem))
    code, findings = doctor(control_plane)
    warned = failing(findings, "WARN")
    assert any(
        line.startswith(
            f"certificates: serving certificate in Secret {NS}/{SECRET_NAME} expires in"
        )
        for line in warned
    ), warned
    # The configurations still hold the old CA: every one of them now fails.
    assert code == 1
    assert len(failing(findings)) == len(healthy["configurations"])
    assert all("no certificate of the caBundle signed" in line for line in failing(findings))
    register(control_plane, soon.cert_pem)
    code, findings = doctor(control_plane)
    assert code == 0, failing(findings)
    strict, _ = doctor(control_plane, "--strict")
    assert strict == 1


def test_a_certificate_that_does_not_parse_is_named(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    broken = copy.deepcopy(certificate_secret(SECRET_NAME, NS, healthy["certificate"]))
    broken["data"]["tls.crt"] = "bm90IGEgY2VydGlmaWNhdGU="  # "not a certificate"
    control_plane.client.delete(SECRET)
    control_plane.client.create(broken)
    code, findings = doctor(control_plane)
    assert code == 1
    assert any(
        line.startswith(f"certificates: Secret {NS}/{SECRET_NAME} data.tls.crt: not a PEM")
        for line in failing(findings)
    ), failing(findings)


def test_an_enrolled_namespace_without_the_pod_webhook_is_named(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    cp = control_plane
    cp.client.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "doctor-enrolled", "labels": {"stromboli.dev/enroll": "true"}},
        }
    )
    try:
        code, findings = doctor(cp)
        assert code == 0
        assert any(
            f["message"].startswith("namespace doctor-enrolled is enrolled; ")
            for f in findings
            if f["severity"] == "OK"
        )
        cp.client.delete(
            f"{CONFIGS}/mutatingwebhookconfigurations/volcano-admission-service-pods-mutate"
        )
        code, findings = doctor(cp)
        assert code == 1
        assert (
            "enrolment: namespace doctor-enrolled is enrolled but MutatingWebhookConfiguration "
            "volcano-admission-service-pods-mutate is missing: its pods get no scheduler, queue "
            "or PodGroup at admission"
        ) in failing(findings)
    finally:
        cp.client.delete("/api/v1/namespaces/doctor-enrolled")


def list_when_served(cp: ControlPlane, path: str) -> list[dict[str, Any]]:
    """The items at ``path``; a CRD just installed answers 429 while its storage starts."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return list(cp.client.get(path)["items"])
        except KubeAPIError as err:
            if err.status != 429 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def operator(name: str, image: str, args: list[str]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "doctor-operators"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": image, "args": args}]},
            },
        },
    }


def test_operator_deployments_with_and_without_their_volcano_flag(
    healthy: dict[str, Any], control_plane: ControlPlane
) -> None:
    cp = control_plane
    cp.client.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doctor-operators"}}
    )
    install_framework_crds(cp.client, [("kubeflow.org/v1", "PyTorchJob")])
    # The session's control plane is shared: PyTorchJobs other tests left in enrolled
    # namespaces would make the missing flag fine, so this test starts without any.
    # ...nor enrolled namespaces (an earlier check here enrols one): either makes it fine.
    for ns in cp.client.get("/api/v1/namespaces", labelSelector="stromboli.dev/enroll")["items"]:
        name = ns["metadata"]["name"]
        cp.client.patch(
            f"/api/v1/namespaces/{name}", {"metadata": {"labels": {"stromboli.dev/enroll": None}}}
        )
    for job in list_when_served(cp, "/apis/kubeflow.org/v1/pytorchjobs"):
        meta = job["metadata"]
        cp.client.delete(
            f"/apis/kubeflow.org/v1/namespaces/{meta['namespace']}/pytorchjobs/{meta['name']}"
        )
    try:
        cp.client.apply(
            operator(
                "kuberay-operator", "quay.io/kuberay/operator:v1.5.0", ["--batch-scheduler=volcano"]
            )
        )
        cp.client.apply(operator("training-operator", "kubeflow/training-operator:v1-855e096", []))
        code, findings = doctor(cp)
        assert code == 1
        oks = [f["message"] for f in findings if f["severity"] == "OK"]
        assert (
            "KubeRay operator Deployment doctor-operators/kuberay-operator runs in Volcano mode "
            "(--batch-scheduler=volcano)"
        ) in oks
        assert failing(findings) == [
            "operators: training-operator Deployment doctor-operators/training-operator: no "
            "--gang-scheduler-name=volcano, and no namespace is enrolled: its workloads get no "
            "PodGroups"
        ]
        fix = next(f["fix"] for f in findings if f["severity"] == "FAIL")
        assert fix.startswith("add --gang-scheduler-name=volcano to its args")
        # A PyTorchJob in an enrolled namespace: the missing flag is fine, and doctor says so.
        cp.client.patch(
            "/api/v1/namespaces/doctor-operators",
            {"metadata": {"labels": {"stromboli.dev/enroll": "true"}}},
        )
        cp.client.create(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "train", "namespace": "doctor-operators"},
                "spec": {"pytorchReplicaSpecs": {}},
            }
        )
        code, findings = doctor(cp)
        assert code == 0, failing(findings)
        assert any(
            "training-operator" in m and "(doctor-operators) are enrolled" in m
            for m in (f["message"] for f in findings if f["severity"] == "OK")
        )
    finally:
        # The Deployments go at once; the namespace's deletion may take a while on a busy
        # control plane, and the next check must not see them.
        for name in ("kuberay-operator", "training-operator"):
            cp.client.delete(f"/apis/apps/v1/namespaces/doctor-operators/deployments/{name}")
        cp.client.delete("/api/v1/namespaces/doctor-operators")

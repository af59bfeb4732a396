"""Enrolment at pod CREATE on a real API server, kube-controller-manager making the pods.

`stromboli webhook-manager` serves ``/pods/mutate`` at a URL on 127.0.0.1 as
deploy/webhook.yaml's ServiceAccount (so the RBAC for its owner cache is the one shipped),
with an ``--admission-conf`` resource group for one namespace. A Deployment in a namespace
labelled ``stromboli.dev/enroll: "true"`` gets its pods from the real ReplicaSet controller;
they are stored with our scheduler name, a queue, ``podgroup-<ReplicaSet uid>`` and the
Deployment's ``scheduling.volcano.sh/group-min-member`` (which the Deployment controller
copies onto the ReplicaSet). Pods of kube-system and of a namespace not enrolled are stored
exactly as sent; the resource group's namespace gets the group's node selector and is
enrolled too.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeAPIError, KubeHTTP
from stromboli.core.devcluster.controlplane import free_port

STROMBOLI = Path(sys.executable).with_name("stromboli")
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
WEBHOOK_USER = "system:serviceaccount:volcano-system:stromboli-webhook"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:volcano-system")
SUFFIX = uuid.uuid4().hex[:6]
ENROLLED, PLAIN, GROUPED = f"enrol-{SUFFIX}", f"plain-{SUFFIX}", f"grouped-{SUFFIX}"
CONFIGURATION = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
    "volcano-admission-service-pods-mutate"
)
GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
MIN = "scheduling.volcano.sh/group-min-member"
ADMISSION_CONF = f"""
resourceGroups:
- resourceGroup: batch-pool
  object:
    key: namespace
    value: [{GROUPED}]
  schedulerName: volcano
  labels:
    pool: batch
"""


def pod(namespace: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "enrol-", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def deployment(namespace: str, **annotations: str) -> dict:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace, "annotations": annotations},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


@dataclass
class Webhook:
    client: KubeHTTP
    process: subprocess.Popen
    log: Path


def _mutated(client: KubeHTTP) -> bool:
    created = client.post(f"/api/v1/namespaces/{ENROLLED}/pods", pod(ENROLLED), dryRun="All")
    return created["spec"].get("schedulerName") == "volcano"


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    control_plane.apply_manifests(DEPLOY / "namespace.yaml")
    control_plane.apply_manifests(DEPLOY / "webhook.yaml")
    for name, labels in ((ENROLLED, {"stromboli.dev/enroll": "true"}), (PLAIN, {}), (GROUPED, {})):
        client.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
        )
    for name in (ENROLLED, PLAIN, GROUPED, "kube-system"):
        try:  # pods need their namespace's default ServiceAccount; don't wait for a controller
            client.post(
                f"/api/v1/namespaces/{name}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            )
        except KubeAPIError as err:
            assert err.status == 409, err
    run_dir = tmp_path_factory.mktemp("enrol-live")
    conf = run_dir / "admission.yaml"
    conf.write_text(ADMISSION_CONF)
    kubeconfig = control_plane.write_kubeconfig(
        run_dir / "webhook.kubeconfig", user=WEBHOOK_USER, groups=SA_GROUPS
    )
    port = free_port()
    log = run_dir / "webhook-manager.log"
    process = subprocess.Popen(
        [
            str(STROMBOLI),
            "webhook-manager",
            f"--kubeconfig={kubeconfig}",
            "--listen-address=127.0.0.1",
            f"--port={port}",
            f"--webhook-url=https://127.0.0.1:{port}",
            "--enabled-admission=/pods/mutate",
            f"--admission-conf={conf}",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not _mutated(client):
            assert process.poll() is None, f"webhook-manager exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"never mutated:\n{log.read_text()}"
            time.sleep(0.2)
        yield Webhook(client, process, log)
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(30)
        client.delete(CONFIGURATION)
        for name in (ENROLLED, PLAIN, GROUPED):
            client.delete(f"/api/v1/namespaces/{name}")


def _pods_of(client: KubeHTTP, namespace: str, count: int) -> list[dict]:
    deadline = time.monotonic() + 60
    while True:
        pods = client.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="app=web")["items"]
        if len(pods) >= count:
            return pods
        assert time.monotonic() < deadline, f"the ReplicaSet made {len(pods)} pods of {count}"
        time.sleep(0.2)


def test_a_deployments_pods_are_enrolled_into_their_replicasets_group(webhook: Webhook) -> None:
    client = webhook.client
    client.post(
        f"/apis/apps/v1/namespaces/{ENROLLED}/deployments",
        deployment(ENROLLED, **{MIN: "2", QUEUE: "web-q"}),
    )
    pods = _pods_of(client, ENROLLED, 2)
    (rs,) = client.get(f"/apis/apps/v1/namespaces/{ENROLLED}/replicasets")["items"]
    assert rs["metadata"]["annotations"][MIN] == "2"  # copied by the Deployment controller
    for made in pods:
        assert made["spec"]["schedulerName"] == "volcano", webhook.log.read_text()
        annotations = made["metadata"]["annotations"]
        assert annotations[GROUP] == f"podgroup-{rs['metadata']['uid']}"
        assert annotations[QUEUE] == "web-q"
        assert annotations[MIN] == "2"


def test_a_bare_pod_gets_scheduler_and_queue_and_no_group(webhook: Webhook) -> None:
    created = webhook.client.post(f"/api/v1/namespaces/{ENROLLED}/pods", pod(ENROLLED))
    assert created["spec"]["schedulerName"] == "volcano"
    assert created["metadata"]["annotations"] == {QUEUE: "default"}


@pytest.mark.parametrize("namespace", [PLAIN, "kube-system"])
def test_pods_of_kube_system_and_of_namespaces_not_enrolled_are_untouched(
    webhook: Webhook, namespace: str
) -> None:
    created = webhook.client.post(
        f"/api/v1/namespaces/{namespace}/pods", pod(namespace), dryRun="All"
    )
    assert created["spec"]["schedulerName"] == "default-scheduler"
    assert not created["metadata"].get("annotations")
    assert "nodeSelector" not in created["spec"]


def test_a_resource_group_of_admission_conf_enrols_its_namespace(webhook: Webhook) -> None:
    client = webhook.client
    client.post(f"/apis/apps/v1/namespaces/{GROUPED}/deployments", deployment(GROUPED))
    (made,) = _pods_of(client, GROUPED, 2)[:1]
    assert made["spec"]["schedulerName"] == "volcano"
    assert made["spec"]["nodeSelector"] == {"pool": "batch"}
    assert made["metadata"]["annotations"][GROUP].startswith("podgroup-")

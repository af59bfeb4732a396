"""Which pods reach the webhook, and what happens when it is down, on a real API server.

`stromboli webhook-manager` registers its pod webhooks (and ``/queues/validate`` as a
``failurePolicy: Fail`` witness) at a URL on 127.0.0.1, running as deploy/webhook.yaml's
ServiceAccount. Pods of our scheduler and pods of enrolled namespaces are sent to it (its
request counters say so); other pods, and anything in kube-system, never are. Then the
server is stopped with the configurations left in place: every pod is still admitted
(``Ignore``), while a Queue is refused (``Fail``), which shows the server really is gone.
Pods are created with ``dryRun=All``: admission runs in full, nothing is stored.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
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
ENABLED = ("/pods/mutate", "/pods/validate", "/queues/validate")
REGISTRATION = "/apis/admissionregistration.k8s.io/v1"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
ENROLLED = "enrolled-" + uuid.uuid4().hex[:6]
PLAIN = "plain-" + uuid.uuid4().hex[:6]
BAD_JDB = {"volcano.sh/jdb-min-available": "-1"}


def configuration(path: str) -> str:
    kind = "mutating" if path.endswith("mutate") else "validating"
    return f"{REGISTRATION}/{kind}webhookconfigurations/volcano-admission-service" + path.replace(
        "/", "-"
    )


def pod(namespace: str, scheduler: str = "default-scheduler", **annotations: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "scope-",
            "namespace": namespace,
            "annotations": annotations,
        },
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]},
    }


def create_pod(client: KubeHTTP, body: dict) -> dict:
    return client.post(
        f"/api/v1/namespaces/{body['metadata']['namespace']}/pods", body, dryRun="All"
    )


def bad_queue() -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "scope-" + uuid.uuid4().hex[:6]},
        "spec": {"weight": 1, "capability": {"cpu": "1"}, "deserved": {"cpu": "2"}},
    }


@dataclass
class Webhook:
    client: KubeHTTP
    process: subprocess.Popen
    metrics_url: str
    log: Path

    def reviews(self, path: str) -> float:
        """Requests the server has answered for ``path``, all outcomes."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as answer:
            text = answer.read().decode()
        pattern = re.compile(
            r'^stromboli_webhook_requests_total\{outcome="\w+",path="' + re.escape(path)
            + r'"\} ([0-9.e+]+)$',
            re.M,
        )  # fmt: skip
        return sum(float(v) for v in pattern.findall(text))


def _queue_refused(client: KubeHTTP) -> str:
    try:
        client.post(QUEUES, bad_queue(), dryRun="All")
    except KubeAPIError as err:
        return str(err)
    return ""


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    control_plane.apply_manifests(DEPLOY / "namespace.yaml")
    control_plane.apply_manifests(DEPLOY / "webhook.yaml")
    for name, labels in ((ENROLLED, {"stromboli.dev/enroll": "true"}), (PLAIN, {})):
        client.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
        )
    for name in (ENROLLED, PLAIN, "kube-system", "volcano-system"):
        # Pods need their namespace's default ServiceAccount; don't wait for a controller.
        try:
            client.post(
                f"/api/v1/namespaces/{name}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            )
        except KubeAPIError as err:
            assert err.status == 409, err
    run_dir = tmp_path_factory.mktemp("webhook-scope")
    kubeconfig = control_plane.write_kubeconfig(
        run_dir / "webhook.kubeconfig", user=WEBHOOK_USER, groups=SA_GROUPS
    )
    port, health = free_port(), free_port()
    log = run_dir / "webhook-manager.log"
    process = subprocess.Popen(
        [
            str(STROMBOLI),
            "webhook-manager",
            f"--kubeconfig={kubeconfig}",
            "--listen-address=127.0.0.1",
            f"--port={port}",
            f"--webhook-url=https://127.0.0.1:{port}",
            "--enabled-admission=" + ",".join(ENABLED),
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{health}",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    server = Webhook(client, process, f"http://127.0.0.1:{health}/metrics", log)
    try:
        deadline = time.monotonic() + 30
        while "validatequeue.volcano.sh" not in _queue_refused(client):
            assert process.poll() is None, f"webhook-manager exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"never called:\n{log.read_text()}"
            time.sleep(0.2)
        yield server
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(30)
        for path in ENABLED:
            client.delete(configuration(path))
        for name in (ENROLLED, PLAIN):
            client.delete(f"/api/v1/namespaces/{name}")
        deadline = time.monotonic() + 30
        while _queue_refused(client) and time.monotonic() < deadline:
            time.sleep(0.2)  # until the API server has dropped the configurations


def test_pod_webhooks_are_scoped_and_ignore_failures(webhook: Webhook) -> None:
    for path in ("/pods/mutate", "/pods/validate"):
        hooks = webhook.client.get(configuration(path))["webhooks"]
        assert [h["name"].startswith("enrolled.") for h in hooks] == [False, True]
        for hook in hooks:
            assert hook["failurePolicy"] == "Ignore"
            exempt = hook["namespaceSelector"]["matchExpressions"][0]
            assert exempt["operator"] == "NotIn"
            assert "kube-system" in exempt["values"]
        assert "'volcano'" in hooks[0]["matchConditions"][0]["expression"]
    (queue_hook,) = webhook.client.get(configuration("/queues/validate"))["webhooks"]
    assert queue_hook["failurePolicy"] == "Fail"


def _wait_counted(webhook: Webhook, path: str, before: float) -> float:
    deadline = time.monotonic() + 10
    while (now := webhook.reviews(path)) <= before and time.monotonic() < deadline:
        time.sleep(0.1)
    return now


def test_pods_of_our_scheduler_are_reviewed_with_volcanos_messages(webhook: Webhook) -> None:
    with pytest.raises(KubeAPIError) as refused:
        create_pod(webhook.client, pod(PLAIN, "volcano", **BAD_JDB))
    assert 'admission webhook "validatepod.volcano.sh" denied the request' in str(refused.value)


def test_pods_of_enrolled_namespaces_are_reviewed(webhook: Webhook) -> None:
    before = webhook.reviews("/pods/validate")
    create_pod(webhook.client, pod(ENROLLED))
    assert _wait_counted(webhook, "/pods/validate", before) == before + 1


@pytest.mark.parametrize("namespace", [PLAIN, "kube-system", "volcano-system"])
def test_other_pods_never_reach_the_webhook(webhook: Webhook, namespace: str) -> None:
    before = {p: webhook.reviews(p) for p in ("/pods/mutate", "/pods/validate")}
    create_pod(webhook.client, pod(namespace, **BAD_JDB))
    if namespace != PLAIN:  # exempt even for our scheduler's pods
        create_pod(webhook.client, pod(namespace, "volcano", **BAD_JDB))
    # A reviewed pod that proves the counters move, so "unchanged" means something.
    create_pod(webhook.client, pod(ENROLLED))
    after = _wait_counted(webhook, "/pods/validate", before["/pods/validate"])
    assert after == before["/pods/validate"] + 1
    assert webhook.reviews("/pods/mutate") == before["/pods/mutate"] + 1


def test_with_the_webhook_down_pods_are_admitted_and_queues_refused(webhook: Webhook) -> None:
    """Runs last in this module: it stops the server."""
    webhook.process.terminate()
    assert webhook.process.wait(30) == 0, webhook.log.read_text()
    message = _queue_refused(webhook.client)
    assert "failed calling webhook" in message  # Fail: the server is really gone
    for body in (
        pod(PLAIN),
        pod(PLAIN, "volcano", **BAD_JDB),  # ours, unchecked while we are down
        pod(ENROLLED),
        pod("kube-system"),
    ):
        created = create_pod(webhook.client, body)
        assert created["metadata"]["namespace"] == body["metadata"]["namespace"]

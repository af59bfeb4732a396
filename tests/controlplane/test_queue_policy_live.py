"""The queue policy on a real API server: `stromboli webhook-manager --queue-policy FILE`
registered at a URL on 127.0.0.1 (as deploy/webhook.yaml's ServiceAccount) fills in a vcjob's
and a PodGroup's default queue, refuses a job over its queue's limits with the queue to use
instead, and enforces a new version of the file without a restart, while a broken version
leaves the last good one in force. Objects are created with ``dryRun=All``: admission runs in
full, nothing is stored."""

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
# The paths deploy/webhook.yaml's RBAC lets the server register (Volcano's default set).
ENABLED = ("/jobs/mutate", "/jobs/validate", "/podgroups/mutate")
REGISTRATION = "/apis/admissionregistration.k8s.io/v1"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
SUFFIX = uuid.uuid4().hex[:6]
TEAM = f"policy-team-{SUFFIX}"
OWN_QUEUE = f"policy-own-{SUFFIX}"
SPOT_QUEUE = f"policy-spot-{SUFFIX}"
POLICY = f"""
namespaces:
  {TEAM}: {{queues: [{OWN_QUEUE}, {SPOT_QUEUE}], defaultQueue: {OWN_QUEUE}}}
queues:
  {OWN_QUEUE}: {{maxPodsPerJob: 4}}
  {SPOT_QUEUE}: {{preemptableOnly: true}}
"""


def configuration(path: str) -> str:
    kind = "mutating" if path.endswith("mutate") else "validating"
    return f"{REGISTRATION}/{kind}webhookconfigurations/volcano-admission-service" + path.replace(
        "/", "-"
    )


def vcjob(replicas: int, preemptable: bool = False, **spec: object) -> dict:
    meta: dict = {"generateName": "policy-", "namespace": TEAM}
    if preemptable:
        meta["annotations"] = {"volcano.sh/preemptable": "true"}
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"tasks": [{"name": "w", "replicas": replicas, "template": template}], **spec},
    }


def create_job(client: KubeHTTP, body: dict) -> dict:
    return client.post(
        f"/apis/batch.volcano.sh/v1alpha1/namespaces/{TEAM}/jobs", body, dryRun="All"
    )


def refusal(client: KubeHTTP, body: dict) -> str:
    try:
        create_job(client, body)
    except KubeAPIError as err:
        return str(err)
    return ""


@dataclass
class Webhook:
    client: KubeHTTP
    policy: Path
    metrics_url: str
    log: Path

    def metric(self, name: str, **labels: str) -> float:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as answer:
            text = answer.read().decode()
        shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
        pattern = re.escape(name + (f"{{{shown}}}" if shown else "")) + r" ([0-9.e+]+)$"
        found = re.search(pattern, text, re.M)
        return float(found.group(1)) if found else 0.0


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    control_plane.apply_manifests(DEPLOY / "namespace.yaml")
    control_plane.apply_manifests(DEPLOY / "webhook.yaml")
    client.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}}
    )
    for name in (OWN_QUEUE, SPOT_QUEUE):
        queue = client.post(
            QUEUES,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1},
            },
        )
        queue["status"] = {"state": "Open"}
        client.put(f"{QUEUES}/{name}/status", queue)
    run_dir = tmp_path_factory.mktemp("queue-policy")
    policy = run_dir / "queue-policy.yaml"
    policy.write_text(POLICY)
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
            f"--queue-policy={policy}",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    server = Webhook(client, policy, f"http://127.0.0.1:{health}/metrics", log)
    try:
        deadline = time.monotonic() + 30
        while "queue policy" not in refusal(client, vcjob(6)):
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
        client.delete(f"/api/v1/namespaces/{TEAM}")
        for name in (OWN_QUEUE, SPOT_QUEUE):
            client.delete(f"{QUEUES}/{name}")


def test_a_job_without_a_queue_gets_the_namespace_default(webhook: Webhook) -> None:
    created = create_job(webhook.client, vcjob(2))
    assert created["spec"]["queue"] == OWN_QUEUE


def test_a_podgroup_without_a_queue_gets_the_namespace_default(webhook: Webhook) -> None:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": TEAM},
        "spec": {"minMember": 1},
    }
    created = webhook.client.post(
        f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{TEAM}/podgroups", body, dryRun="All"
    )
    assert created["spec"]["queue"] == OWN_QUEUE


def test_a_job_over_the_limit_is_refused_with_the_queue_to_use_instead(webhook: Webhook) -> None:
    message = refusal(webhook.client, vcjob(6, preemptable=True))
    assert (
        'admission webhook "validatejob.volcano.sh" denied the request: queue policy: ' in message
    )
    assert f'queue "{OWN_QUEUE}" takes at most 4 pods per job; this Job has 6' in message
    assert f'queues that namespace "{TEAM}" may use and that take this Job: {SPOT_QUEUE}' in message
    moved = create_job(webhook.client, vcjob(6, preemptable=True, queue=SPOT_QUEUE))
    assert moved["spec"]["queue"] == SPOT_QUEUE


def test_the_file_is_reloaded_and_a_broken_version_keeps_the_last_good(webhook: Webhook) -> None:
    webhook.policy.write_text(POLICY.replace("maxPodsPerJob: 4", "maxPodsPerJob: 8"))
    deadline = time.monotonic() + 60
    while refusal(webhook.client, vcjob(6)):
        assert time.monotonic() < deadline, f"not reloaded:\n{webhook.log.read_text()}"
        time.sleep(0.5)
    assert webhook.metric("stromboli_webhook_queue_policy_reloads_total", outcome="success") == 1

    webhook.policy.write_text("namespaces: [broken\n")
    deadline = time.monotonic() + 60
    while webhook.metric("stromboli_webhook_queue_policy_reloads_total", outcome="failure") < 1:
        assert time.monotonic() < deadline, f"change not seen:\n{webhook.log.read_text()}"
        time.sleep(0.5)
    assert webhook.metric("stromboli_webhook_queue_policy_stale") == 1
    assert refusal(webhook.client, vcjob(6)) == ""  # the version with 8 is still in force
    assert "queue policy not reloaded, the version loaded before stays" in webhook.log.read_text()

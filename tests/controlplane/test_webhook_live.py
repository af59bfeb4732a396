"""`stromboli webhook-manager` behind a real API server: it registers its webhook
configurations (URL on 127.0.0.1, generated CA) and the API server sends vcjobs and Queues
through it, so objects are stored defaulted and bad ones are refused with Volcano's messages.
It runs as deploy/webhook.yaml's ServiceAccount, so that file's RBAC is what it needs.

The configurations are removed afterwards: the control plane is shared by the session, and a
``failurePolicy: Fail`` webhook that no longer answers would block every later test.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
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
ENABLED = ("/jobs/mutate", "/jobs/validate", "/queues/mutate", "/queues/validate")
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
REGISTRATION = "/apis/admissionregistration.k8s.io/v1"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def configurations() -> dict[str, str]:
    """API path of each enabled service's configuration, by webhook path."""
    found = {}
    for path in ENABLED:
        kind = "mutating" if path.endswith("mutate") else "validating"
        name = "volcano-admission-service" + path.replace("/", "-")
        found[path] = f"{REGISTRATION}/{kind}webhookconfigurations/{name}"
    return found


def queue(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def vcjob(name: str, *task_names: str) -> dict:
    template = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "tasks": [{"name": task, "replicas": 1, "template": template} for task in task_names]
        },
    }


def _webhooks_answer(client: KubeHTTP) -> bool:
    """Whether dry runs show both mutation and validation (the CRD schema alone defaults a
    Queue's weight and a vcjob's queue, but never ``reclaimable`` or ``schedulerName``)."""
    try:
        probe = client.post(QUEUES, queue(unique("probe")), dryRun="All")
        job = client.post(JOBS, vcjob(unique("probe"), "t"), dryRun="All")
    except KubeAPIError:
        return False
    if probe["spec"].get("reclaimable") is not True or job["spec"].get("schedulerName") is None:
        return False
    try:
        bad = queue(unique("probe"), capability={"cpu": "1"}, deserved={"cpu": "2"})
        client.post(QUEUES, bad, dryRun="All")
    except KubeAPIError as err:
        return "validatequeue.volcano.sh" in str(err)
    return False


def wait_until_admitting(client: KubeHTTP, process: subprocess.Popen, log: Path) -> None:
    """Until the configurations exist and the API server's informers have picked them up."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, f"webhook-manager exited:\n{log.read_text()}"
        if _webhooks_answer(client):
            return
        time.sleep(0.2)
    pytest.fail(f"the API server never called the webhook:\n{log.read_text()}")


def wait_until_not_admitting(client: KubeHTTP) -> None:
    """Until the API server has dropped the configurations (its informers lag a little), so
    that no later test meets a webhook that is gone."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client.post(
                QUEUES,
                queue(unique("probe"), capability={"cpu": "1"}, deserved={"cpu": "2"}),
                dryRun="All",
            )
            return
        except KubeAPIError:
            time.sleep(0.2)
    pytest.fail("the API server kept calling the webhook after its configurations were deleted")


@pytest.fixture(scope="module")
def admitting(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    created_default = False
    try:
        client.get(f"{QUEUES}/default")
    except KubeAPIError:
        client.post(QUEUES, queue("default", weight=1, reclaimable=True))
        created_default = True
    # No controller runs here: open the default queue as Volcano's queue controller would.
    client.patch(f"{QUEUES}/default/status", {"status": {"state": "Open"}})
    # deploy/webhook.yaml's objects, and its ServiceAccount's identity: RBAC decides.
    control_plane.apply_manifests(DEPLOY / "namespace.yaml")
    control_plane.apply_manifests(DEPLOY / "webhook.yaml")
    run_dir = tmp_path_factory.mktemp("webhook")
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
            "--enabled-admission=" + ",".join(ENABLED),
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_admitting(client, process, log)
        yield client
    finally:
        for path in configurations().values():
            client.delete(path)
        wait_until_not_admitting(client)
        process.terminate()
        assert process.wait(30) == 0, log.read_text()
        if created_default:
            client.delete(f"{QUEUES}/default")


def test_configurations_point_at_the_url_with_the_generated_ca(admitting: KubeHTTP) -> None:
    for webhook_path, path in configurations().items():
        (webhook,) = admitting.get(path)["webhooks"]
        assert webhook["clientConfig"]["url"].startswith("https://127.0.0.1:")
        assert webhook["clientConfig"]["url"].endswith(webhook_path)
        assert webhook["clientConfig"]["caBundle"]
        assert webhook["failurePolicy"] == "Fail"


def test_vcjob_is_stored_with_volcano_defaults(admitting: KubeHTTP) -> None:
    name = unique("defaults")
    stored = admitting.post(JOBS, vcjob(name, "worker"))
    try:
        spec = stored["spec"]
        assert spec["queue"] == "default"
        assert spec["maxRetry"] == 3
        # Only the webhook sets these (the CRD schema defaults the two above as well):
        assert spec["schedulerName"] == "volcano"
        assert spec["minAvailable"] == 1
        assert spec["tasks"][0]["minAvailable"] == 1
        assert spec["tasks"][0]["maxRetry"] == 3
    finally:
        admitting.delete(f"{JOBS}/{name}")


def test_vcjob_with_duplicate_task_names_is_refused(admitting: KubeHTTP) -> None:
    with pytest.raises(KubeAPIError) as refused:
        admitting.post(JOBS, vcjob(unique("dup"), "worker", "worker"))
    assert refused.value.status == 400
    assert refused.value.status_obj["message"] == (
        'admission webhook "validatejob.volcano.sh" denied the request: duplicated task name worker'
    )


def test_queue_is_stored_with_weight_and_reclaimable(admitting: KubeHTTP) -> None:
    name = unique("q")
    stored = admitting.post(QUEUES, queue(name))
    try:
        assert stored["spec"]["weight"] == 1
        assert stored["spec"]["reclaimable"] is True
    finally:
        admitting.delete(f"{QUEUES}/{name}")


def test_queue_with_capability_below_deserved_is_refused(admitting: KubeHTTP) -> None:
    bad = queue(unique("q"), capability={"cpu": "1"}, deserved={"cpu": "2"})
    with pytest.raises(KubeAPIError) as refused:
        admitting.post(QUEUES, bad)
    assert refused.value.status_obj["message"] == (
        'admission webhook "validatequeue.volcano.sh" denied the request: '
        'requestBody.spec.deserved.cpu: Invalid value: "2": '
        "deserved[cpu]=2 must be <= capability[cpu]=1"
    )


def test_default_queue_cannot_be_deleted(admitting: KubeHTTP) -> None:
    with pytest.raises(KubeAPIError) as refused:
        admitting.delete(f"{QUEUES}/default")
    assert "`default` queue can not be deleted" in refused.value.status_obj["message"]

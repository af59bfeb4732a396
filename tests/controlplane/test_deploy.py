"""deploy/ on a real API server: the generated CRDs become Established, the RBAC objects are
accepted, the Deployments pass the server's strict validation, and the scheduler's identity
(a client certificate for its ServiceAccount's user name, so RBAC decides everything) can do
what `stromboli scheduler` does and nothing it must not. The last test runs the scheduler
itself under that identity, with the Deployment's flags and ConfigMap, and watches it place a
gang.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from stromboli.core.devcluster import ControlPlane, KubeAPIError, KubeHTTP, free_port

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "volcano-system"
SCHEDULER_USER = f"system:serviceaccount:{NAMESPACE}:stromboli-scheduler"
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:stromboli-controller"
SA_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}")
STROMBOLI = Path(sys.executable).with_name("stromboli")
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


def load(name: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> ControlPlane:
    """namespace.yaml, crds/ and rbac.yaml applied in the documented order."""
    cp = control_plane
    cp.apply_manifests(DEPLOY / "namespace.yaml")
    cp.apply_manifests(DEPLOY / "crds")
    cp.apply_manifests(DEPLOY / "rbac.yaml")
    return cp


def identity(cp: ControlPlane, user: str, tmp_path: Path) -> KubeHTTP:
    assert cp.ca is not None and cp.server_url is not None and cp.ca_path is not None
    name = user.rsplit(":", 1)[-1]
    keys = cp.ca.issue_client(user, SA_GROUPS).write(tmp_path, name)
    assert keys.cert_path is not None and keys.key_path is not None
    return KubeHTTP(
        cp.server_url, ca_file=cp.ca_path, cert_file=keys.cert_path, key_file=keys.key_path
    )


@pytest.fixture
def scheduler_sa(installed: ControlPlane, tmp_path: Path) -> Iterator[KubeHTTP]:
    client = identity(installed, SCHEDULER_USER, tmp_path)
    yield client
    client.close()


@pytest.fixture
def namespace(installed: ControlPlane) -> str:
    name = f"deploy-{uuid.uuid4().hex[:8]}"
    installed.client.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def forbidden(call, *args, **kwargs) -> bool:  # type: ignore[no-untyped-def]
    try:
        call(*args, **kwargs)
    except KubeAPIError as err:
        if err.status == 403:
            return True
        raise
    return False


def can(cp: ControlPlane, user: str, verb: str, resource: str, **attrs: str) -> bool:
    """What the authorizer answers for ``user`` (a SubjectAccessReview, asked as admin)."""
    head, _, tail = resource.partition("/")
    # "group/plural[/sub]" when the first part is an API group (dotted), else "plural[/sub]".
    group, rest = (head, tail) if "." in head else ("", resource)
    plural, _, subresource = rest.partition("/")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": [*SA_GROUPS, "system:authenticated"],
            "resourceAttributes": {
                "group": group,
                "resource": plural,
                "subresource": subresource,
                "verb": verb,
                **attrs,
            },
        },
    }
    answer = cp.client.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


def nobody_pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "stromboli-test-nobody",
            "containers": [{"name": "main", "image": "registry.invalid/sleep:1"}],
        },
    }


# --- what was applied ----------------------------------------------------------------------------


def test_generated_crds_are_established_and_served(installed: ControlPlane) -> None:
    for path in sorted((DEPLOY / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        stored = installed.client.wait_crd_established(crd["metadata"]["name"])
        assert stored["spec"]["names"]["kind"] == crd["spec"]["names"]["kind"]
        version = crd["spec"]["versions"][0]["name"]
        served = installed.client.get(f"/apis/{crd['spec']['group']}/{version}")
        plurals = {r["name"] for r in served["resources"]}
        assert crd["spec"]["names"]["plural"] in plurals


def test_rbac_objects_are_stored_as_written(installed: ControlPlane) -> None:
    for obj in load("rbac.yaml"):
        stored = installed.client.get(installed.client.path_for(obj))
        assert stored["metadata"]["labels"] == obj["metadata"]["labels"]
        for field in ("rules", "roleRef", "subjects"):
            assert stored.get(field) == obj.get(field), f"{obj['kind']} {field}"


def test_deployments_pass_strict_server_side_validation(installed: ControlPlane) -> None:
    """Server-side apply, dry run, with unknown or duplicate fields rejected."""
    for name in ("scheduler.yaml", "controller.yaml"):
        for obj in load(name):
            installed.client.patch(
                installed.client.path_for(obj),
                json.dumps(obj).encode(),
                patch_type="apply",
                fieldManager="stromboli-deploy-test",
                dryRun="All",
                fieldValidation="Strict",
            )


# --- the scheduler's identity: allowed ---------------------------------------------------------


def test_scheduler_can_bind_delete_and_write_pod_status(
    installed: ControlPlane, scheduler_sa: KubeHTTP, namespace: str
) -> None:
    admin = installed.client
    admin.post(f"/api/v1/namespaces/{namespace}/pods", nobody_pod("p0"))
    pods = scheduler_sa.get("/api/v1/pods")
    assert any(p["metadata"]["name"] == "p0" for p in pods["items"])
    nodes = scheduler_sa.get("/api/v1/nodes")["items"]
    assert nodes

    pod = scheduler_sa.get(f"/api/v1/namespaces/{namespace}/pods/p0")
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "probe"}
    ]
    scheduler_sa.put(f"/api/v1/namespaces/{namespace}/pods/p0/status", pod)

    node = nodes[0]["metadata"]["name"]
    scheduler_sa.post(
        f"/api/v1/namespaces/{namespace}/pods/p0/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "p0", "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )
    assert admin.get(f"/api/v1/namespaces/{namespace}/pods/p0")["spec"]["nodeName"] == node

    admin.post(f"/api/v1/namespaces/{namespace}/pods", nobody_pod("p2"))
    scheduler_sa.delete(f"/api/v1/namespaces/{namespace}/pods/p2", missing_ok=False)

    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "p0.probe", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": "p0", "namespace": namespace},
        "reason": "Scheduled",
        "message": "probe",
        "type": "Normal",
        "source": {"component": "volcano"},
    }
    scheduler_sa.post(f"/api/v1/namespaces/{namespace}/events", event)
    # a repeat is one PATCH of its count, as client-go's recorder does
    repeated = scheduler_sa.patch(f"/api/v1/namespaces/{namespace}/events/p0.probe", {"count": 2})
    assert repeated["count"] == 2


def test_scheduler_can_create_queues_and_write_queue_and_podgroup_status(
    installed: ControlPlane, scheduler_sa: KubeHTTP, namespace: str
) -> None:
    name = f"rbac-probe-{uuid.uuid4().hex[:6]}"
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
    }
    try:
        created = scheduler_sa.post(QUEUES, queue)
        created["status"] = {"state": "Open", "allocated": {"cpu": "1"}}
        updated = scheduler_sa.put(f"{QUEUES}/{name}/status", created)
        assert updated["status"]["allocated"] == {"cpu": "1"}
        # ... but not its spec: queues are the user's and the controller's.
        updated["spec"]["weight"] = 5
        assert forbidden(scheduler_sa.put, f"{QUEUES}/{name}", updated)
    finally:
        installed.client.delete(f"{QUEUES}/{name}")

    groups = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"
    installed.client.post(
        groups,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
            "spec": {"minMember": 1},
        },
    )
    pg = scheduler_sa.get(f"{groups}/pg")
    pg["status"] = {"phase": "Inqueue"}
    assert scheduler_sa.put(f"{groups}/pg", pg)["status"]["phase"] == "Inqueue"


def test_scheduler_reads_what_its_cache_watches(scheduler_sa: KubeHTTP) -> None:
    for path in (
        "/api/v1/resourcequotas",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "/apis/policy/v1/poddisruptionbudgets",
        "/apis/topology.volcano.sh/v1alpha1/hypernodes",
        "/apis/scheduling.volcano.sh/v1beta1/podgroups",
        QUEUES,
    ):
        assert "items" in scheduler_sa.get(path, limit=1), path


def test_scheduler_lease_rights_are_its_own_lease_only(installed: ControlPlane) -> None:
    leases = "coordination.k8s.io/leases"
    assert can(installed, SCHEDULER_USER, "create", leases, namespace=NAMESPACE)
    for verb in ("get", "update"):
        assert can(
            installed, SCHEDULER_USER, verb, leases, namespace=NAMESPACE, name="vc-scheduler"
        )
        assert not can(
            installed, SCHEDULER_USER, verb, leases, namespace=NAMESPACE, name="kube-scheduler"
        )
    assert not can(installed, SCHEDULER_USER, "create", leases, namespace="kube-system")
    assert not can(
        installed, SCHEDULER_USER, "get", leases, namespace="default", name="vc-scheduler"
    )


# --- the scheduler's identity: denied ----------------------------------------------------------


def test_scheduler_cannot_touch_nodes_secrets_or_create_pods(
    installed: ControlPlane, scheduler_sa: KubeHTTP, namespace: str
) -> None:
    node = installed.client.get("/api/v1/nodes")["items"][0]["metadata"]["name"]
    assert forbidden(scheduler_sa.delete, f"/api/v1/nodes/{node}", missing_ok=False)
    assert forbidden(scheduler_sa.patch, f"/api/v1/nodes/{node}", {"metadata": {"labels": {}}})
    assert forbidden(scheduler_sa.get, "/api/v1/secrets")
    assert forbidden(scheduler_sa.get, f"/api/v1/namespaces/{namespace}/secrets/anything")
    assert forbidden(scheduler_sa.get, f"/api/v1/namespaces/{namespace}/configmaps")
    assert forbidden(scheduler_sa.post, f"/api/v1/namespaces/{namespace}/pods", nobody_pod("x"))
    assert node  # and the node is still there
    installed.client.get(f"/api/v1/nodes/{node}")
    for verb, resource in (
        ("delete", "scheduling.volcano.sh/podgroups"),
        ("create", "scheduling.volcano.sh/podgroups"),
        ("delete", "scheduling.volcano.sh/queues"),
        ("create", "batch.volcano.sh/jobs"),
        ("update", "nodes/status"),
        ("create", "rbac.authorization.k8s.io/clusterrolebindings"),
    ):
        assert not can(installed, SCHEDULER_USER, verb, resource), f"{verb} {resource}"


def test_controller_identity_matches_its_duties(installed: ControlPlane) -> None:
    allowed = [
        ("create", "pods"),
        ("delete", "pods"),
        ("create", "scheduling.volcano.sh/podgroups"),
        ("update", "batch.volcano.sh/jobs/status"),
        ("delete", "bus.volcano.sh/commands"),
        ("create", "services"),
        ("create", "configmaps"),
        ("create", "secrets"),
        ("create", "persistentvolumeclaims"),
        ("create", "networking.k8s.io/networkpolicies"),
        ("create", "batch.volcano.sh/jobs"),
        ("update", "flow.volcano.sh/jobflows/status"),
        ("update", "scheduling.volcano.sh/queues/status"),
        ("create", "events"),
    ]
    for verb, resource in allowed:
        assert can(installed, CONTROLLER_USER, verb, resource), f"{verb} {resource}"
    denied = [
        ("create", "pods/binding"),  # placing pods is the scheduler's job
        ("delete", "nodes"),
        ("update", "nodes"),
        ("create", "rbac.authorization.k8s.io/clusterroles"),
        ("create", "scheduling.volcano.sh/queues"),
        ("delete", "apiextensions.k8s.io/customresourcedefinitions"),
    ]
    for verb, resource in denied:
        assert not can(installed, CONTROLLER_USER, verb, resource), f"{verb} {resource}"


# --- the scheduler itself, as deployed --------------------------------------------------------


def deployment_args(name: str) -> list[str]:
    for obj in load(name):
        if obj["kind"] == "Deployment":
            return list(obj["spec"]["template"]["spec"]["containers"][0]["args"])
    raise AssertionError(f"no Deployment in {name}")


def scheduler_conf() -> str:
    for obj in load("scheduler.yaml"):
        if obj["kind"] == "ConfigMap":
            return obj["data"]["volcano-scheduler.conf"]
    raise AssertionError("no ConfigMap in scheduler.yaml")


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except OSError as err:
        return 0, str(err)


def test_deployed_scheduler_places_a_gang_under_its_service_account(
    installed: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """`stromboli scheduler` with the Deployment's flags, the ConfigMap's configuration and the
    ServiceAccount's rights alone: healthz answers, it holds the Lease, binds a gang."""
    cp = installed
    kubeconfig = cp.write_kubeconfig(
        tmp_path / "scheduler.kubeconfig", user=SCHEDULER_USER, groups=SA_GROUPS
    )
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(scheduler_conf())
    scheduler_name = f"deploy-{uuid.uuid4().hex[:6]}"  # touch no other test's pods
    metrics, healthz = free_port(), free_port()
    overrides = {
        "--scheduler-conf": str(conf),
        "--scheduler-name": scheduler_name,
        "--listen-address": f"127.0.0.1:{metrics}",
        "--healthz-address": f"127.0.0.1:{healthz}",
        "--schedule-period": "200ms",
    }
    args = []
    for arg in deployment_args("scheduler.yaml"):
        flag = arg.partition("=")[0]
        args.append(f"{flag}={overrides[flag]}" if flag in overrides else arg)
    assert args[0] == "scheduler" and "--leader-elect=true" in args
    log = tmp_path / "scheduler.log"
    process = subprocess.Popen(
        [str(STROMBOLI), *args, f"--kubeconfig={kubeconfig}"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        groups = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"
        cp.client.post(
            groups,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "gang"},
                "spec": {"minMember": 2, "queue": "default"},
            },
        )
        for i in range(2):
            pod = nobody_pod(f"gang-{i}")
            pod["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "gang"}
            pod["spec"]["schedulerName"] = scheduler_name
            pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
            cp.client.post(f"/api/v1/namespaces/{namespace}/pods", pod)

        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"scheduler exited:\n{log.read_text()[-3000:]}"
            pods = cp.client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
            if all(p["spec"].get("nodeName") for p in pods):
                break
            assert time.monotonic() < deadline, f"gang not bound:\n{log.read_text()[-3000:]}"
            time.sleep(0.3)

        status, body = http_get(f"http://127.0.0.1:{healthz}/healthz")
        assert status == 200, body
        status, body = http_get(f"http://127.0.0.1:{metrics}/metrics")
        assert status == 200 and "volcano_" in body
        lease = cp.client.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/vc-scheduler"
        )
        assert lease["spec"]["holderIdentity"]
        # The PodGroup's status is written back (an update of the whole object).
        cp.client.wait_for(
            f"{groups}/gang",
            lambda pg: (pg.get("status") or {}).get("phase") in ("Inqueue", "Running"),
            timeout=30,
            what=f"the gang's status; scheduler log:\n{log.read_text()[-3000:]}",
        )
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    text = log.read_text()
    assert "forbidden" not in text.lower(), f"RBAC refused the scheduler something:\n{text[-3000:]}"

"""kube-controller-manager in the test control plane: the cluster behaves like a real one.

Garbage collection through ownerReferences (background, foreground, orphan), the workload
controllers (Deployment -> ReplicaSet -> pods that kwok runs, StatefulSet, batch Job),
namespace deletion, and the service-account machinery (``default`` SA, ``kube-root-ca.crt``,
token Secrets that authenticate). Pods name their kwok node in ``spec.nodeName``: no scheduler
runs in the shared fixture.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid
from base64 import b64decode
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import SUCCEED_AFTER_ANNOTATION, ControlPlane, KubeAPIError

NODE = "kwok-node-0"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
TIMEOUT = 90.0


@pytest.fixture
def ns(control_plane: ControlPlane) -> str:
    name = f"kcm-{uuid.uuid4().hex[:8]}"
    control_plane.client.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> ControlPlane:
    control_plane.apply_manifests(build_crds())
    return control_plane


def container() -> dict[str, Any]:
    return {"name": "main", "image": "registry.invalid/sleep:1"}


def pod_template(labels: dict[str, str], **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels, "annotations": annotations},
        "spec": {"nodeName": NODE, "containers": [container()]},
    }


def owner_ref(owner: dict[str, Any], *, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def vcjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 1,
            "tasks": [{"name": "worker", "replicas": 2, "template": pod_template({})}],
        },
    }


def owned_pod(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "ownerReferences": [owner_ref(owner)]},
        "spec": {"nodeName": NODE, "containers": [container()]},
    }


def owned_podgroup(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "ownerReferences": [owner_ref(owner)]},
        "spec": {"minMember": 2},
    }


def names(cp: ControlPlane, path: str, **params: str) -> set[str]:
    return {o["metadata"]["name"] for o in cp.client.get(path, **params)["items"]}


def missing(cp: ControlPlane, path: str) -> bool:
    try:
        cp.client.get(path)
    except KubeAPIError as err:
        if err.status == 404:
            return True
        raise
    return False


def a_job_with_pods_and_podgroup(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    """A vcjob and, as the Volcano controller makes them, its pods and PodGroup owned by it;
    the pods run on kwok. No vcjob controller runs here: only the garbage collector acts."""
    job = cp.client.post(JOBS.format(ns=ns), vcjob(name))
    for i in range(2):
        cp.client.post(f"/api/v1/namespaces/{ns}/pods", owned_pod(f"{name}-worker-{i}", job))
    cp.client.post(PODGROUPS.format(ns=ns), owned_podgroup(f"{name}-pg", job))
    cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/pods",
        lambda lst: [p["status"].get("phase") for p in lst["items"]] == ["Running"] * 2,
        timeout=TIMEOUT,
        what=f"the pods of {name} Running",
    )
    return job


def test_deleting_a_vcjob_collects_its_pods_and_podgroup(crds: ControlPlane, ns: str) -> None:
    cp = crds
    a_job_with_pods_and_podgroup(cp, ns, "gc")
    cp.client.delete(f"{JOBS.format(ns=ns)}/gc")
    cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/pods",
        lambda lst: not lst["items"],
        timeout=TIMEOUT,
        what="the garbage collector to delete the pods of vcjob gc",
    )
    cp.client.wait_for(
        PODGROUPS.format(ns=ns),
        lambda lst: not lst["items"],
        timeout=TIMEOUT,
        what="the garbage collector to delete the PodGroup of vcjob gc",
    )


def test_foreground_deletion_waits_for_the_dependents_then_finishes(
    crds: ControlPlane, ns: str
) -> None:
    cp = crds
    a_job_with_pods_and_podgroup(cp, ns, "fg")
    cp.client.delete(f"{JOBS.format(ns=ns)}/fg", propagationPolicy="Foreground")
    cp.client.wait_for(
        f"{JOBS.format(ns=ns)}",
        lambda lst: not lst["items"],
        timeout=TIMEOUT,
        what="vcjob fg to go once its dependents are gone",
    )
    # The owner goes last: nothing it blocked on may remain.
    assert names(cp, f"/api/v1/namespaces/{ns}/pods") == set()
    assert names(cp, PODGROUPS.format(ns=ns)) == set()


def test_orphan_deletion_leaves_the_dependents_without_their_owner(
    crds: ControlPlane, ns: str
) -> None:
    cp = crds
    a_job_with_pods_and_podgroup(cp, ns, "orphan")
    cp.client.delete(f"{JOBS.format(ns=ns)}/orphan", propagationPolicy="Orphan")
    cp.client.wait_for(
        f"{JOBS.format(ns=ns)}",
        lambda lst: not lst["items"],
        timeout=TIMEOUT,
        what="vcjob orphan to go, orphaning its dependents",
    )
    pods = cp.client.get(f"/api/v1/namespaces/{ns}/pods")["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["orphan-worker-0", "orphan-worker-1"]
    assert all(not p["metadata"].get("ownerReferences") for p in pods)


def test_deployment_makes_a_replicaset_whose_pods_kwok_runs(
    control_plane: ControlPlane, ns: str
) -> None:
    cp = control_plane
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": pod_template(labels),
        },
    }
    created = cp.client.post(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment)
    cp.client.wait_for(
        f"/apis/apps/v1/namespaces/{ns}/deployments/web",
        lambda d: (d.get("status") or {}).get("availableReplicas") == 3,
        timeout=TIMEOUT,
        what="deployment web to have 3 available replicas",
    )
    (rs,) = cp.client.get(f"/apis/apps/v1/namespaces/{ns}/replicasets")["items"]
    assert rs["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    pods = cp.client.get(f"/api/v1/namespaces/{ns}/pods")["items"]
    assert len(pods) == 3
    assert {p["metadata"]["ownerReferences"][0]["uid"] for p in pods} == {rs["metadata"]["uid"]}
    assert {p["status"]["phase"] for p in pods} == {"Running"}

    cp.client.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/web", {"spec": {"replicas": 1}})
    cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/pods",
        lambda lst: len(lst["items"]) == 1,
        timeout=TIMEOUT,
        what="deployment web scaled down to 1 pod",
    )
    cp.client.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/pods",
        lambda lst: not lst["items"],
        timeout=TIMEOUT,
        what="the pods of deployment web collected with it",
    )
    assert names(cp, f"/apis/apps/v1/namespaces/{ns}/replicasets") == set()


def test_statefulset_makes_its_ordinal_pods(control_plane: ControlPlane, ns: str) -> None:
    cp = control_plane
    labels = {"app": "db"}
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": labels},
            "template": pod_template(labels),
        },
    }
    cp.client.post(f"/apis/apps/v1/namespaces/{ns}/statefulsets", statefulset)
    cp.client.wait_for(
        f"/apis/apps/v1/namespaces/{ns}/statefulsets/db",
        lambda s: (s.get("status") or {}).get("readyReplicas") == 2,
        timeout=TIMEOUT,
        what="statefulset db to have 2 ready replicas",
    )
    assert names(cp, f"/api/v1/namespaces/{ns}/pods") == {"db-0", "db-1"}


def test_batch_job_completes_when_its_pod_succeeds(control_plane: ControlPlane, ns: str) -> None:
    cp = control_plane
    template = pod_template({}, **{SUCCEED_AFTER_ANNOTATION: "500ms"})
    template["spec"]["restartPolicy"] = "Never"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {"template": template},
    }
    cp.client.post(f"/apis/batch/v1/namespaces/{ns}/jobs", job)
    done = cp.client.wait_for(
        f"/apis/batch/v1/namespaces/{ns}/jobs/once",
        lambda j: any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (j.get("status") or {}).get("conditions") or []
        ),
        timeout=TIMEOUT,
        what="batch job once to complete",
    )
    assert done["status"]["succeeded"] == 1


def test_namespace_deletion_finishes(crds: ControlPlane, ns: str) -> None:
    cp = crds
    cp.client.post(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}},
    )
    a_job_with_pods_and_podgroup(cp, ns, "in-ns")
    cp.client.delete(f"/api/v1/namespaces/{ns}")
    cp.client.wait_for(
        "/api/v1/namespaces",
        lambda lst: ns not in {n["metadata"]["name"] for n in lst["items"]},
        timeout=TIMEOUT,
        what=f"namespace {ns} to be deleted with its pods, vcjob and PodGroup",
    )


def test_service_accounts_get_the_root_ca_and_working_tokens(
    control_plane: ControlPlane, ns: str
) -> None:
    cp = control_plane
    assert cp.ca is not None and cp.ca_path is not None and cp.server_url is not None
    cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/serviceaccounts/default",
        lambda sa: True,
        timeout=TIMEOUT,
        what=f"the serviceaccount controller to make {ns}/default",
    )
    root_ca = cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt",
        lambda cm: True,
        timeout=TIMEOUT,
        what=f"the root CA publisher to make {ns}/kube-root-ca.crt",
    )
    assert root_ca["data"]["ca.crt"].strip() == cp.ca.cert_pem.decode().strip()

    cp.client.post(
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}},
    )
    cp.client.post(
        f"/api/v1/namespaces/{ns}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": "robot-token",
                "annotations": {"kubernetes.io/service-account.name": "robot"},
            },
        },
    )
    secret = cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/secrets/robot-token",
        lambda s: "token" in (s.get("data") or {}),
        timeout=TIMEOUT,
        what="the token controller to fill secret robot-token",
    )
    assert b64decode(secret["data"]["namespace"]).decode() == ns
    assert b64decode(secret["data"]["ca.crt"]).strip() == cp.ca.cert_pem.strip()

    token = b64decode(secret["data"]["token"]).decode()
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    request = urllib.request.Request(
        f"{cp.server_url}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        data=json.dumps(review).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    context = ssl.create_default_context(cafile=str(cp.ca_path))
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        who = json.loads(answer.read())["status"]["userInfo"]
    assert who["username"] == f"system:serviceaccount:{ns}:robot"


def test_controllers_run_under_their_own_service_accounts(control_plane: ControlPlane) -> None:
    accounts = names(control_plane, "/api/v1/namespaces/kube-system/serviceaccounts")
    assert {"generic-garbage-collector", "namespace-controller", "deployment-controller"} <= (
        accounts
    )

"""Least privilege, proven on a real API server: deploy/rbac.yaml (and the webhook's identity
from deploy/webhook.yaml) applied, then each ServiceAccount's user asked about and acting.

Three kinds of proof:

* the authorizer's answers (SubjectAccessReviews asked as admin) over a grid of verbs and
  resources, compared with the exact set each process calls: a rule added without a caller,
  or a caller without a rule, fails;
* requests sent as the identity itself (a client certificate for the ServiceAccount's user
  name and groups, so RBAC and admission see exactly what they would see from the pod),
  which also exercise the ValidatingAdmissionPolicy that confines the controller to objects
  of vcjobs (RBAC cannot scope by owner or label; the policy can);
* ``stromboli scheduler`` and ``stromboli controller`` run under their identities through a
  vcjob with the svc, ssh and env plugins, a scale, a Command, an enrolled plain pod and a
  TTL deletion, and their logs must show no refusal.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stromboli.core.devcluster import ControlPlane, KubeAPIError, KubeHTTP
from stromboli.integrations.kinds import CONVERTED, FRAMEWORK_KINDS
from stromboli.webhooks.services import enabled_services
from tests.controlplane.conftest import own_control_plane
from tests.controlplane.jobs_live import task, vcjob

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "volcano-system"
SA_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}")
STROMBOLI = Path(sys.executable).with_name("stromboli")
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def sa_user(name: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{name}"


SCHEDULER = sa_user("stromboli-scheduler")
CONTROLLER = sa_user("stromboli-controller")
WEBHOOK = sa_user("stromboli-webhook")

# --- what each process calls (keep in step with the code; see deploy/rbac.yaml) ---------------

Grant = tuple[str, str]  # (verb, "group/resource[/subresource]"; core resources bare)
R, W = ("list", "watch"), ("get", "list", "watch")


def grants(resource: str, *verbs: str) -> set[Grant]:
    return {(verb, resource) for verb in verbs}


#: The framework objects the adapters follow (integrations/kinds.py), and those that own
#: PodGroups.
FRAMEWORK_RESOURCES = tuple(dict.fromkeys(f"{i.group}/{i.plural}" for i in FRAMEWORK_KINDS))
CONVERTED_RESOURCES = tuple(dict.fromkeys(f"{i.group}/{i.plural}" for i in CONVERTED))
FRAMEWORK_OWNERS = tuple(
    r for r in CONVERTED_RESOURCES if not r.endswith(("/rayservices", "/leaderworkersets"))
)

SCHEDULER_CALLS: set[Grant] = (
    grants("pods", *W, "delete")
    | grants("pods/binding", "create")
    | grants("pods/status", "update")
    | grants("nodes", *R)
    | grants("resourcequotas", *R)
    | grants("events", "create", "patch")
    | grants("scheduling.volcano.sh/podgroups", *W, "update")
    | grants("scheduling.volcano.sh/queues", *W, "create")
    | grants("scheduling.volcano.sh/queues/status", "update")
    | grants("scheduling.k8s.io/priorityclasses", *R)
    | grants("policy/poddisruptionbudgets", *R)
    | grants("topology.volcano.sh/hypernodes", *R)
)
CONTROLLER_CALLS: set[Grant] = (
    grants("batch.volcano.sh/jobs", *W, "create", "update", "patch", "delete")
    | grants("batch.volcano.sh/cronjobs", *R)
    | grants("batch.volcano.sh/jobs/status", "update")
    | grants("batch.volcano.sh/cronjobs/status", "update")
    | grants("batch.volcano.sh/jobs/finalizers", "update")
    | grants("batch.volcano.sh/cronjobs/finalizers", "update")
    | grants("flow.volcano.sh/jobflows/finalizers", "update")
    | grants("bus.volcano.sh/commands", *R, "delete")
    | grants("scheduling.volcano.sh/podgroups", *R, "create", "patch", "delete")
    | grants("scheduling.volcano.sh/queues", *W, "patch")
    | grants("scheduling.volcano.sh/queues/status", "update")
    | grants("flow.volcano.sh/jobflows", *R)
    | grants("flow.volcano.sh/jobtemplates", *R)
    | grants("flow.volcano.sh/jobflows/status", "update")
    | grants("flow.volcano.sh/jobtemplates/status", "update")
    | grants("scheduling.k8s.io/priorityclasses", *R)
    | grants("pods", *R, "create", "delete", "patch")
    | grants("persistentvolumeclaims", "get", "create")
    | grants("secrets", "create", "delete")
    | grants("services", "create", "delete")
    | grants("configmaps", "get", "create", "update", "delete")
    | grants("networking.k8s.io/networkpolicies", "create", "delete")
    | grants("events", "create", "patch")
    # integrations/live.py: framework objects followed, PodGroups owned with blockOwnerDeletion
    # by them (or by a LeaderWorkerSet group's leader pod), a PodGroup made meanwhile read.
    | {(verb, r) for r in FRAMEWORK_RESOURCES for verb in R}
    | {("update", f"{r}/finalizers") for r in FRAMEWORK_OWNERS}
    | grants("pods/finalizers", "update")
    | grants("namespaces", *R)
    | grants("scheduling.volcano.sh/podgroups", "get")
    # ... and the CRDs, to follow a framework installed or removed while the controller runs.
    | grants("apiextensions.k8s.io/customresourcedefinitions", *R)
    # core/controller/hypernodes.py: HyperNode discovery follows the nodes and writes the
    # HyperNodes it labels as its own, and their nodeCount.
    | grants("nodes", *R)
    | grants("topology.volcano.sh/hypernodes", *R, "create", "update", "delete")
    | grants("topology.volcano.sh/hypernodes/status", "update")
)
# webhooks/cache.py follows queues and namespaces; webhooks/owners.py follows the kinds between
# a pod and its workload and reads any other owner (a driver pod, a framework object) once;
# webhooks/registration.py reads, creates and updates its own configurations, by name
# (creating cannot be limited to a name).
WEBHOOK_CALLS: set[Grant] = (
    grants("scheduling.volcano.sh/queues", *R)
    | grants("namespaces", *R)
    | grants("apps/replicasets", *W)
    | grants("apps/statefulsets", *W)
    | grants("batch/jobs", *W)
    | grants("pods", "get")
    | {("get", r) for r in CONVERTED_RESOURCES}
    | grants("admissionregistration.k8s.io/mutatingwebhookconfigurations", "create")
    | grants("admissionregistration.k8s.io/validatingwebhookconfigurations", "create")
)

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
RESOURCES = (
    *("pods", "pods/binding", "pods/eviction", "pods/status", "pods/exec", "pods/log"),
    *("pods/ephemeralcontainers", "nodes", "nodes/status", "nodes/proxy", "namespaces"),
    *("resourcequotas", "events", "secrets", "configmaps", "services", "endpoints"),
    *("persistentvolumeclaims", "persistentvolumes", "serviceaccounts", "serviceaccounts/token"),
    "events.k8s.io/events",
    *("scheduling.volcano.sh/podgroups", "scheduling.volcano.sh/queues"),
    "scheduling.volcano.sh/queues/status",
    *("batch.volcano.sh/jobs", "batch.volcano.sh/jobs/status", "batch.volcano.sh/jobs/finalizers"),
    *("batch.volcano.sh/cronjobs", "batch.volcano.sh/cronjobs/status"),
    "batch.volcano.sh/cronjobs/finalizers",
    "bus.volcano.sh/commands",
    *("flow.volcano.sh/jobflows", "flow.volcano.sh/jobflows/status"),
    *("flow.volcano.sh/jobflows/finalizers", "flow.volcano.sh/jobtemplates"),
    "flow.volcano.sh/jobtemplates/status",
    *("topology.volcano.sh/hypernodes", "topology.volcano.sh/hypernodes/status"),
    *("scheduling.k8s.io/priorityclasses", "policy/poddisruptionbudgets"),
    "networking.k8s.io/networkpolicies",
    *("apps/deployments", "apps/replicasets", "apps/statefulsets", "batch/jobs"),
    "coordination.k8s.io/leases",
    *("rbac.authorization.k8s.io/clusterroles", "rbac.authorization.k8s.io/clusterrolebindings"),
    *("rbac.authorization.k8s.io/roles", "rbac.authorization.k8s.io/rolebindings"),
    "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    "admissionregistration.k8s.io/validatingwebhookconfigurations",
    "admissionregistration.k8s.io/validatingadmissionpolicies",
    "admissionregistration.k8s.io/validatingadmissionpolicybindings",
    "apiextensions.k8s.io/customresourcedefinitions",
    "certificates.k8s.io/certificatesigningrequests",
    *FRAMEWORK_RESOURCES,
    *(f"{r}/finalizers" for r in FRAMEWORK_OWNERS),
    "pods/finalizers",
)
ESCALATIONS = (
    ("impersonate", "users"),
    ("impersonate", "serviceaccounts"),
    ("impersonate", "groups"),
    ("escalate", "rbac.authorization.k8s.io/clusterroles"),
    ("bind", "rbac.authorization.k8s.io/clusterroles"),
    ("approve", "certificates.k8s.io/signers"),
)

# --- helpers -------------------------------------------------------------------------------------


def load(name: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def webhook_deployment_args() -> list[str]:
    for obj in load("webhook.yaml"):
        if obj["kind"] == "Deployment":
            return list(obj["spec"]["template"]["spec"]["containers"][0]["args"])
    raise AssertionError("no Deployment in deploy/webhook.yaml")


def webhook_configuration_names() -> list[tuple[str, str]]:
    """(resource, name) of every configuration the deployed webhook registers."""
    enabled = next(
        a.partition("=")[2]
        for a in webhook_deployment_args()
        if a.startswith("--enabled-admission")
    )
    return [
        (
            "mutatingwebhookconfigurations" if s.mutating else "validatingwebhookconfigurations",
            s.configuration_name,
        )
        for s in enabled_services(enabled)
    ]


def can(cp: ControlPlane, user: str, verb: str, resource: str, **attrs: str) -> bool:
    """The authorizer's answer for ``user`` (a SubjectAccessReview, asked as admin)."""
    head, _, tail = resource.partition("/")
    group, rest = (
        (head, tail) if "." in head or head in ("apps", "batch", "policy") else ("", resource)
    )
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


def allowed_grid(cp: ControlPlane, user: str) -> set[Grant]:
    """Every (verb, resource) of the grid the user may use in every namespace."""
    grid = [(verb, resource) for resource in RESOURCES for verb in VERBS]
    return {(verb, res) for verb, res in [*grid, *ESCALATIONS] if can(cp, user, verb, res)}


def refusal(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The message of the 403 that ``call`` must get (fails if it got through)."""
    try:
        call(*args, **kwargs)
    except KubeAPIError as err:
        assert err.status == 403, f"expected 403 Forbidden, got {err.status}: {err}"
        return str(err)
    raise AssertionError(f"{getattr(call, '__name__', call)}{args[:1]} was allowed")


def owned_by_job(obj: dict, job: dict) -> dict:
    meta = job["metadata"]
    ref = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {**obj, "metadata": {**obj["metadata"], "ownerReferences": [ref]}}


def secret(name: str) -> dict:
    data = {"id_rsa": base64.b64encode(b"not really a key").decode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}


def config_map(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def service(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": {"volcano.sh/job-name": name}},
    }


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """This module's own control plane (it judges the whole cluster)."""
    yield from own_control_plane(tmp_path_factory)


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> ControlPlane:
    """namespace.yaml, crds/, rbac.yaml and the identity part of webhook.yaml, with the
    controller's admission policy in force."""
    cp = control_plane
    cp.apply_manifests(DEPLOY / "namespace.yaml")
    cp.apply_manifests(DEPLOY / "crds")
    cp.apply_manifests(DEPLOY / "rbac.yaml")
    cp.apply_manifests([obj for obj in load("webhook.yaml") if obj["kind"] in RBAC_KINDS])
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
def namespace(installed: ControlPlane) -> str:
    name = f"rbac-{uuid.uuid4().hex[:8]}"
    installed.client.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


@pytest.fixture
def controller_sa(installed: ControlPlane, tmp_path: Path) -> Iterator[KubeHTTP]:
    client = identity(installed, CONTROLLER, tmp_path)
    yield client
    client.close()


@pytest.fixture
def a_job(installed: ControlPlane, namespace: str) -> dict:
    """A vcjob (admin-made) for objects to be owned by; no controller runs in these tests."""
    job = vcjob("owner", task("worker", 1))
    return installed.client.post(
        f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs", job
    )


@pytest.fixture
def policy_in_force(installed: ControlPlane, controller_sa: KubeHTTP, namespace: str) -> None:
    """Wait until the API server enforces the controller's admission policy (it compiles
    policies and bindings in the background after they are created)."""
    deadline = time.monotonic() + 60
    while True:
        name = f"probe-{uuid.uuid4().hex[:6]}"
        try:
            controller_sa.post(f"/api/v1/namespaces/{namespace}/configmaps", config_map(name))
        except KubeAPIError as err:
            if err.status == 403 and "controlled by a batch.volcano.sh Job" in str(err):
                return
            raise
        installed.client.delete(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        assert time.monotonic() < deadline, "the admission policy was not enforced within 60s"
        time.sleep(0.5)


# --- the authorizer's answers ------------------------------------------------------------------


def test_rbac_yaml_holds_no_rule_nobody_calls_and_misses_none(installed: ControlPlane) -> None:
    for user, calls in ((SCHEDULER, SCHEDULER_CALLS), (CONTROLLER, CONTROLLER_CALLS)):
        allowed = allowed_grid(installed, user)
        assert sorted(calls - allowed) == [], f"{user} lacks what its code calls"
        assert sorted(allowed - calls) == [], f"{user} may do what its code never calls"


def test_webhook_identity_is_what_the_webhook_calls(installed: ControlPlane) -> None:
    allowed = allowed_grid(installed, WEBHOOK)
    assert sorted(WEBHOOK_CALLS - allowed) == [], "the webhook lacks what its code calls"
    assert sorted(allowed - WEBHOOK_CALLS) == [], "the webhook may do what it never calls"
    for resource, name in webhook_configuration_names():
        full = f"admissionregistration.k8s.io/{resource}"
        for verb in ("get", "update"):
            assert can(installed, WEBHOOK, verb, full, name=name), f"{verb} {resource}/{name}"
            assert not can(installed, WEBHOOK, verb, full, name="someone-elses-webhook")
    # Its serving certificate's Secret (webhooks/tls.py): created once, then only read.
    secrets, cert = "secrets", "volcano-admission-secret"
    assert can(installed, WEBHOOK, "create", secrets, namespace=NAMESPACE)
    assert can(installed, WEBHOOK, "get", secrets, namespace=NAMESPACE, name=cert)
    for verb in ("update", "patch", "delete"):
        assert not can(installed, WEBHOOK, verb, secrets, namespace=NAMESPACE, name=cert)
    assert not can(installed, WEBHOOK, "get", secrets, namespace=NAMESPACE, name="other")
    assert not can(installed, WEBHOOK, "list", secrets, namespace=NAMESPACE)
    assert not can(installed, WEBHOOK, "create", secrets, namespace="default")


def test_webhook_own_configurations_take_only_get_and_update(installed: ControlPlane) -> None:
    for resource, name in webhook_configuration_names():
        full = f"admissionregistration.k8s.io/{resource}"
        named = {
            v
            for v in ("get", "update", "patch", "delete")
            if can(installed, WEBHOOK, v, full, name=name)
        }
        assert named == {"get", "update"}, f"{resource}/{name}: {sorted(named)}"


def test_lease_rights_are_each_process_own_lease_in_its_namespace(installed: ControlPlane) -> None:
    leases = "coordination.k8s.io/leases"
    own = {SCHEDULER: "vc-scheduler", CONTROLLER: "vc-controller-manager"}
    for user, lease in own.items():
        assert can(installed, user, "create", leases, namespace=NAMESPACE)
        for verb in ("get", "update"):
            assert can(installed, user, verb, leases, namespace=NAMESPACE, name=lease)
            for other in (*(set(own.values()) - {lease}), "kube-scheduler"):
                assert not can(installed, user, verb, leases, namespace=NAMESPACE, name=other)
        for verb in ("patch", "delete", "list", "watch"):
            assert not can(installed, user, verb, leases, namespace=NAMESPACE, name=lease)
        assert not can(installed, user, "create", leases, namespace="kube-system")
        assert not can(installed, user, "get", leases, namespace="default", name=lease)
    assert not can(installed, WEBHOOK, "create", leases, namespace=NAMESPACE)


# --- the identities themselves -----------------------------------------------------------------


def test_scheduler_cannot_create_pods_read_secrets_or_write_nodes(
    installed: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    sa = identity(installed, SCHEDULER, tmp_path)
    admin = installed.client
    admin.post(f"/api/v1/namespaces/{namespace}/secrets", secret("kept"))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}]},
    }
    node = admin.get("/api/v1/nodes")["items"][0]["metadata"]["name"]
    try:
        refusal(sa.post, f"/api/v1/namespaces/{namespace}/pods", pod)
        refusal(sa.get, f"/api/v1/namespaces/{namespace}/secrets/kept")
        refusal(sa.get, "/api/v1/secrets")
        refusal(sa.get, f"/api/v1/namespaces/{namespace}/configmaps")
        refusal(sa.delete, f"/api/v1/nodes/{node}", missing_ok=False)
        refusal(sa.patch, f"/api/v1/nodes/{node}", {"metadata": {"labels": {"x": "y"}}})
        refusal(sa.get, f"/api/v1/nodes/{node}")  # the cache lists and watches; no gets
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p", "namespace": namespace},
        }
        refusal(sa.post, f"/api/v1/namespaces/{namespace}/pods/p/eviction", eviction)
    finally:
        sa.close()
    admin.get(f"/api/v1/nodes/{node}")
    admin.get(f"/api/v1/namespaces/{namespace}/secrets/kept")


def test_controller_cannot_read_or_update_any_secret(
    installed: ControlPlane, controller_sa: KubeHTTP, namespace: str, a_job: dict
) -> None:
    admin = installed.client
    base = f"/api/v1/namespaces/{namespace}/secrets"
    admin.post(base, owned_by_job(secret("owner-ssh"), a_job))
    refusal(controller_sa.get, "/api/v1/secrets")
    refusal(controller_sa.get, base)
    refusal(controller_sa.get, f"{base}/owner-ssh")
    stored = admin.get(f"{base}/owner-ssh")
    refusal(controller_sa.put, f"{base}/owner-ssh", {**stored, "data": {}})
    refusal(controller_sa.patch, f"{base}/owner-ssh", {"data": {"id_rsa": ""}})
    refusal(controller_sa.request, "DELETE", base)  # deletecollection
    assert admin.get(f"{base}/owner-ssh")["data"] == stored["data"]


@pytest.mark.usefixtures("policy_in_force")
def test_controller_may_create_and_delete_only_objects_of_vcjobs(
    installed: ControlPlane, controller_sa: KubeHTTP, namespace: str, a_job: dict
) -> None:
    admin = installed.client
    ns = f"/api/v1/namespaces/{namespace}"
    policies = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"
    netpol = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "owner"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    kinds = (
        (f"{ns}/secrets", secret("owner-ssh")),
        (f"{ns}/configmaps", config_map("owner-svc", hosts="a")),
        (f"{ns}/services", service("owner")),
        (policies, netpol),
    )
    for path, obj in kinds:
        name = obj["metadata"]["name"]
        # Not controlled by a vcjob: refused by the admission policy, though RBAC allows it.
        message = refusal(controller_sa.post, path, obj)
        assert "controlled by a batch.volcano.sh Job" in message, message
        assert f"{namespace}/{name} is not" in message, message
        # Someone else's object of the same name: the controller cannot delete it ...
        admin.post(path, obj)
        message = refusal(controller_sa.delete, f"{path}/{name}", missing_ok=False)
        assert "controlled by a batch.volcano.sh Job" in message, message
        admin.get(f"{path}/{name}")
        admin.delete(f"{path}/{name}", missing_ok=False)
        # ... but what a job plugin makes (controlled by the job), it creates and deletes.
        controller_sa.post(path, owned_by_job(obj, a_job))
        controller_sa.delete(f"{path}/{name}", missing_ok=False)
    # An ownerReference that is not the controller's does not count.
    loose = owned_by_job(config_map("loose"), a_job)
    loose["metadata"]["ownerReferences"][0]["controller"] = False
    refusal(controller_sa.post, f"{ns}/configmaps", loose)


@pytest.mark.usefixtures("policy_in_force")
def test_controller_updates_only_configmaps_of_vcjobs_and_cannot_disown_them(
    installed: ControlPlane, controller_sa: KubeHTTP, namespace: str, a_job: dict
) -> None:
    admin = installed.client
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    admin.post(path, config_map("foreign-svc", hosts="a"))
    foreign = admin.get(f"{path}/foreign-svc")
    message = refusal(controller_sa.put, f"{path}/foreign-svc", {**foreign, "data": {"x": "y"}})
    assert "UPDATE only configmaps controlled by a batch.volcano.sh Job" in message, message
    assert admin.get(f"{path}/foreign-svc")["data"] == {"hosts": "a"}

    created = controller_sa.post(path, owned_by_job(config_map("owner-svc", hosts="a"), a_job))
    updated = controller_sa.put(f"{path}/owner-svc", {**created, "data": {"hosts": "a\nb"}})
    assert updated["data"] == {"hosts": "a\nb"}
    disowned = {**updated, "metadata": {**updated["metadata"], "ownerReferences": []}}
    refusal(controller_sa.put, f"{path}/owner-svc", disowned)
    assert admin.get(f"{path}/owner-svc")["metadata"]["ownerReferences"]


@pytest.mark.usefixtures("policy_in_force")
def test_the_policy_binds_the_controller_alone(
    installed: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """Same username prefix, another ServiceAccount: the policy leaves it to RBAC."""
    admin = installed.client
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    admin.post(path, config_map("plain"))
    admin.put(f"{path}/plain", {**admin.get(f"{path}/plain"), "data": {"k": "v"}})
    lookalike = f"system:serviceaccount:{namespace}:stromboli-controller"
    admin.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "cm"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]}],
        },
    )
    admin.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "cm"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "stromboli-controller", "namespace": namespace}
            ],
        },
    )
    assert installed.ca is not None and installed.server_url and installed.ca_path
    keys = installed.ca.issue_client(lookalike, ("system:serviceaccounts",)).write(tmp_path, "l")
    assert keys.cert_path and keys.key_path
    other = KubeHTTP(
        installed.server_url,
        ca_file=installed.ca_path,
        cert_file=keys.cert_path,
        key_file=keys.key_path,
    )
    deadline = time.monotonic() + 30
    try:
        while True:  # the RoleBinding reaches the authorizer's cache within moments
            try:
                other.delete(f"{path}/plain", missing_ok=False)
                break
            except KubeAPIError as err:
                assert err.status == 403 and "controlled by" not in str(err), str(err)
                assert time.monotonic() < deadline, str(err)
                time.sleep(0.2)
    finally:
        other.close()


def test_nobody_may_delete_nodes_or_bind_roles(installed: ControlPlane) -> None:
    for user in (SCHEDULER, CONTROLLER, WEBHOOK):
        for verb, resource in (
            ("delete", "nodes"),
            ("update", "nodes"),
            ("create", "pods/exec"),
            ("create", "serviceaccounts/token"),
            ("create", "rbac.authorization.k8s.io/clusterrolebindings"),
            ("update", "admissionregistration.k8s.io/validatingadmissionpolicies"),
            ("delete", "admissionregistration.k8s.io/validatingadmissionpolicybindings"),
            ("get", "secrets"),
        ):
            assert not can(installed, user, verb, resource), f"{user}: {verb} {resource}"
    # What the webhook must never touch, whatever deploy/webhook.yaml says about its own.
    for verb, resource in (
        ("create", "pods"),
        ("delete", "pods"),
        ("update", "scheduling.volcano.sh/queues"),
        ("create", "pods/binding"),
    ):
        assert not can(installed, WEBHOOK, verb, resource), f"webhook: {verb} {resource}"


def test_webhook_cannot_delete_or_patch_someone_elses_webhook_configuration(
    installed: ControlPlane, tmp_path: Path
) -> None:
    admin = installed.client
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    name = f"someone-else-{uuid.uuid4().hex[:6]}"
    admin.post(
        path,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [],
        },
    )
    sa = identity(installed, WEBHOOK, tmp_path)
    try:
        theirs = admin.get(f"{path}/{name}")
        refusal(sa.delete, f"{path}/{name}", missing_ok=False)
        refusal(sa.patch, f"{path}/{name}", {"metadata": {"labels": {"taken": "over"}}})
        assert admin.get(f"{path}/{name}") == theirs
    finally:
        sa.close()
        admin.delete(f"{path}/{name}")


# --- the processes, under their identities ------------------------------------------------------


class Running:
    """``stromboli <command>`` under a kubeconfig of ``user``, its output in ``log``."""

    def __init__(self, cp: ControlPlane, user: str, tmp_path: Path, *args: str) -> None:
        name = user.rsplit(":", 1)[-1]
        kubeconfig = cp.write_kubeconfig(
            tmp_path / f"{name}.kubeconfig", user=user, groups=SA_GROUPS
        )
        self.log = tmp_path / f"{name}.log"
        argv = [str(STROMBOLI), *args, f"--kubeconfig={kubeconfig}", "--healthz-address="]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def check_alive(self) -> None:
        assert self.process.poll() is None, f"exited:\n{self.text()[-3000:]}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def wait_until(
    probe: Callable[[], Any], what: str, processes: list[Running], timeout: float = 60.0
) -> Any:
    """Poll ``probe`` until it returns something truthy; fail with the processes' logs."""
    deadline = time.monotonic() + timeout
    while True:
        for running in processes:
            running.check_alive()
        with contextlib.suppress(KubeAPIError):
            value = probe()
            if value:
                return value
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {r.log.name} ---\n{r.text()[-2500:]}" for r in processes)
            raise AssertionError(f"{what} not reached in {timeout:.0f}s\n{logs}")
        time.sleep(0.2)


def gone(client: KubeHTTP, path: str) -> bool:
    try:
        obj = client.get(path)
    except KubeAPIError as err:
        if err.status == 404:
            return True
        raise
    # Or on its way: a foreground deletion waits for the garbage collector.
    return bool(obj["metadata"].get("deletionTimestamp"))


def test_scheduler_and_controller_run_a_plugged_vcjob_under_their_identities(
    installed: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """svc, ssh and env plugins, a scale (the host ConfigMap updated), a plain pod enrolled,
    a CompleteJob Command, the plugin objects deleted and the TTL deletion: all with the
    ServiceAccounts' rights and the admission policy alone, and nothing refused."""
    admin = installed.client
    leader = ("--leader-elect=true", f"--lock-object-namespace={NAMESPACE}")
    scheduler = Running(
        installed,
        SCHEDULER,
        tmp_path,
        "scheduler",
        "--schedule-period=100ms",
        "--listen-address=",
        *leader,
    )
    controller = Running(
        installed, CONTROLLER, tmp_path, "controller", "--listen-address=", *leader
    )
    both = [scheduler, controller]
    ns = f"/api/v1/namespaces/{namespace}"
    jobs = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"
    try:
        job = vcjob(
            "plugged",
            task("master", 1),
            task("worker", 2),
            plugins={"svc": [], "ssh": [], "env": []},
            ttlSecondsAfterFinished=1,
        )
        created = admin.post(jobs, job)
        plugin_objects = [
            f"{ns}/secrets/plugged-ssh",
            f"{ns}/configmaps/plugged-svc",
            f"{ns}/services/plugged",
            f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/plugged",
        ]
        for path in plugin_objects:
            obj = wait_until(lambda path=path: admin.get(path), path, both)
            (ref,) = obj["metadata"]["ownerReferences"]
            assert ref["uid"] == created["metadata"]["uid"] and ref["controller"] is True

        def running_pods(n: int) -> dict[str, dict]:
            pods = admin.get(f"{ns}/pods", labelSelector="volcano.sh/job-name=plugged")["items"]
            ok = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            return {p["metadata"]["name"]: p for p in ok} if len(ok) == n else {}

        pods = wait_until(lambda: running_pods(3), "3 running pods", both)
        (ssh_volume,) = [v for v in pods["plugged-master-0"]["spec"]["volumes"] if "secret" in v]
        modes = {i["key"]: i["mode"] for i in ssh_volume["secret"]["items"]}
        assert modes["id_rsa"] == 0o600

        # A merge patch, as kubectl scale would: the controller writes the job meanwhile, so a
        # read-then-PUT may conflict.
        scale = {
            "spec": {"tasks": [dict(t) for t in admin.get(f"{jobs}/plugged")["spec"]["tasks"]]}
        }
        scale["spec"]["tasks"][1]["replicas"] = 3
        admin.patch(f"{jobs}/plugged", scale)
        wait_until(
            lambda: admin.get(f"{ns}/configmaps/plugged-svc")["data"]["VC_WORKER_NUM"] == "3",
            "the host ConfigMap updated after the scale",
            both,
        )
        wait_until(lambda: running_pods(4), "4 running pods", both)

        plain = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "plain"},
            "spec": {
                "schedulerName": "volcano",
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.invalid/x:1",
                        "resources": {"requests": {"cpu": "50m"}},
                    }
                ],
            },
        }
        admin.post(f"{ns}/pods", plain)
        wait_until(
            lambda: (
                admin.get(f"{ns}/pods/plain")["spec"].get("nodeName")
                and (admin.get(f"{ns}/pods/plain")["metadata"].get("annotations") or {}).get(
                    "scheduling.k8s.io/group-name"
                )
            ),
            "the plain pod enrolled into a PodGroup and bound",
            both,
        )

        target = admin.get(f"{jobs}/plugged")
        command = admin.post(
            f"/apis/bus.volcano.sh/v1alpha1/namespaces/{namespace}/commands",
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"generateName": "plugged-complete-"},
                "action": "CompleteJob",
                "target": {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "plugged",
                    "uid": target["metadata"]["uid"],
                },
            },
        )
        commands = f"/apis/bus.volcano.sh/v1alpha1/namespaces/{namespace}/commands"
        wait_until(
            lambda: gone(admin, f"{commands}/{command['metadata']['name']}"), "command", both
        )
        for path in plugin_objects:
            wait_until(lambda path=path: gone(admin, path), f"{path} deleted", both)
        wait_until(lambda: gone(admin, f"{jobs}/plugged"), "the TTL deletion", both)
        lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
        for name in ("vc-scheduler", "vc-controller-manager"):
            assert admin.get(f"{lease}/{name}")["spec"]["holderIdentity"]
    finally:
        for running in both:
            running.stop()
    for running in both:
        text = running.text()
        for refused in ("forbidden", "controlled by a batch.volcano.sh job"):
            assert refused not in text.lower(), f"{running.log.name} was refused:\n{text[-3000:]}"


def events_of(client: KubeHTTP, namespace: str, name: str) -> list[str]:
    events = client.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [
        f"{e['reason']}: {e['message']}" for e in events if e["involvedObject"].get("name") == name
    ]


def test_objects_squatting_on_plugin_names_are_left_alone(
    installed: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """A Secret and a ConfigMap made beforehand under a job plugin's names, by someone else:
    the controller neither overwrites the ConfigMap (the job waits, saying why) nor deletes
    the Secret when the job ends (the job ends all the same, with a Warning)."""
    admin = installed.client
    ns = f"/api/v1/namespaces/{namespace}"
    jobs = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"
    admin.post(f"{ns}/configmaps", config_map("squat-svc", hosts="mine"))
    admin.post(f"{ns}/secrets", secret("squat2-ssh"))
    kept_secret = admin.get(f"{ns}/secrets/squat2-ssh")["data"]
    leader = "--leader-elect=false"
    scheduler = Running(
        installed,
        SCHEDULER,
        tmp_path,
        "scheduler",
        "--schedule-period=100ms",
        "--listen-address=",
        leader,
    )
    controller = Running(installed, CONTROLLER, tmp_path, "controller", "--listen-address=", leader)
    both = [scheduler, controller]
    try:
        admin.post(jobs, vcjob("squat", task("worker", 1), plugins={"svc": []}))
        admin.post(jobs, vcjob("squat2", task("worker", 1), plugins={"ssh": []}))
        wait_until(
            lambda: any(
                f"ConfigMap {namespace}/squat-svc exists and is not controlled by job squat" in e
                for e in events_of(admin, namespace, "squat")
            ),
            "the PluginError event of job squat",
            both,
        )
        assert admin.get(f"{ns}/configmaps/squat-svc")["data"] == {"hosts": "mine"}

        def running() -> bool:
            pods = admin.get(f"{ns}/pods", labelSelector="volcano.sh/job-name=squat2")["items"]
            return any((p.get("status") or {}).get("phase") == "Running" for p in pods)

        wait_until(running, "job squat2 running", both)
        target = admin.get(f"{jobs}/squat2")
        admin.post(
            f"/apis/bus.volcano.sh/v1alpha1/namespaces/{namespace}/commands",
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"generateName": "squat2-complete-"},
                "action": "CompleteJob",
                "target": {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "squat2",
                    "uid": target["metadata"]["uid"],
                },
            },
        )
        wait_until(
            lambda: admin.get(f"{jobs}/squat2")["status"]["state"]["phase"] == "Completed",
            "job squat2 completed",
            both,
        )
        warnings = [e for e in events_of(admin, namespace, "squat2") if "squat2-ssh" in e]
        assert any("controlled by a batch.volcano.sh Job" in e for e in warnings), warnings
        assert admin.get(f"{ns}/secrets/squat2-ssh")["data"] == kept_secret
    finally:
        for process in both:
            process.stop()

"""RBAC: each component's ServiceAccount may do what its process calls.

The table below is what the scheduler, controller and webhook send (the same lists
deploy/rbac.yaml and deploy/webhook.yaml grant, rule by rule; tests/doctor/test_rbac.py keeps
them in step). The collector asks the API server's authorizer one SubjectAccessReview per
entry, so the answer includes every way a grant can reach the account (bindings to groups,
aggregated roles), not only our manifests.
"""

from __future__ import annotations

from typing import Final

from stromboli.core.doctor.findings import Finding, fail, ok
from stromboli.core.doctor.install import settings
from stromboli.core.doctor.view import (
    COMPONENTS,
    AccessQuestion,
    ClusterView,
    meta,
    pod_template_spec,
    text,
)
from stromboli.integrations.kinds import CONVERTED, FRAMEWORK_KINDS

CHECK = "rbac"
FIX = (
    "run: kubectl apply -f deploy/rbac.yaml -f deploy/webhook.yaml "
    "(or: helm upgrade stromboli deploy/helm/stromboli)"
)
SHOWN = 4

Need = tuple[str, tuple[str, ...]]  # (resource, verbs)
LIST_WATCH: Final = ("list", "watch")
READ: Final = ("get", "list", "watch")


def _framework(verbs: tuple[str, ...], kinds: tuple[str, ...] = ()) -> list[Need]:
    resources = dict.fromkeys(f"{i.group}/{i.plural}" for i in FRAMEWORK_KINDS)
    return [(r, verbs) for r in resources if not kinds or r.rsplit("/", 1)[1] in kinds]


_CONVERTED = tuple(dict.fromkeys(f"{i.group}/{i.plural}" for i in CONVERTED))
_OWNERS = tuple(r for r in _CONVERTED if not r.endswith(("/rayservices", "/leaderworkersets")))

CLUSTER_NEEDS: Final[dict[str, list[Need]]] = {
    "scheduler": [
        ("pods", (*READ, "delete")),
        ("pods/binding", ("create",)),
        ("pods/status", ("update",)),
        ("nodes", LIST_WATCH),
        ("resourcequotas", LIST_WATCH),
        ("events", ("create", "patch")),
        ("scheduling.volcano.sh/podgroups", (*READ, "update")),
        ("scheduling.volcano.sh/queues", (*READ, "create")),
        ("scheduling.volcano.sh/queues/status", ("update",)),
        ("scheduling.k8s.io/priorityclasses", LIST_WATCH),
        ("policy/poddisruptionbudgets", LIST_WATCH),
        ("topology.volcano.sh/hypernodes", LIST_WATCH),
    ],
    "controller": [
        ("batch.volcano.sh/jobs", (*READ, "create", "update", "patch", "delete")),
        ("batch.volcano.sh/cronjobs", LIST_WATCH),
        ("batch.volcano.sh/jobs/status", ("update",)),
        ("batch.volcano.sh/cronjobs/status", ("update",)),
        ("batch.volcano.sh/jobs/finalizers", ("update",)),
        ("bus.volcano.sh/commands", (*LIST_WATCH, "delete")),
        ("scheduling.volcano.sh/podgroups", (*READ, "create", "patch", "delete")),
        ("scheduling.volcano.sh/queues", (*READ, "patch")),
        ("scheduling.volcano.sh/queues/status", ("update",)),
        ("flow.volcano.sh/jobflows", LIST_WATCH),
        ("flow.volcano.sh/jobtemplates", LIST_WATCH),
        ("flow.volcano.sh/jobflows/status", ("update",)),
        ("scheduling.k8s.io/priorityclasses", LIST_WATCH),
        ("pods", (*LIST_WATCH, "create", "delete", "patch")),
        ("persistentvolumeclaims", ("get", "create")),
        ("secrets", ("create", "delete")),
        ("services", ("create", "delete")),
        ("configmaps", ("get", "create", "update", "delete")),
        ("networking.k8s.io/networkpolicies", ("create", "delete")),
        ("events", ("create", "patch")),
        ("namespaces", LIST_WATCH),
        *_framework(LIST_WATCH),
        ("apiextensions.k8s.io/customresourcedefinitions", LIST_WATCH),
        *[(f"{r}/finalizers", ("update",)) for r in _OWNERS],
        ("pods/finalizers", ("update",)),
    ],
    "webhook": [
        ("scheduling.volcano.sh/queues", LIST_WATCH),
        ("namespaces", LIST_WATCH),
        ("apps/replicasets", READ),
        ("apps/statefulsets", READ),
        ("batch/jobs", READ),
        ("pods", ("get",)),
        *[(r, ("get",)) for r in _CONVERTED],
        ("admissionregistration.k8s.io/mutatingwebhookconfigurations", ("create",)),
        ("admissionregistration.k8s.io/validatingwebhookconfigurations", ("create",)),
    ],
}
"""Cluster-wide calls of each component: resource → verbs."""

LEASES: Final = {"scheduler": "vc-scheduler", "controller": "vc-controller-manager"}


def service_account(view: ClusterView, component: str) -> str:
    """The account the component's Deployment runs as (``stromboli-<component>`` by default)."""
    deployment = view.component(component)
    chosen = text(pod_template_spec(deployment).get("serviceAccountName")) if deployment else ""
    return chosen or f"stromboli-{component}"


def questions(view: ClusterView, component: str) -> list[AccessQuestion]:
    """Everything ``component`` must be allowed, as authorizer questions."""
    account, namespace = service_account(view, component), view.namespace
    asked = [
        AccessQuestion(account, verb, resource)
        for resource, verbs in CLUSTER_NEEDS[component]
        for verb in verbs
    ]
    lease = LEASES.get(component)
    if lease:
        asked.append(AccessQuestion(account, "create", "coordination.k8s.io/leases", namespace))
        for verb in ("get", "update"):
            asked.append(
                AccessQuestion(account, verb, "coordination.k8s.io/leases", namespace, lease)
            )
    if component == "webhook":
        wanted = settings(view)
        asked.append(AccessQuestion(account, "create", "secrets", namespace))
        if wanted.secret_name:
            asked.append(AccessQuestion(account, "get", "secrets", namespace, wanted.secret_name))
        for name, mutating in wanted.configuration_names():
            plural = "mutating" if mutating else "validating"
            resource = f"admissionregistration.k8s.io/{plural}webhookconfigurations"
            for verb in ("get", "update"):
                asked.append(AccessQuestion(account, verb, resource, "", name))
    return asked


def installed(view: ClusterView, component: str) -> bool:
    account = service_account(view, component)
    return view.component(component) is not None or any(
        meta(sa).get("name") == account for sa in view.service_accounts
    )


def all_questions(view: ClusterView) -> list[AccessQuestion]:
    asked: list[AccessQuestion] = []
    for component in COMPONENTS:
        if component != "webhook" or installed(view, component):
            asked += questions(view, component)
    return asked


def _describe(question: AccessQuestion) -> str:
    where = f" {question.name}" if question.name else ""
    scope = f" in {question.namespace}" if question.namespace else ""
    return f"{question.verb} {question.resource}{where}{scope}"


def check(view: ClusterView) -> list[Finding]:
    findings: list[Finding] = []
    accounts = {text(meta(sa).get("name")) for sa in view.service_accounts}
    for component in COMPONENTS:
        account = service_account(view, component)
        who = f"ServiceAccount {view.namespace}/{account} ({component})"
        if component == "webhook" and not installed(view, component):
            continue
        if account not in accounts:
            findings.append(fail(CHECK, f"{who} is missing", FIX))
            continue
        if view.access_error:
            continue
        asked = questions(view, component)
        denied = [q for q in asked if not view.access.get(q, False)]
        if not denied:
            findings.append(ok(CHECK, f"{who} may do all {len(asked)} things it calls"))
            continue
        shown = ", ".join(_describe(q) for q in denied[:SHOWN])
        more = f" and {len(denied) - SHOWN} more" if len(denied) > SHOWN else ""
        findings.append(fail(CHECK, f"{who} may not {shown}{more}", FIX))
    if view.access_error:
        findings.append(
            fail(
                CHECK,
                f"could not ask the authorizer: {view.access_error}",
                "run doctor as a user who may create subjectaccessreviews (authorization.k8s.io)",
            )
        )
    return findings

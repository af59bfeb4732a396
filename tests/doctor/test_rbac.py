"""The RBAC check's table is what deploy/ grants, and its verdicts name what is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stromboli.core.doctor import rbac
from stromboli.core.doctor.findings import Severity
from stromboli.core.doctor.view import AccessQuestion

from .builders import NS, deployment, healthy_view

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docs() -> list[dict[str, Any]]:
    docs = []
    for name in ("rbac.yaml", "webhook.yaml"):
        docs += [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    return docs


def granted(question: AccessQuestion, docs: list[dict[str, Any]]) -> bool:
    """Whether deploy/'s roles, as bound to the account, allow the question (RBAC's rule
    matching: group, resource[/sub], verb, resourceNames; a Role only in its namespace)."""
    attrs = question.attributes()
    resource = attrs["resource"] + (f"/{attrs['subresource']}" if "subresource" in attrs else "")
    roles = {
        (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")): d for d in docs
    }
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == question.service_account
            for s in binding["subjects"]
        ):
            continue
        scope = binding["metadata"].get("namespace", "")
        if scope and scope != question.namespace:
            continue
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ref["name"], scope if ref["kind"] == "Role" else "")]
        for rule in role["rules"]:
            if (
                attrs["group"] in rule["apiGroups"]
                and resource in rule["resources"]
                and question.verb in rule["verbs"]
                and (not rule.get("resourceNames") or attrs.get("name") in rule["resourceNames"])
            ):
                return True
    return False


@pytest.mark.parametrize("component", ["scheduler", "controller", "webhook"])
def test_every_question_is_granted_by_deploy_manifests(component: str) -> None:
    docs = _docs()
    missing = [q for q in rbac.questions(healthy_view(), component) if not granted(q, docs)]
    assert missing == []


def test_the_matcher_can_refuse() -> None:
    docs = _docs()
    assert not granted(AccessQuestion("stromboli-scheduler", "create", "pods"), docs)
    assert not granted(AccessQuestion("stromboli-webhook", "get", "secrets", NS, "other"), docs)


def test_core_subresources_and_undotted_groups_are_told_apart() -> None:
    assert AccessQuestion("a", "create", "pods/binding").attributes() == {
        "group": "",
        "resource": "pods",
        "subresource": "binding",
        "verb": "create",
    }
    assert AccessQuestion("a", "list", "apps/replicasets").attributes()["group"] == "apps"
    assert AccessQuestion("a", "list", "policy/poddisruptionbudgets").attributes() == {
        "group": "policy",
        "resource": "poddisruptionbudgets",
        "verb": "list",
    }
    lease = AccessQuestion("a", "get", "coordination.k8s.io/leases", NS, "vc-scheduler")
    assert lease.attributes()["name"] == "vc-scheduler"
    assert lease.attributes()["namespace"] == NS


def test_all_allowed_is_one_ok_line_per_component() -> None:
    findings = rbac.check(healthy_view())
    assert [f.severity for f in findings] == [Severity.OK] * 3
    assert findings[0].message.startswith("ServiceAccount volcano-system/stromboli-scheduler")


def test_a_refusal_names_the_verb_and_resource() -> None:
    view = healthy_view()
    question = AccessQuestion("stromboli-scheduler", "create", "pods/binding")
    view.access[question] = False
    [finding] = [f for f in rbac.check(view) if f.severity is Severity.FAIL]
    assert finding.message == (
        "ServiceAccount volcano-system/stromboli-scheduler (scheduler) may not create pods/binding"
    )
    assert "deploy/rbac.yaml" in finding.fix


def test_many_refusals_are_counted() -> None:
    view = healthy_view()
    view.access = {q: False for q in view.access}
    failed = [f for f in rbac.check(view) if f.severity is Severity.FAIL]
    assert len(failed) == 3
    assert all(" more" in f.message for f in failed)


def test_a_missing_account_fails() -> None:
    view = healthy_view()
    view.service_accounts = [
        sa for sa in view.service_accounts if sa["metadata"]["name"] != "stromboli-controller"
    ]
    [finding] = [f for f in rbac.check(view) if f.severity is Severity.FAIL]
    assert finding.message == (
        "ServiceAccount volcano-system/stromboli-controller (controller) is missing"
    )


def test_the_account_comes_from_the_deployment() -> None:
    view = healthy_view()
    view.deployments[0] = deployment("stromboli-scheduler", args=["scheduler"], account="sched")
    assert rbac.service_account(view, "scheduler") == "sched"
    assert all(q.service_account == "sched" for q in rbac.questions(view, "scheduler"))


def test_no_webhook_installed_is_not_judged() -> None:
    view = healthy_view()
    view.deployments = view.deployments[:2]
    view.service_accounts = view.service_accounts[:2]
    assert all("webhook" not in f.message for f in rbac.check(view))
    assert all(q.service_account != "stromboli-webhook" for q in rbac.all_questions(view))


def test_an_authorizer_that_cannot_be_asked_is_one_fail() -> None:
    view = healthy_view()
    view.access_error = "subjectaccessreviews is forbidden"
    [finding] = [f for f in rbac.check(view) if f.severity is Severity.FAIL]
    assert "subjectaccessreviews is forbidden" in finding.message

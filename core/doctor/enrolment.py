"""Enrolment: namespaces labelled ``stromboli.dev/enroll: "true"`` and whether the pod webhook
(``/pods/mutate``) is scoped to them, since only a pod it sees at CREATE joins a PodGroup."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.doctor.findings import Finding, fail, ok, warn
from stromboli.core.doctor.install import settings
from stromboli.core.doctor.view import (
    ClusterView,
    labels,
    mapping,
    meta,
    restart,
    sequence,
    text,
)
from stromboli.webhooks.registration import ALWAYS_EXEMPT, ENROLL_LABEL
from stromboli.webhooks.services import SERVICES

CHECK = "enrolment"
PODS_MUTATE = SERVICES["/pods/mutate"].configuration_name
NAME_LABEL = "kubernetes.io/metadata.name"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    pass


def selects(selector: Any, namespace_labels: Mapping[str, str]) -> bool:
    """Whether a label selector (``matchLabels``, ``matchExpressions``) matches; an absent or
    empty selector matches everything. :class:`SelectorError` names a malformed term."""
    if selector is None:
        return True
    if not isinstance(selector, Mapping):
        raise SelectorError("namespaceSelector is not an object")
    for key, value in mapping(selector.get("matchLabels")).items():
        if namespace_labels.get(key) != value:
            return False
    for i, raw in enumerate(sequence(selector.get("matchExpressions"))):
        term = mapping(raw)
        key, operator = text(term.get("key")), term.get("operator")
        values = [v for v in sequence(term.get("values")) if isinstance(v, str)]
        if operator not in OPERATORS:
            raise SelectorError(f"namespaceSelector.matchExpressions[{i}].operator {operator!r}")
        held = key in namespace_labels
        if operator == "In" and not (held and namespace_labels[key] in values):
            return False
        if operator == "NotIn" and held and namespace_labels[key] in values:
            return False
        if operator == "Exists" and not held:
            return False
        if operator == "DoesNotExist" and held:
            return False
    return True


def _sends_pod_creates(entry: Mapping[str, Any]) -> bool:
    for raw in sequence(entry.get("rules")):
        rule = mapping(raw)
        resources = sequence(rule.get("resources"))
        operations = sequence(rule.get("operations"))
        if ("pods" in resources or "*" in resources) and (
            "CREATE" in operations or "*" in operations
        ):
            return True
    return False


def namespace_labels(namespace: Any) -> dict[str, str]:
    found = {k: v for k, v in labels(namespace).items() if isinstance(v, str)}
    found.setdefault(NAME_LABEL, text(meta(namespace).get("name")))
    return found


def check(view: ClusterView) -> list[Finding]:
    findings: list[Finding] = []
    enrolled: list[Any] = []
    for namespace in view.namespaces:
        value = labels(namespace).get(ENROLL_LABEL)
        name = text(meta(namespace).get("name"))
        if value == "true":
            enrolled.append(namespace)
        elif value is not None:
            findings.append(
                warn(
                    CHECK,
                    f"namespace {name} has label {ENROLL_LABEL}={value!r}, which enrols nothing "
                    '(only "true" does)',
                    f"run: kubectl label namespace {name} {ENROLL_LABEL}=true --overwrite",
                )
            )
    if not enrolled:
        findings.append(
            ok(CHECK, f"no namespace is enrolled (label {ENROLL_LABEL}=true enrols plain pods)")
        )
        return findings
    config = view.find(view.mutating_configurations, PODS_MUTATE)
    exempt = {settings(view).namespace, view.namespace, *ALWAYS_EXEMPT}
    for namespace in enrolled:
        name = text(meta(namespace).get("name"))
        if name in exempt:
            findings.append(
                warn(
                    CHECK,
                    f"namespace {name} is enrolled, but the webhook never sees pods of its own "
                    "namespace or kube-system",
                    f"run: kubectl label namespace {name} {ENROLL_LABEL}-",
                )
            )
            continue
        if config is None:
            findings.append(
                fail(
                    CHECK,
                    f"namespace {name} is enrolled but MutatingWebhookConfiguration {PODS_MUTATE} "
                    "is missing: its pods get no scheduler, queue or PodGroup at admission",
                    "run: kubectl apply -f deploy/webhook.yaml (with /pods/mutate in "
                    "--enabled-admission)",
                )
            )
            continue
        try:
            selecting = [
                text(mapping(e).get("name"))
                for e in sequence(mapping(config).get("webhooks"))
                if _sends_pod_creates(mapping(e))
                and selects(mapping(e).get("namespaceSelector"), namespace_labels(namespace))
            ]
        except SelectorError as err:
            findings.append(
                fail(
                    CHECK,
                    f"MutatingWebhookConfiguration {PODS_MUTATE}: {err}",
                    f"run: {restart(view)}",
                )
            )
            return findings
        if selecting:
            findings.append(
                ok(
                    CHECK,
                    f"namespace {name} is enrolled; {PODS_MUTATE} ({selecting[0]}) sees its pods",
                )
            )
        else:
            findings.append(
                fail(
                    CHECK,
                    f"namespace {name} is enrolled but no webhook of {PODS_MUTATE} selects it",
                    f"run: {restart(view)} (it registers the enrolled.* webhook)",
                )
            )
    return findings


def enrolled_namespaces(view: ClusterView) -> set[str]:
    return {
        text(meta(ns).get("name"))
        for ns in view.namespaces
        if labels(ns).get(ENROLL_LABEL) == "true"
    }

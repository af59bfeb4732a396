"""All checks over one view, in a fixed order; a check that raises on something it did not
foresee becomes a FAIL line instead of ending the report."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from stromboli.core.doctor import certificates, crds, enrolment, operators, rbac, webhook
from stromboli.core.doctor.findings import Finding, fail
from stromboli.core.doctor.view import ClusterView

log = logging.getLogger(__name__)

Check = Callable[[ClusterView], list[Finding]]

CHECKS: tuple[tuple[str, Check, tuple[str, ...]], ...] = (
    ("crds", crds.check, ("CustomResourceDefinition",)),
    ("rbac", rbac.check, ("ServiceAccount", "Deployment")),
    (
        "webhook",
        webhook.check,
        (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
            "Deployment",
            "Service",
            "EndpointSlice",
            "Secret",
        ),
    ),
    ("certificates", certificates.check, ("Deployment", "Secret")),
    ("operators", operators.check, ("Deployment", "Namespace")),
    ("enrolment", enrolment.check, ("Namespace", "MutatingWebhookConfiguration")),
)
"""(family, check, kinds it cannot judge without)."""


def diagnose(view: ClusterView) -> list[Finding]:
    findings: list[Finding] = []
    for kind, reason in sorted(view.unread.items()):
        findings.append(
            fail(
                "doctor", f"could not list {kind}: {reason}", "run doctor as a user who may read it"
            )
        )
    for family, check, needs in CHECKS:
        if any(kind in view.unread for kind in needs):
            continue
        try:
            findings += check(view)
        except Exception as err:  # the report goes on; the line names the error
            log.debug("check %s failed", family, exc_info=True)
            findings.append(
                fail(
                    family,
                    f"the check stopped on something it could not read: "
                    f"{type(err).__name__}: {err}",
                    "report it as a doctor bug; the other checks ran",
                )
            )
    return findings


def render_text(findings: list[Finding]) -> str:
    return "\n".join(f.line() for f in findings)


def render_json(findings: list[Finding], code: int) -> str:
    body = {"exitCode": code, "findings": [f.document() for f in findings]}
    return json.dumps(body, indent=2)

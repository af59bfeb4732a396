from __future__ import annotations

from stromboli.core.doctor import webhook
from stromboli.core.doctor.findings import Severity

from .builders import NS, WEBHOOK_ARGS, b64, deployment, healthy_view, pem_pair

PODS_MUTATE = "volcano-admission-service-pods-mutate"


def failed(view):  # type: ignore[no-untyped-def]
    return [f.message for f in webhook.check(view) if f.severity is Severity.FAIL]


def _pods_mutate(view):  # type: ignore[no-untyped-def]
    return next(c for c in view.mutating_configurations if c["metadata"]["name"] == PODS_MUTATE)


def test_a_healthy_webhook_is_one_ok_per_configuration() -> None:
    findings = webhook.check(healthy_view())
    assert len(findings) == 7
    assert all(f.severity is Severity.OK for f in findings)
    line = next(f.message for f in findings if PODS_MUTATE in f.message)
    assert line == (
        f"MutatingWebhookConfiguration {PODS_MUTATE} → Service {NS}/volcano-admission-service "
        "(2 ready endpoints), caBundle trusts the serving certificate"
    )


def test_a_missing_configuration_fails() -> None:
    view = healthy_view()
    view.mutating_configurations.remove(_pods_mutate(view))
    assert failed(view) == [f"MutatingWebhookConfiguration {PODS_MUTATE} is missing"]


def test_only_the_enabled_paths_are_expected() -> None:
    view = healthy_view()
    view.mutating_configurations.remove(_pods_mutate(view))
    args = [a for a in WEBHOOK_ARGS if not a.startswith("--enabled-admission")]
    args.append("--enabled-admission=/jobs/mutate,/jobs/validate")
    view.deployments[2] = deployment("stromboli-webhook", args=args)
    findings = webhook.check(view)
    assert len(findings) == 2 and all(f.severity is Severity.OK for f in findings)


def test_an_unknown_enabled_path_fails() -> None:
    view = healthy_view()
    view.deployments[2] = deployment(
        "stromboli-webhook", args=[*WEBHOOK_ARGS, "--enabled-admission=/nope"]
    )
    assert failed(view) == [
        f"Deployment {NS}/stromboli-webhook: --enabled-admission names /nope, which the "
        "webhook does not serve"
    ]


def test_no_ca_bundle_fails_with_the_restart_fix() -> None:
    view = healthy_view()
    del _pods_mutate(view)["webhooks"][0]["clientConfig"]["caBundle"]
    [finding] = [f for f in webhook.check(view) if f.severity is Severity.FAIL]
    assert finding.message == (
        f"MutatingWebhookConfiguration {PODS_MUTATE} webhooks[0] (mutatepod.volcano.sh) has no "
        "caBundle"
    )
    assert "rollout restart deployment/stromboli-webhook" in finding.fix


def test_a_ca_bundle_that_is_not_base64_or_not_pem_fails() -> None:
    for bundle, said in (("***", "is not base64"), (b64(b"garbage"), "not a PEM certificate")):
        view = healthy_view()
        _pods_mutate(view)["webhooks"][1]["clientConfig"]["caBundle"] = bundle
        [message] = failed(view)
        assert message.startswith(f"MutatingWebhookConfiguration {PODS_MUTATE} webhooks[1]")
        assert said in message


def test_another_ca_fails() -> None:
    view = healthy_view()
    other_ca, _ = pem_pair(ca_name="someone-else")
    _pods_mutate(view)["webhooks"][0]["clientConfig"]["caBundle"] = b64(other_ca)
    [message] = failed(view)
    assert "no certificate of the caBundle signed the serving certificate" in message


def test_a_ca_with_the_same_name_but_another_key_fails() -> None:
    view = healthy_view()
    other_ca, _ = pem_pair()  # same subject "doctor-ca", other key
    _pods_mutate(view)["webhooks"][0]["clientConfig"]["caBundle"] = b64(other_ca)
    assert len(failed(view)) == 1


def test_no_ready_endpoints_and_no_ready_replica_fail() -> None:
    view = healthy_view()
    for endpoint in view.endpoint_slices[0]["endpoints"]:
        endpoint["conditions"] = {"ready": False}
    view.deployments[2]["status"] = {}
    messages = failed(view)
    assert f"Deployment {NS}/stromboli-webhook has no ready replica" in messages
    assert sum("which has no ready endpoints" in m for m in messages) == 7


def test_a_missing_service_or_port_fails() -> None:
    view = healthy_view()
    view.services[0]["spec"]["ports"] = [{"port": 8443}]
    assert all("points at port 443" in m for m in failed(view))
    view.services = []
    assert all("which does not exist" in m for m in failed(view))


def test_a_url_configuration_is_reported_as_such() -> None:
    view = healthy_view()
    _pods_mutate(view)["webhooks"][0]["clientConfig"] = {
        "url": "https://127.0.0.1:8443/pods/mutate",
        "caBundle": _pods_mutate(view)["webhooks"][1]["clientConfig"]["caBundle"],
    }
    line = next(f.message for f in webhook.check(view) if PODS_MUTATE in f.message)
    assert "URL https://127.0.0.1:8443/pods/mutate" in line


def test_neither_service_nor_url_fails() -> None:
    view = healthy_view()
    _pods_mutate(view)["webhooks"][0]["clientConfig"].pop("service")
    [message] = failed(view)
    assert message.endswith("clientConfig has neither service nor url")


def test_no_webhook_at_all_warns() -> None:
    view = healthy_view()
    view.deployments = view.deployments[:2]
    view.mutating_configurations = []
    view.validating_configurations = []
    [finding] = webhook.check(view)
    assert finding.severity is Severity.WARN
    assert "webhook.enabled=true" in finding.fix


def test_configurations_without_a_deployment_fail() -> None:
    view = healthy_view()
    view.deployments = view.deployments[:2]
    findings = webhook.check(view)
    assert findings[0].severity is Severity.FAIL
    assert "7 volcano-admission-service-* configurations are registered but no Deployment" in (
        findings[0].message
    )


def test_malformed_configurations_are_named() -> None:
    for webhooks in (
        None,
        [],
        "x",
        [None],
        [{"clientConfig": "x"}],
        [{"clientConfig": {"caBundle": 5}}],
    ):
        view = healthy_view()
        _pods_mutate(view)["webhooks"] = webhooks
        [message] = failed(view)
        assert PODS_MUTATE in message

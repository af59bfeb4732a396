from __future__ import annotations

import copy

from stromboli.core.api.crds import build_crds
from stromboli.core.doctor import crds
from stromboli.core.doctor.findings import Severity

from .builders import healthy_view


def by_severity(findings, severity):  # type: ignore[no-untyped-def]
    return [f.message for f in findings if f.severity is severity]


def test_every_generated_crd_is_ok_when_installed_as_generated() -> None:
    findings = crds.check(healthy_view())
    assert len(findings) == len(build_crds())
    assert all(f.severity is Severity.OK for f in findings)


def test_a_missing_crd_fails_and_says_how_to_apply() -> None:
    view = healthy_view()
    view.crds = [c for c in view.crds if c["metadata"]["name"] != "queues.scheduling.volcano.sh"]
    [finding] = [f for f in crds.check(view) if f.severity is Severity.FAIL]
    assert finding.message == "CustomResourceDefinition queues.scheduling.volcano.sh is missing"
    assert "kubectl apply -f deploy/crds/" in finding.fix


def _podgroups(view):  # type: ignore[no-untyped-def]
    return next(c for c in view.crds if c["metadata"]["name"] == "podgroups.scheduling.volcano.sh")


def test_a_version_not_served_or_not_stored_fails() -> None:
    view = healthy_view()
    version = _podgroups(view)["spec"]["versions"][0]
    version["served"] = False
    version["storage"] = False
    failed = by_severity(crds.check(view), Severity.FAIL)
    assert any("version v1beta1 is not served" in m for m in failed)
    assert any("is not the storage version" in m for m in failed)


def test_another_version_only_fails_naming_what_it_has() -> None:
    view = healthy_view()
    _podgroups(view)["spec"]["versions"][0]["name"] = "v1alpha1"
    [message] = by_severity(crds.check(view), Severity.FAIL)
    assert message.endswith("does not define version v1beta1 (it has: v1alpha1)")


def test_not_established_fails() -> None:
    view = healthy_view()
    _podgroups(view)["status"]["conditions"][0]["status"] = "False"
    assert any("is not Established" in m for m in by_severity(crds.check(view), Severity.FAIL))


def test_old_stored_versions_warn() -> None:
    view = healthy_view()
    _podgroups(view)["status"]["storedVersions"] = ["v1alpha1", "v1beta1"]
    [message] = by_severity(crds.check(view), Severity.WARN)
    assert "may still be stored as v1alpha1" in message


def test_a_schema_that_prunes_our_fields_fails_naming_them() -> None:
    view = healthy_view()
    schema = _podgroups(view)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    del schema["properties"]["spec"]["properties"]["minMember"]
    [message] = by_severity(crds.check(view), Severity.FAIL)
    assert "the stored schema lacks spec.minMember;" in message


def test_a_schema_differing_only_in_descriptions_warns() -> None:
    view = healthy_view()
    schema = _podgroups(view)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["description"] = "edited by hand"
    [message] = by_severity(crds.check(view), Severity.WARN)
    assert "stored schema differs" in message


def test_preserved_unknown_fields_prune_nothing() -> None:
    view = healthy_view()
    _podgroups(view)["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert by_severity(crds.check(view), Severity.FAIL) == []


def test_weird_schemas_are_findings_not_crashes() -> None:
    for weird in (
        None,
        [],
        "text",
        7,
        {"properties": []},
        {"properties": {"spec": 3}},
        {"items": [1, 2]},
        {"properties": {"spec": {"properties": {"x": None}}}},
    ):
        view = healthy_view()
        _podgroups(view)["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": weird}
        failed = by_severity(crds.check(view), Severity.FAIL)
        assert failed and all("podgroups.scheduling.volcano.sh" in m for m in failed)


def test_a_crd_that_is_not_a_mapping_reads_as_missing_fields() -> None:
    view = healthy_view()
    bad = copy.deepcopy(_podgroups(view))
    bad["spec"] = ["not", "a", "spec"]
    view.crds = [c for c in view.crds if c is not _podgroups(view)] + [bad]
    [message] = by_severity(crds.check(view), Severity.FAIL)
    assert message.startswith("CustomResourceDefinition podgroups.scheduling.volcano.sh does not")

"""The Helm chart, rendered and linted by Helm itself.

Debian ships no helm, and no registry package ships a Linux ``helm`` binary, but PyPI's
``helm-python-sdk`` (a pinned dev dependency) bundles Helm's own Go SDK (v4) as a shared
library: :func:`render` is ``helm template`` and :func:`helm.lint` is ``helm lint``, with
Helm's template engine, Sprig functions and values-schema validation, not an imitation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from stromboli.core.cli.webhook import webhook_manager
from stromboli.core.scheduler.conf import parse_config
from stromboli.webhooks.services import DEFAULT_ENABLED_ADMISSION, SERVICES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "stromboli"
PLAIN = ("rbac.yaml", "scheduler.yaml", "controller.yaml", "webhook.yaml")
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")

Key = tuple[str, str | None, str]


def render(values: dict[str, Any] | None = None, **release: str) -> dict[Key, dict]:
    """``helm template`` of the chart: every object by (kind, namespace, name)."""
    name = release.get("name", "stromboli")
    namespace = release.get("namespace", "volcano-system")
    with helm.Chart.load(CHART) as chart:
        files = chart.render(values or {}, name=name, namespace=namespace)
    objects: dict[Key, dict] = {}
    for path, text in files.items():
        if not path.endswith(".yaml"):
            continue
        for obj in yaml.safe_load_all(text):
            if obj:
                key = object_key(obj)
                assert key not in objects, f"{key} rendered twice"
                objects[key] = obj
    return objects


def object_key(obj: dict) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace"), meta["name"])


def plain_objects() -> dict[Key, dict]:
    objects = {}
    for name in PLAIN:
        for obj in yaml.safe_load_all((DEPLOY / name).read_text()):
            objects[object_key(obj)] = obj
    return objects


def without_helm_labels(obj: dict) -> dict:
    labels = obj["metadata"].get("labels") or {}
    for label in HELM_ONLY_LABELS:
        labels.pop(label, None)
    return obj


def container(objects: dict[Key, dict], deployment: str, namespace: str = "volcano-system"):
    spec = objects[("Deployment", namespace, deployment)]["spec"]["template"]["spec"]
    return spec["containers"][0]


def args_of(objects: dict[Key, dict], deployment: str, namespace: str = "volcano-system"):
    return container(objects, deployment, namespace)["args"]


def flags(args: list[str]) -> Iterator[tuple[str, str]]:
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            yield name, value


def test_helm_lint_finds_nothing_to_fix() -> None:
    report = helm.lint(CHART, strict=True, namespace="volcano-system")
    assert report["errors"] == []
    worse_than_info = [m for m in report["messages"] if m["severity"] >= 2]
    assert worse_than_info == []


def test_default_render_is_the_plain_manifests() -> None:
    """`helm template` with the default values gives exactly deploy/{rbac,scheduler,controller,
    webhook}.yaml, apart from the two labels Helm conventionally adds."""
    rendered = {key: without_helm_labels(obj) for key, obj in render().items()}
    plain = plain_objects()
    assert sorted(rendered) == sorted(plain)
    for key, obj in plain.items():
        assert rendered[key] == obj, f"{key} differs between the chart and deploy/"


def test_every_rendered_object_carries_the_helm_labels() -> None:
    for key, obj in render().items():
        labels = obj["metadata"]["labels"]
        assert labels["helm.sh/chart"] == "stromboli-0.1.0", key
        assert labels["app.kubernetes.io/managed-by"] == "Helm", key


def test_chart_crds_are_the_generated_ones() -> None:
    with helm.Chart.load(CHART) as chart:
        crds = {Path(f["name"]).name: f["data"] for f in chart.crds}
    plain = {p.name: p.read_text() for p in sorted((DEPLOY / "crds").glob("*.yaml"))}
    assert crds == plain
    assert "queues.scheduling.volcano.sh" in "".join(crds.values())


def test_default_scheduler_conf_is_volcanos_helm_default_and_parses() -> None:
    conf = render()[("ConfigMap", "volcano-system", "volcano-scheduler-configmap")]["data"][
        "volcano-scheduler.conf"
    ]
    config = parse_config(conf, "values.yaml scheduler.conf")
    assert config.actions == ["enqueue", "allocate", "backfill"]
    tiers = [[p.name for p in tier] for tier in config.tiers]
    assert tiers == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]
    by_name = {p.name: p for tier in config.tiers for p in tier}
    assert not by_name["gang"].enabled("preemptable")
    assert not by_name["drf"].enabled("preemptable")
    assert by_name["binpack"].enabled("node_order")


def test_values_reach_the_manifests() -> None:
    conf = 'actions: "enqueue, allocate, preempt"\ntiers:\n- plugins:\n  - name: gang\n'
    objects = render(
        {
            "image": {"repository": "registry.example/stromboli", "tag": "1.2.3"},
            "schedulerNames": ["volcano", "batch"],
            "leaderElection": {"namespace": "locks"},
            "scheduler": {
                "replicas": 2,
                "conf": conf,
                "schedulePeriod": "500ms",
                "earlyCycleGap": "0",
                "defaultQueue": "research",
                "kubeAPI": {"qps": 300, "burst": 600},
                "resources": {"requests": {"cpu": "2"}},
                "extraArgs": ["--node-selector=pool:batch"],
                "nodeSelector": {"pool": "system"},
                "tolerations": [{"key": "system", "operator": "Exists"}],
            },
            "controller": {"workerThreads": 8},
        },
        name="batch",
        namespace="ops",
    )
    cm = objects[("ConfigMap", "ops", "volcano-scheduler-configmap")]
    assert cm["data"]["volcano-scheduler.conf"] == conf
    deployment = objects[("Deployment", "ops", "batch-scheduler")]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "batch-scheduler"
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == [{"key": "system", "operator": "Exists"}]
    main = container(objects, "batch-scheduler", "ops")
    assert main["image"] == "registry.example/stromboli:1.2.3"
    # Helm merges maps from the user over the chart's defaults.
    assert main["resources"] == {
        "requests": {"cpu": "2", "memory": "512Mi"},
        "limits": {"memory": "2Gi"},
    }
    scheduler_flags = list(flags(main["args"]))
    assert scheduler_flags.count(("--scheduler-name", "volcano")) == 1
    assert ("--scheduler-name", "batch") in scheduler_flags
    for expected in [
        ("--schedule-period", "500ms"),
        ("--early-cycle-gap", "0"),
        ("--default-queue", "research"),
        ("--kube-api-qps", "300"),
        ("--kube-api-burst", "600"),
        ("--leader-elect", "true"),
        ("--lock-object-namespace", "locks"),
        ("--node-selector", "pool:batch"),
    ]:
        assert expected in scheduler_flags
    controller_flags = dict(flags(args_of(objects, "batch-controller", "ops")))
    assert controller_flags["--worker-threads"] == "8"
    assert controller_flags["--lock-object-namespace"] == "locks"
    role = objects[("Role", "locks", "batch-scheduler-leader-election")]
    assert role["rules"][1]["resourceNames"] == ["vc-scheduler"]
    binding = objects[("ClusterRoleBinding", None, "batch-scheduler")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "batch-scheduler", "namespace": "ops"}
    ]


@pytest.mark.parametrize("mode", ["object", "memory"])
def test_plain_pod_groups_reach_scheduler_and_controller_alike(mode: str) -> None:
    objects = render({"plainPodGroups": mode})
    for name in ("stromboli-scheduler", "stromboli-controller"):
        given = [
            v
            for f, v in flags(args_of(objects, name, "volcano-system"))
            if f == "--plain-pod-groups"
        ]
        assert given == [mode], name


def test_switches_turn_objects_off() -> None:
    objects = render({"leaderElection": {"enabled": False}, "controller": {"enabled": False}})
    kinds = {(kind, name) for kind, _, name in objects}
    assert ("Deployment", "stromboli-controller") not in kinds
    assert ("ClusterRole", "stromboli-controller") not in kinds
    # Only the webhook's certificate-Secret Role is left (the leader-election ones are gone).
    assert not any(
        kind in ("Role", "RoleBinding") and name != "stromboli-webhook" for kind, name in kinds
    )
    assert ("--leader-elect", "false") in flags(args_of(objects, "stromboli-scheduler"))

    no_rbac = render({"rbac": {"create": False}})
    assert {kind for kind, _, _ in no_rbac} == {
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    }


def test_default_webhook_args_are_webhook_manager_flags() -> None:
    """Every flag the chart passes is one `stromboli webhook-manager` takes, and the default
    admission paths are the server's own default."""
    known = {opt for param in webhook_manager.params for opt in param.opts}
    args = args_of(render(), "stromboli-webhook")
    assert args[0] == "webhook-manager"
    rendered = dict(flags(args))
    assert set(rendered) <= known
    assert rendered["--enabled-admission"] == DEFAULT_ENABLED_ADMISSION


def test_values_schema_knows_every_admission_path() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    paths = schema["properties"]["webhook"]["properties"]["enabledAdmission"]["items"]["enum"]
    assert sorted(paths) == sorted(SERVICES)


def test_webhook_values_reach_the_manifests() -> None:
    objects = render(
        {
            "schedulerNames": ["volcano", "batch"],
            "webhook": {
                "replicas": 2,
                "port": 9443,
                "serviceName": "batch-admission",
                "enabledAdmission": ["/jobs/validate", "/queues/validate"],
                "kubeAPI": {"qps": 20, "burst": 40},
                "tls": {"secretName": "batch-admission-tls"},
                "extraArgs": ["--max-queue-depth=3"],
                "nodeSelector": {"pool": "system"},
            },
        },
        name="batch",
        namespace="ops",
    )
    deployment = objects[("Deployment", "ops", "batch-webhook")]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "batch-webhook"
    assert pod["nodeSelector"] == {"pool": "system"}
    assert {"name": "tls", "secret": {"secretName": "batch-admission-tls"}} in pod["volumes"]
    main = container(objects, "batch-webhook", "ops")
    assert main["ports"][0] == {"name": "https", "containerPort": 9443, "protocol": "TCP"}
    mount = next(m for m in main["volumeMounts"] if m["name"] == "tls")
    assert mount["readOnly"] is True
    webhook_flags = list(flags(main["args"]))
    for expected in [
        ("--port", "9443"),
        ("--webhook-namespace", "ops"),
        ("--webhook-service-name", "batch-admission"),
        ("--enabled-admission", "/jobs/validate,/queues/validate"),
        ("--scheduler-name", "volcano"),
        ("--scheduler-name", "batch"),
        ("--tls-cert-file", f"{mount['mountPath']}/tls.crt"),
        ("--tls-private-key-file", f"{mount['mountPath']}/tls.key"),
        ("--ca-cert-file", f"{mount['mountPath']}/ca.crt"),
        ("--kube-api-qps", "20"),
        ("--kube-api-burst", "40"),
        ("--max-queue-depth", "3"),
    ]:
        assert expected in webhook_flags
    # The configurations the server writes point at this Service, port 443.
    service = objects[("Service", "ops", "batch-admission")]
    assert service["spec"]["ports"][0]["port"] == 443
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    binding = objects[("ClusterRoleBinding", None, "batch-webhook")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "batch-webhook", "namespace": "ops"}
    ]


def test_webhook_switch_removes_only_the_webhook() -> None:
    everything = render()
    objects = render({"webhook": {"enabled": False}})
    webhook = {
        key
        for key, obj in everything.items()
        if obj["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
    }
    assert len(webhook) == 8  # + Role/RoleBinding (certificate Secret), PodDisruptionBudget
    assert sorted(objects) == sorted(set(everything) - webhook)
    assert ("Service", "volcano-system", "volcano-admission-service") not in objects


@pytest.mark.parametrize(
    "values",
    [
        {"scheduler": {"replicas": -1}},
        {"schedulerNames": []},
        {"scheduler": {"schedulePeriod": "soon"}},
        {"scheduler": {"earlyCycleGap": "early"}},
        {"image": {"pullPolicy": "Sometimes"}},
        {"webhook": {"enabledAdmission": ["/jobs/admit"]}},
        {"webhook": {"enabledAdmission": []}},
        {"webhook": {"podsFailurePolicy": "Sometimes"}},
        {"plainPodGroups": "fast"},
    ],
)
def test_values_schema_rejects_nonsense(values: dict) -> None:
    with pytest.raises(helm.HelmValuesError):
        render(values)

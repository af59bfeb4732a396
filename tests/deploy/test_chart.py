"""The Helm chart, rendered and linted by Helm itself.

Debian ships no helm, and no registry package ships a Linux ``helm`` binary, but PyPI's
``helm-python-sdk`` (a pinned dev dependency) bundles Helm's own Go SDK (v4) as a shared
library: :func:`render` is ``helm template`` and :func:`helm.lint` is ``helm lint``, with
Helm's template engine, Sprig functions and values-schema validation, not an imitation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from stromboli.core.scheduler.conf import parse_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "stromboli"
PLAIN = ("rbac.yaml", "scheduler.yaml", "controller.yaml")
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
    """`helm template` with the default values gives exactly deploy/{rbac,scheduler,controller}
    .yaml, apart from the two labels Helm conventionally adds."""
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


def test_switches_turn_objects_off() -> None:
    objects = render({"leaderElection": {"enabled": False}, "controller": {"enabled": False}})
    kinds = {(kind, name) for kind, _, name in objects}
    assert ("Deployment", "stromboli-controller") not in kinds
    assert ("ClusterRole", "stromboli-controller") not in kinds
    assert not any(kind in ("Role", "RoleBinding") for kind, _ in kinds)
    assert ("--leader-elect", "false") in flags(args_of(objects, "stromboli-scheduler"))

    no_rbac = render({"rbac": {"create": False}})
    assert {kind for kind, _, _ in no_rbac} == {"ConfigMap", "Deployment", "Service"}


@pytest.mark.parametrize(
    "values",
    [
        {"scheduler": {"replicas": -1}},
        {"schedulerNames": []},
        {"scheduler": {"schedulePeriod": "soon"}},
        {"image": {"pullPolicy": "Sometimes"}},
    ],
)
def test_values_schema_rejects_nonsense(values: dict) -> None:
    with pytest.raises(helm.HelmValuesError):
        render(values)
